-- describe: metric_describe: row counts of every table
SELECT
  'customers' AS "table_name",
  COUNT(*) AS "rows"
FROM "customers"
UNION ALL
SELECT
  'sales' AS "table_name",
  COUNT(*) AS "rows"
FROM "sales"
UNION ALL
SELECT
  'visits' AS "table_name",
  COUNT(*) AS "rows"
FROM "visits"
