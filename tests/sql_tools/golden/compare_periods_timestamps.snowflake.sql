-- compare_periods_timestamps: metric_compare_periods: date ranges on a TIMESTAMP column, a non-additive avg
-- p1 = datetime.datetime(2024, 1, 1, 0, 0)
-- p2 = datetime.datetime(2024, 1, 8, 0, 0)
-- p3 = datetime.datetime(2024, 1, 8, 0, 0)
-- p4 = datetime.datetime(2024, 1, 15, 0, 0)
WITH "__dd_seg" AS (
  SELECT
    "t0"."page" AS "__dd_g0",
    AVG(IFF("t0"."ts" >= :1 AND "t0"."ts" < :2, "t0"."visits", NULL)) AS "__dd_baseline",
    AVG(IFF("t0"."ts" >= :3 AND "t0"."ts" < :4, "t0"."visits", NULL)) AS "__dd_comparison",
    COUNT_IF("t0"."ts" >= :1 AND "t0"."ts" < :2) AS "__dd_baseline_rows",
    COUNT_IF("t0"."ts" >= :3 AND "t0"."ts" < :4) AS "__dd_comparison_rows"
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
), "__dd_tot" AS (
  SELECT
    AVG(IFF("t0"."ts" >= :1 AND "t0"."ts" < :2, "t0"."visits", NULL)) AS "__dd_baseline",
    AVG(IFF("t0"."ts" >= :3 AND "t0"."ts" < :4, "t0"."visits", NULL)) AS "__dd_comparison"
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
  "__dd_seg"."__dd_g0",
  "__dd_seg"."__dd_baseline",
  "__dd_seg"."__dd_comparison",
  (
    "__dd_seg"."__dd_comparison" - "__dd_seg"."__dd_baseline"
  ) AS "__dd_delta",
  CAST((
    "__dd_seg"."__dd_comparison" - "__dd_seg"."__dd_baseline"
  ) AS DOUBLE) / NULLIF(ABS("__dd_seg"."__dd_baseline"), 0) AS "__dd_relative_delta",
  CAST((
    "__dd_seg"."__dd_comparison" - "__dd_seg"."__dd_baseline"
  ) AS DOUBLE) / NULLIF((
    "__dd_tot"."__dd_comparison" - "__dd_tot"."__dd_baseline"
  ), 0) AS "__dd_share_of_delta",
  "__dd_seg"."__dd_baseline_rows",
  "__dd_seg"."__dd_comparison_rows",
  "__dd_tot"."__dd_baseline" AS "__dd_total_baseline",
  "__dd_tot"."__dd_comparison" AS "__dd_total_comparison",
  COUNT(*) OVER () AS "__dd_matched"
FROM "__dd_seg"
CROSS JOIN "__dd_tot"
WHERE
  "__dd_seg"."__dd_baseline_rows" > 0 OR "__dd_seg"."__dd_comparison_rows" > 0
ORDER BY
  ABS("__dd_delta") DESC NULLS LAST,
  "__dd_seg"."__dd_g0"
LIMIT 51
