-- engine_distinct_totals: engine: a distinct count's exact value per period, per day
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  "__p",
  SUM("n") AS "n"
FROM (
  SELECT
    "__p",
    "__day",
    COUNT(DISTINCT "__un") AS "n"
  FROM (
    SELECT
      CASE WHEN "t0"."day" BETWEEN %(p3)s AND %(p4)s THEN 1 ELSE 0 END AS "__p",
      CAST("t0"."day" AS DATE) AS "__day",
      CASE WHEN NOT "t0"."customer_id" IS NULL THEN 1 ELSE 0 END AS "__n",
      "t0"."customer_id" AS "__un",
      1 AS "__d"
    FROM "sales" AS "t0"
    WHERE
      "t0"."day" BETWEEN %(p1)s AND %(p2)s OR "t0"."day" BETWEEN %(p3)s AND %(p4)s
  ) AS "b"
  GROUP BY
    "__p",
    "__day"
) AS "i"
GROUP BY
  "__p"
