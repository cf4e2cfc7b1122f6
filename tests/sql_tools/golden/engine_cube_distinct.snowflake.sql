-- engine_cube_distinct: engine cube: a distinct count per day, depth 1
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  GROUPING("d0", "d1", "d2") AS "__g",
  "d0",
  "d1",
  "d2",
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
    "d2",
    SUM(IFF("__p" = 0, "__n", NULL)) AS "nb",
    SUM(IFF("__p" = 0, "__d", NULL)) AS "db",
    SUM(IFF("__p" = 0, "__n", NULL)) AS "qnb",
    SUM(IFF("__p" = 0, "__d", NULL)) AS "qdb",
    SUM(IFF("__p" = 0, 0, NULL)) AS "qndb",
    SUM(IFF("__p" = 0, "__rows", NULL)) AS "rowsb",
    SUM(IFF("__p" = 1, "__n", NULL)) AS "nc",
    SUM(IFF("__p" = 1, "__d", NULL)) AS "dc",
    SUM(IFF("__p" = 1, "__n", NULL)) AS "qnc",
    SUM(IFF("__p" = 1, "__d", NULL)) AS "qdc",
    SUM(IFF("__p" = 1, 0, NULL)) AS "qndc",
    SUM(IFF("__p" = 1, "__rows", NULL)) AS "rowsc"
  FROM (
    SELECT
      "d0",
      "d1",
      "d2",
      "__p",
      "__day",
      COUNT(DISTINCT "__un") AS "__n",
      SUM("__d") AS "__d",
      COUNT(*) AS "__rows"
    FROM (
      SELECT
        "t0"."region" AS "d0",
        "t0"."product" AS "d1",
        "t1"."tier" AS "d2",
        IFF("t0"."day" BETWEEN :3 AND :4, 1, 0) AS "__p",
        CAST("t0"."day" AS DATE) AS "__day",
        IFF(NOT "t0"."customer_id" IS NULL, 1, 0) AS "__n",
        "t0"."customer_id" AS "__un",
        1 AS "__d"
      FROM "sales" AS "t0"
      LEFT JOIN "customers" AS "t1"
        ON "t0"."customer_id" = "t1"."customer_id"
      WHERE
        "t0"."day" BETWEEN :1 AND :2 OR "t0"."day" BETWEEN :3 AND :4
    )
    GROUP BY
      "d0",
      "d1",
      "d2",
      "__p",
      "__day"
  )
  GROUP BY
    "d0",
    "d1",
    "d2"
)
GROUP BY
  GROUPING SETS (
    ("d0", "d1", "d2"),
    ("d0"),
    ("d1"),
    ("d2"),
    ()
  )
