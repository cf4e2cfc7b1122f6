-- aggregate_non_finite: metric_aggregate's follow-up: NaN and ±Infinity in the rows it read
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 14)
-- p3 = 'LATAM'
-- p4 = 2
-- p5 = 1000.5
SELECT
  COUNT_IF((
    "t0"."revenue" = CAST('NaN' AS DOUBLE)
  )),
  COUNT_IF(
    (
      "t0"."revenue" IN (CAST('inf' AS DOUBLE), CAST('-inf' AS DOUBLE))
    )
    AND "t0"."revenue" > 0
  ),
  COUNT_IF(
    (
      "t0"."revenue" IN (CAST('inf' AS DOUBLE), CAST('-inf' AS DOUBLE))
    )
    AND "t0"."revenue" < 0
  )
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
WHERE
  "t0"."day" BETWEEN :1 AND :2
  AND NOT "t1"."tier" IS NULL
  AND NOT "t0"."region" IN (:3)
  AND "t0"."orders" >= :4
  AND "t0"."revenue" < :5
