-- aggregate_ordered: metric_aggregate: no groups; avg and min, ascending, a smaller limit
SELECT
  AVG("t0"."visits") AS "avg_visits",
  MIN("t0"."ts") AS "min_ts",
  COUNT(*) OVER () AS "__matched"
FROM "visits" AS "t0"
ORDER BY
  "min_ts" ASC
LIMIT 6
