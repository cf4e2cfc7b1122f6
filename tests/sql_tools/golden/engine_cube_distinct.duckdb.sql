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
    SUM("__n") FILTER(WHERE
      "__p" = 0) AS "nb",
    SUM("__d") FILTER(WHERE
      "__p" = 0) AS "db",
    SUM("__n") FILTER(WHERE
      "__p" = 0) AS "qnb",
    SUM("__d") FILTER(WHERE
      "__p" = 0) AS "qdb",
    SUM(0) FILTER(WHERE
      "__p" = 0) AS "qndb",
    SUM("__rows") FILTER(WHERE
      "__p" = 0) AS "rowsb",
    SUM("__n") FILTER(WHERE
      "__p" = 1) AS "nc",
    SUM("__d") FILTER(WHERE
      "__p" = 1) AS "dc",
    SUM("__n") FILTER(WHERE
      "__p" = 1) AS "qnc",
    SUM("__d") FILTER(WHERE
      "__p" = 1) AS "qdc",
    SUM(0) FILTER(WHERE
      "__p" = 1) AS "qndc",
    SUM("__rows") FILTER(WHERE
      "__p" = 1) AS "rowsc"
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
        CASE WHEN "t0"."day" BETWEEN $p3 AND $p4 THEN 1 ELSE 0 END AS "__p",
        CAST("t0"."day" AS DATE) AS "__day",
        CASE WHEN NOT "t0"."customer_id" IS NULL THEN 1 ELSE 0 END AS "__n",
        "t0"."customer_id" AS "__un",
        1 AS "__d"
      FROM "sales" AS "t0"
      LEFT JOIN "customers" AS "t1"
        ON "t0"."customer_id" = "t1"."customer_id"
      WHERE
        "t0"."day" BETWEEN $p1 AND $p2 OR "t0"."day" BETWEEN $p3 AND $p4
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
