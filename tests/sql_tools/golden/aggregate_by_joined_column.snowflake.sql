-- aggregate_by_joined_column: metric_aggregate: grouped by a joined table's column, whose output name is table.column
SELECT
  "t1"."tier" AS "customers.tier",
  COUNT(*) AS "count",
  COUNT(*) OVER () AS "__matched"
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
GROUP BY
  "t1"."tier"
ORDER BY
  "count" DESC NULLS LAST,
  "customers.tier"
LIMIT 51
