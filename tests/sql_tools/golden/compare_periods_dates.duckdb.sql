-- compare_periods_dates: metric_compare_periods: date ranges, sum per region; != and in on a joined column
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'Gizmo'
-- p6 = 'gold'
-- p7 = 'silver'
WITH "seg" AS (
  SELECT
    "t0"."region" AS "region",
    SUM("t0"."revenue") FILTER(WHERE
      "t0"."day" BETWEEN $p1 AND $p2) AS "baseline",
    SUM("t0"."revenue") FILTER(WHERE
      "t0"."day" BETWEEN $p3 AND $p4) AS "comparison",
    COUNT(*) FILTER(WHERE
      "t0"."day" BETWEEN $p1 AND $p2) AS "baseline_rows",
    COUNT(*) FILTER(WHERE
      "t0"."day" BETWEEN $p3 AND $p4) AS "comparison_rows"
  FROM "sales" AS "t0"
  LEFT JOIN "customers" AS "t1"
    ON "t0"."customer_id" = "t1"."customer_id"
  WHERE
    (
      "t0"."day" BETWEEN $p1 AND $p2 OR "t0"."day" BETWEEN $p3 AND $p4
    )
    AND (
      "t0"."product" <> $p5 AND "t1"."tier" IN ($p6, $p7)
    )
  GROUP BY
    "t0"."region"
), "tot" AS (
  SELECT
    SUM("seg"."baseline") AS "baseline",
    SUM("seg"."comparison") AS "comparison"
  FROM "seg"
)
SELECT
  "seg"."region",
  "seg"."baseline",
  "seg"."comparison",
  (
    COALESCE("seg"."comparison", 0) - COALESCE("seg"."baseline", 0)
  ) AS "delta",
  (
    COALESCE("seg"."comparison", 0) - COALESCE("seg"."baseline", 0)
  ) / NULLIF(ABS("seg"."baseline"), 0) AS "relative_delta",
  (
    COALESCE("seg"."comparison", 0) - COALESCE("seg"."baseline", 0)
  ) / NULLIF((
    COALESCE("tot"."comparison", 0) - COALESCE("tot"."baseline", 0)
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
  ABS("delta") DESC,
  "seg"."region"
LIMIT 51
