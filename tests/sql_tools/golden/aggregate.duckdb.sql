-- aggregate: metric_aggregate: sum, count distinct, count, max by region; between, not_null on a joined column, not_in, >=, <
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 14)
-- p3 = 'LATAM'
-- p4 = 2
-- p5 = 1000.5
SELECT
  "t0"."region" AS "__dd_g0",
  SUM("t0"."revenue") AS "__dd_m0",
  COUNT(DISTINCT "t0"."customer_id") AS "__dd_m1",
  COUNT(*) AS "__dd_m2",
  MAX("t0"."day") AS "__dd_m3",
  COUNT(*) OVER () AS "__dd_matched"
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
WHERE
  "t0"."day" BETWEEN $p1 AND $p2
  AND NOT "t1"."tier" IS NULL
  AND NOT "t0"."region" IN ($p3)
  AND "t0"."orders" >= $p4
  AND "t0"."revenue" < $p5
GROUP BY
  "t0"."region"
ORDER BY
  2 DESC,
  1
LIMIT 51
