-- compare_periods_labels: metric_compare_periods: labels of a period column, a distinct count, no segments
-- p1 = 'EU'
-- p2 = 'US'
WITH "__dd_seg" AS (
  SELECT
    COUNT(DISTINCT IFF("t0"."region" = :1, "t0"."customer_id", NULL)) AS "__dd_baseline",
    COUNT(DISTINCT IFF("t0"."region" = :2, "t0"."customer_id", NULL)) AS "__dd_comparison",
    COUNT_IF("t0"."region" = :1) AS "__dd_baseline_rows",
    COUNT_IF("t0"."region" = :2) AS "__dd_comparison_rows"
  FROM "sales" AS "t0"
  WHERE
    "t0"."region" = :1 OR "t0"."region" = :2
), "__dd_tot" AS (
  SELECT
    COUNT(DISTINCT IFF("t0"."region" = :1, "t0"."customer_id", NULL)) AS "__dd_baseline",
    COUNT(DISTINCT IFF("t0"."region" = :2, "t0"."customer_id", NULL)) AS "__dd_comparison"
  FROM "sales" AS "t0"
  WHERE
    "t0"."region" = :1 OR "t0"."region" = :2
)
SELECT
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
  ABS("__dd_delta") DESC NULLS LAST
LIMIT 51
