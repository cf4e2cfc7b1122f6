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
    CASE WHEN "t0"."day" BETWEEN $p3 AND $p4 THEN 1 ELSE 0 END AS "__p",
    CAST("t0"."day" AS DATE) AS "__day",
    CAST(CASE WHEN ISFINITE("t0"."revenue") THEN "t0"."revenue" ELSE NULL END AS DOUBLE) AS "__n",
    CAST("t0"."orders" AS DOUBLE) AS "__d"
  FROM "sales" AS "t0"
  WHERE
    "t0"."day" BETWEEN $p1 AND $p2 OR "t0"."day" BETWEEN $p3 AND $p4
)
GROUP BY
  "__day",
  "__p"
ORDER BY
  "__day"
