-- compare_periods_non_finite: metric_compare_periods' follow-up: NaN and ±Infinity in the rows it read
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'Gizmo'
-- p6 = 'gold'
-- p7 = 'silver'
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
  (
    "t0"."day" BETWEEN :1 AND :2 OR "t0"."day" BETWEEN :3 AND :4
  )
  AND (
    "t0"."product" <> :5 AND "t1"."tier" IN (:6, :7)
  )
