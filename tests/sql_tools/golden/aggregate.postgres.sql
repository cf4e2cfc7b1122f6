-- aggregate: metric_aggregate: sum, count distinct, count, max by region; between, not_null on a joined column, not_in, >=, <
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 14)
-- p3 = 'LATAM'
-- p4 = 2
-- p5 = 1000.5
SELECT
  "t0"."region" AS "region",
  SUM("t0"."revenue") AS "sum_revenue",
  COUNT(DISTINCT "t0"."customer_id") AS "count_distinct_customer_id",
  COUNT(*) AS "count",
  MAX("t0"."day") AS "max_day",
  COUNT(*) OVER () AS "__matched"
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
WHERE
  "t0"."day" BETWEEN %(p1)s AND %(p2)s
  AND NOT "t1"."tier" IS NULL
  AND NOT "t0"."region" IN (%(p3)s)
  AND "t0"."orders" >= %(p4)s
  AND "t0"."revenue" < %(p5)s
GROUP BY
  "t0"."region"
ORDER BY
  "sum_revenue" DESC NULLS LAST,
  "region"
LIMIT 51
