-- aggregate_by_joined_column: metric_aggregate: grouped by a joined table's column, whose output name is table.column
SELECT
  "t1"."tier" AS "__dd_g0",
  COUNT(*) AS "__dd_m0",
  COUNT(*) OVER () AS "__dd_matched"
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
GROUP BY
  "t1"."tier"
ORDER BY
  2 DESC NULLS LAST,
  1
LIMIT 51
