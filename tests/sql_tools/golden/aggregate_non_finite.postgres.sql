-- aggregate_non_finite: metric_aggregate's follow-up: NaN and ±Infinity in the rows it read
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 14)
-- p3 = 'LATAM'
-- p4 = 2
-- p5 = 1000.5
SELECT
  COUNT(*) FILTER(WHERE
    (
      "t0"."revenue" = CAST('NaN' AS DOUBLE PRECISION)
    )),
  COUNT(*) FILTER(WHERE
    (
      "t0"."revenue" IN (CAST('Infinity' AS DOUBLE PRECISION), CAST('-Infinity' AS DOUBLE PRECISION))
    )
    AND "t0"."revenue" > 0),
  COUNT(*) FILTER(WHERE
    (
      "t0"."revenue" IN (CAST('Infinity' AS DOUBLE PRECISION), CAST('-Infinity' AS DOUBLE PRECISION))
    )
    AND "t0"."revenue" < 0)
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
WHERE
  "t0"."day" BETWEEN %(p1)s AND %(p2)s
  AND NOT "t1"."tier" IS NULL
  AND NOT "t0"."region" IN (%(p3)s)
  AND "t0"."orders" >= %(p4)s
  AND "t0"."revenue" < %(p5)s
