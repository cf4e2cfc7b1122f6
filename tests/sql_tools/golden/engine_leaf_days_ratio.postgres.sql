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
    CASE WHEN "t0"."product" = %(p2)s THEN 1 ELSE 0 END AS "__p",
    CAST(CASE
      WHEN (
        "t0"."revenue" > CAST('-Infinity' AS DOUBLE PRECISION)
        AND "t0"."revenue" < CAST('Infinity' AS DOUBLE PRECISION)
      )
      THEN "t0"."revenue"
      ELSE NULL
    END AS DOUBLE PRECISION) AS "__n",
    CAST("t0"."orders" AS DOUBLE PRECISION) AS "__d"
  FROM "sales" AS "t0"
  LEFT JOIN "customers" AS "t1"
    ON "t0"."customer_id" = "t1"."customer_id"
  WHERE
    "t0"."product" = %(p1)s OR "t0"."product" = %(p2)s
) AS "b"
GROUP BY
  "d0",
  "d1",
  "__p"
