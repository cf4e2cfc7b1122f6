-- aggregate_ordered: metric_aggregate: no groups; avg and min, ascending, a smaller limit
SELECT
  AVG("t0"."visits") AS "__dd_m0",
  MIN("t0"."ts") AS "__dd_m1",
  COUNT(*) OVER () AS "__dd_matched"
FROM "visits" AS "t0"
ORDER BY
  2 ASC
LIMIT 6
