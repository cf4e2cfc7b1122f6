-- engine_leaf_days_ratio: engine: the one pass over the source for a ratio over period labels (no days)
-- p1 = 'Widget'
-- p2 = 'Gadget'
SELECT
  "d0",
  "d1",
  "__p",
  SUM("__n") AS "n",
  SUM("__n" * "__n") AS "qn",
  COUNT(*) AS "rows",
  SUM("__d") AS "d",
  SUM("__d" * "__d") AS "qd",
  SUM("__n" * "__d") AS "qnd"
FROM (
  SELECT
    "t0"."region" AS "d0",
    "t1"."tier" AS "d1",
    IFF("t0"."product" = :2, 1, 0) AS "__p",
    CAST(IFF(
      (
        NOT "t0"."revenue" IN (CAST('NaN' AS DOUBLE), CAST('inf' AS DOUBLE), CAST('-inf' AS DOUBLE))
      ),
      "t0"."revenue",
      NULL
    ) AS DOUBLE) AS "__n",
    CAST("t0"."orders" AS DOUBLE) AS "__d"
  FROM "sales" AS "t0"
  LEFT JOIN "customers" AS "t1"
    ON "t0"."customer_id" = "t1"."customer_id"
  WHERE
    "t0"."product" = :1 OR "t0"."product" = :2
)
GROUP BY
  "d0",
  "d1",
  "__p"
