-- compare_periods_timestamps: metric_compare_periods: date ranges on a TIMESTAMP column, a non-additive avg
-- p1 = datetime.datetime(2024, 1, 1, 0, 0)
-- p2 = datetime.datetime(2024, 1, 8, 0, 0)
-- p3 = datetime.datetime(2024, 1, 8, 0, 0)
-- p4 = datetime.datetime(2024, 1, 15, 0, 0)
WITH "seg" AS (
  SELECT
    "t0"."page" AS "page",
    AVG(IFF("t0"."ts" >= :1 AND "t0"."ts" < :2, "t0"."visits", NULL)) AS "baseline",
    AVG(IFF("t0"."ts" >= :3 AND "t0"."ts" < :4, "t0"."visits", NULL)) AS "comparison",
    COUNT_IF("t0"."ts" >= :1 AND "t0"."ts" < :2) AS "baseline_rows",
    COUNT_IF("t0"."ts" >= :3 AND "t0"."ts" < :4) AS "comparison_rows"
  FROM "visits" AS "t0"
  WHERE
    (
      "t0"."ts" >= :1 AND "t0"."ts" < :2
    )
    OR (
      "t0"."ts" >= :3 AND "t0"."ts" < :4
    )
  GROUP BY
    "t0"."page"
), "tot" AS (
  SELECT
    AVG(IFF("t0"."ts" >= :1 AND "t0"."ts" < :2, "t0"."visits", NULL)) AS "baseline",
    AVG(IFF("t0"."ts" >= :3 AND "t0"."ts" < :4, "t0"."visits", NULL)) AS "comparison"
  FROM "visits" AS "t0"
  WHERE
    (
      "t0"."ts" >= :1 AND "t0"."ts" < :2
    )
    OR (
      "t0"."ts" >= :3 AND "t0"."ts" < :4
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
  ) AS DOUBLE) / NULLIF(ABS("seg"."baseline"), 0) AS "relative_delta",
  CAST((
    "seg"."comparison" - "seg"."baseline"
  ) AS DOUBLE) / NULLIF((
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
  ABS("delta") DESC NULLS LAST,
  "seg"."page"
LIMIT 51
