-- compare_periods_labels: metric_compare_periods: labels of a period column, a distinct count, no segments
-- p1 = 'EU'
-- p2 = 'US'
WITH "seg" AS (
  SELECT
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p1) AS "baseline",
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p2) AS "comparison",
    COUNT(*) FILTER(WHERE
      "t0"."region" = $p1) AS "baseline_rows",
    COUNT(*) FILTER(WHERE
      "t0"."region" = $p2) AS "comparison_rows"
  FROM "sales" AS "t0"
  WHERE
    "t0"."region" = $p1 OR "t0"."region" = $p2
), "tot" AS (
  SELECT
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p1) AS "baseline",
    COUNT(DISTINCT "t0"."customer_id") FILTER(WHERE
      "t0"."region" = $p2) AS "comparison"
  FROM "sales" AS "t0"
  WHERE
    "t0"."region" = $p1 OR "t0"."region" = $p2
)
SELECT
  "seg"."baseline",
  "seg"."comparison",
  (
    "seg"."comparison" - "seg"."baseline"
  ) AS "delta",
  (
    "seg"."comparison" - "seg"."baseline"
  ) / NULLIF(ABS("seg"."baseline"), 0) AS "relative_delta",
  (
    "seg"."comparison" - "seg"."baseline"
  ) / NULLIF((
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
  ABS("delta") DESC
LIMIT 51
