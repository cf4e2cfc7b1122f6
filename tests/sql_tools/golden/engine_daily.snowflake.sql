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
    IFF("t0"."day" BETWEEN :3 AND :4, 1, 0) AS "__p",
    CAST("t0"."day" AS DATE) AS "__day",
    CAST(IFF(
      (
        NOT "t0"."revenue" IN (CAST('NaN' AS DOUBLE), CAST('inf' AS DOUBLE), CAST('-inf' AS DOUBLE))
      ),
      "t0"."revenue",
      NULL
    ) AS DOUBLE) AS "__n",
    CAST("t0"."orders" AS DOUBLE) AS "__d"
  FROM "sales" AS "t0"
  WHERE
    "t0"."day" BETWEEN :1 AND :2 OR "t0"."day" BETWEEN :3 AND :4
)
GROUP BY
  "__day",
  "__p"
ORDER BY
  "__day"
