-- engine_cover_cells: engine screening: two covers of a per-day distinct count (approximate, per day)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  GROUPING("d0", "d1", "d2") AS "__g",
  "d0",
  "d1",
  "d2",
  APPROX_COUNT_DISTINCT(IFF("__p" = 0, HASH("__un", "__day"), NULL)) AS "nb",
  APPROX_COUNT_DISTINCT(IFF("__p" = 0, HASH("__un", "__day"), NULL)) AS "qnb",
  SUM(IFF("__p" = 0, "__d", NULL)) AS "db",
  SUM(IFF("__p" = 0, "__d" * "__d", NULL)) AS "qdb",
  SUM(IFF("__p" = 0, 1, NULL)) AS "rowsb",
  SUM(IFF("__p" = 0, "__n" * "__d", NULL)) AS "qndb",
  APPROX_COUNT_DISTINCT(IFF("__p" = 1, HASH("__un", "__day"), NULL)) AS "nc",
  APPROX_COUNT_DISTINCT(IFF("__p" = 1, HASH("__un", "__day"), NULL)) AS "qnc",
  SUM(IFF("__p" = 1, "__d", NULL)) AS "dc",
  SUM(IFF("__p" = 1, "__d" * "__d", NULL)) AS "qdc",
  SUM(IFF("__p" = 1, 1, NULL)) AS "rowsc",
  SUM(IFF("__p" = 1, "__n" * "__d", NULL)) AS "qndc"
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
  GROUPING SETS (
    ("d0", "d1"),
    ("d1", "d2")
  )
