-- engine_cube_ratio: engine cube: a ratio over period labels, every depth
-- p1 = 'Widget'
-- p2 = 'Gadget'
SELECT
  GROUPING("d0", "d1") AS "__g",
  "d0",
  "d1",
  SUM("nb") AS "nb",
  SUM("nc") AS "nc",
  SUM("db") AS "db",
  SUM("dc") AS "dc",
  SUM("qnb") AS "qnb",
  SUM("qnc") AS "qnc",
  SUM("qdb") AS "qdb",
  SUM("qdc") AS "qdc",
  SUM("qndb") AS "qndb",
  SUM("qndc") AS "qndc",
  SUM("rowsb") AS "rowsb",
  SUM("rowsc") AS "rowsc"
FROM (
  SELECT
    "d0",
    "d1",
    SUM("__n") FILTER(WHERE
      "__p" = 0) AS "nb",
    SUM("__n" * "__n") FILTER(WHERE
      "__p" = 0) AS "qnb",
    SUM(1) FILTER(WHERE
      "__p" = 0) AS "rowsb",
    SUM("__d") FILTER(WHERE
      "__p" = 0) AS "db",
    SUM("__d" * "__d") FILTER(WHERE
      "__p" = 0) AS "qdb",
    SUM("__n" * "__d") FILTER(WHERE
      "__p" = 0) AS "qndb",
    SUM("__n") FILTER(WHERE
      "__p" = 1) AS "nc",
    SUM("__n" * "__n") FILTER(WHERE
      "__p" = 1) AS "qnc",
    SUM(1) FILTER(WHERE
      "__p" = 1) AS "rowsc",
    SUM("__d") FILTER(WHERE
      "__p" = 1) AS "dc",
    SUM("__d" * "__d") FILTER(WHERE
      "__p" = 1) AS "qdc",
    SUM("__n" * "__d") FILTER(WHERE
      "__p" = 1) AS "qndc"
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
    "d1"
) AS "leaves"
GROUP BY
  GROUPING SETS (
    ("d0", "d1"),
    ("d0"),
    ("d1"),
    ()
  )
