-- engine_daily: engine daily series: per-day totals of a ratio
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  "__day",
  "__p",
  SUM("__n") AS "n",
  SUM("__d") AS "d"
FROM (
  SELECT
    CASE WHEN "t0"."day" BETWEEN %(p3)s AND %(p4)s THEN 1 ELSE 0 END AS "__p",
    CAST("t0"."day" AS DATE) AS "__day",
    CAST(CASE
      WHEN (
        "t0"."revenue" > CAST('-Infinity' AS DOUBLE PRECISION)
        AND "t0"."revenue" < CAST('Infinity' AS DOUBLE PRECISION)
      )
      THEN "t0"."revenue"
      ELSE NULL
    END AS DOUBLE PRECISION) AS "__n",
    CAST("t0"."orders" AS DOUBLE PRECISION) AS "__d"
  FROM "sales" AS "t0"
  WHERE
    "t0"."day" BETWEEN %(p1)s AND %(p2)s OR "t0"."day" BETWEEN %(p3)s AND %(p4)s
) AS "b"
GROUP BY
  "__day",
  "__p"
ORDER BY
  "__day"
