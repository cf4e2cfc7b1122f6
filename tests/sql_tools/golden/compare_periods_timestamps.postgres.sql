-- compare_periods_timestamps: metric_compare_periods: date ranges on a TIMESTAMP column, a non-additive avg
-- p1 = datetime.datetime(2024, 1, 1, 0, 0)
-- p2 = datetime.datetime(2024, 1, 8, 0, 0)
-- p3 = datetime.datetime(2024, 1, 8, 0, 0)
-- p4 = datetime.datetime(2024, 1, 15, 0, 0)
WITH "seg" AS (
  SELECT
    "t0"."page" AS "page",
    AVG("t0"."visits") FILTER(WHERE
      "t0"."ts" >= %(p1)s AND "t0"."ts" < %(p2)s) AS "baseline",
    AVG("t0"."visits") FILTER(WHERE
      "t0"."ts" >= %(p3)s AND "t0"."ts" < %(p4)s) AS "comparison",
    COUNT(*) FILTER(WHERE
      "t0"."ts" >= %(p1)s AND "t0"."ts" < %(p2)s) AS "baseline_rows",
    COUNT(*) FILTER(WHERE
      "t0"."ts" >= %(p3)s AND "t0"."ts" < %(p4)s) AS "comparison_rows"
  FROM "visits" AS "t0"
  WHERE
    (
      "t0"."ts" >= %(p1)s AND "t0"."ts" < %(p2)s
    )
    OR (
      "t0"."ts" >= %(p3)s AND "t0"."ts" < %(p4)s
    )
  GROUP BY
    "t0"."page"
), "tot" AS (
  SELECT
    AVG("t0"."visits") FILTER(WHERE
      "t0"."ts" >= %(p1)s AND "t0"."ts" < %(p2)s) AS "baseline",
    AVG("t0"."visits") FILTER(WHERE
      "t0"."ts" >= %(p3)s AND "t0"."ts" < %(p4)s) AS "comparison"
  FROM "visits" AS "t0"
  WHERE
    (
      "t0"."ts" >= %(p1)s AND "t0"."ts" < %(p2)s
    )
    OR (
      "t0"."ts" >= %(p3)s AND "t0"."ts" < %(p4)s
    )
)
SELECT
  "seg"."page",
  "seg"."baseline",
  "seg"."comparison",
  (
    "seg"."comparison" - "seg"."baseline"
  ) AS "delta",
  CAST((
    "seg"."comparison" - "seg"."baseline"
  ) AS DOUBLE PRECISION) / NULLIF(ABS("seg"."baseline"), 0) AS "relative_delta",
  CAST((
    "seg"."comparison" - "seg"."baseline"
  ) AS DOUBLE PRECISION) / NULLIF((
    "tot"."comparison" - "tot"."baseline"
  ), 0) AS "share_of_delta",
  "seg"."baseline_rows",
  "seg"."comparison_rows",
  "tot"."baseline" AS "__total_baseline",
  "tot"."comparison" AS "__total_comparison",
  COUNT(*) OVER () AS "__matched"
FROM "seg"
CROSS JOIN "tot"
WHERE
  "seg"."baseline_rows" > 0 OR "seg"."comparison_rows" > 0
ORDER BY
  ABS((
    (
      "seg"."comparison" - "seg"."baseline"
    )
  )) DESC NULLS LAST,
  "seg"."page"
LIMIT 51
