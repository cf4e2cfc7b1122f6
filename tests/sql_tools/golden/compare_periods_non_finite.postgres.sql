-- compare_periods_non_finite: metric_compare_periods' follow-up: NaN and ±Infinity in the rows it read
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'Gizmo'
-- p6 = 'gold'
-- p7 = 'silver'
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
  (
    "t0"."day" BETWEEN %(p1)s AND %(p2)s OR "t0"."day" BETWEEN %(p3)s AND %(p4)s
  )
  AND (
    "t0"."product" <> %(p5)s AND "t1"."tier" IN (%(p6)s, %(p7)s)
  )
