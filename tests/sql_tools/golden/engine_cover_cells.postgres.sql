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
  COUNT(DISTINCT HASHTEXTEXTENDED(CAST(ROW("__un", "__day") AS TEXT), 0)) FILTER(WHERE
    "__p" = 0) AS "nb",
  COUNT(DISTINCT HASHTEXTEXTENDED(CAST(ROW("__un", "__day") AS TEXT), 0)) FILTER(WHERE
    "__p" = 0) AS "qnb",
  SUM("__d") FILTER(WHERE
    "__p" = 0) AS "db",
  SUM("__d" * "__d") FILTER(WHERE
    "__p" = 0) AS "qdb",
  SUM(1) FILTER(WHERE
    "__p" = 0) AS "rowsb",
  SUM("__n" * "__d") FILTER(WHERE
    "__p" = 0) AS "qndb",
  COUNT(DISTINCT HASHTEXTEXTENDED(CAST(ROW("__un", "__day") AS TEXT), 0)) FILTER(WHERE
    "__p" = 1) AS "nc",
  COUNT(DISTINCT HASHTEXTEXTENDED(CAST(ROW("__un", "__day") AS TEXT), 0)) FILTER(WHERE
    "__p" = 1) AS "qnc",
  SUM("__d") FILTER(WHERE
    "__p" = 1) AS "dc",
  SUM("__d" * "__d") FILTER(WHERE
    "__p" = 1) AS "qdc",
  SUM(1) FILTER(WHERE
    "__p" = 1) AS "rowsc",
  SUM("__n" * "__d") FILTER(WHERE
    "__p" = 1) AS "qndc"
FROM (
  SELECT
    "t0"."region" AS "d0",
    "t0"."product" AS "d1",
    "t1"."tier" AS "d2",
    CASE WHEN "t0"."day" BETWEEN %(p3)s AND %(p4)s THEN 1 ELSE 0 END AS "__p",
    CAST("t0"."day" AS DATE) AS "__day",
    CASE WHEN NOT "t0"."customer_id" IS NULL THEN 1 ELSE 0 END AS "__n",
    "t0"."customer_id" AS "__un",
    1 AS "__d"
  FROM "sales" AS "t0"
  LEFT JOIN "customers" AS "t1"
    ON "t0"."customer_id" = "t1"."customer_id"
  WHERE
    "t0"."day" BETWEEN %(p1)s AND %(p2)s OR "t0"."day" BETWEEN %(p3)s AND %(p4)s
) AS "b"
GROUP BY
  GROUPING SETS (
    ("d0", "d1"),
    ("d1", "d2")
  )
