-- compare_periods_labels: metric_compare_periods: labels of a period column, a distinct count, no segments
-- p1 = 'EU'
-- p2 = 'US'
WITH "__dd_seg" AS (
  SELECT
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p1) AS "__dd_baseline",
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p2) AS "__dd_comparison",
    COUNT(*) FILTER(WHERE
      "t0"."region" = $p1) AS "__dd_baseline_rows",
    COUNT(*) FILTER(WHERE
      "t0"."region" = $p2) AS "__dd_comparison_rows"
  FROM "sales" AS "t0"
  WHERE
    "t0"."region" = $p1 OR "t0"."region" = $p2
), "__dd_tot" AS (
  SELECT
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p1) AS "__dd_baseline",
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p2) AS "__dd_comparison"
  FROM "sales" AS "t0"
  WHERE
    "t0"."region" = $p1 OR "t0"."region" = $p2
)
SELECT
  "__dd_seg"."__dd_baseline",
  "__dd_seg"."__dd_comparison",
  (
    "__dd_seg"."__dd_comparison" - "__dd_seg"."__dd_baseline"
  ) AS "__dd_delta",
  (
    "__dd_seg"."__dd_comparison" - "__dd_seg"."__dd_baseline"
  ) / NULLIF(ABS("__dd_seg"."__dd_baseline"), 0) AS "__dd_relative_delta",
  (
    "__dd_seg"."__dd_comparison" - "__dd_seg"."__dd_baseline"
  ) / NULLIF((
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
  ABS("__dd_delta") DESC
LIMIT 51
