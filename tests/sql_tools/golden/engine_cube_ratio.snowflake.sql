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
    SUM(IFF("__p" = 0, "__n", NULL)) AS "nb",
    SUM(IFF("__p" = 0, "__n" * "__n", NULL)) AS "qnb",
    SUM(IFF("__p" = 0, 1, NULL)) AS "rowsb",
    SUM(IFF("__p" = 0, "__d", NULL)) AS "db",
    SUM(IFF("__p" = 0, "__d" * "__d", NULL)) AS "qdb",
    SUM(IFF("__p" = 0, "__n" * "__d", NULL)) AS "qndb",
    SUM(IFF("__p" = 1, "__n", NULL)) AS "nc",
    SUM(IFF("__p" = 1, "__n" * "__n", NULL)) AS "qnc",
    SUM(IFF("__p" = 1, 1, NULL)) AS "rowsc",
    SUM(IFF("__p" = 1, "__d", NULL)) AS "dc",
    SUM(IFF("__p" = 1, "__d" * "__d", NULL)) AS "qdc",
    SUM(IFF("__p" = 1, "__n" * "__d", NULL)) AS "qndc"
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
    "d1"
)
GROUP BY
  GROUPING SETS (
    ("d0", "d1"),
    ("d0"),
    ("d1"),
    ()
  )
