-- engine_leaf_days_copies: engine: the one pass over the source also counting the rows loaded twice (one row in 4, sampled by the hash of the whole row, grouped per day by that hash)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'LATAM'
SELECT
  "d0",
  "d1",
  "d2",
  "__p",
  "__day",
  MIN("n") AS "n",
  MIN("qn") AS "qn",
  MIN("rows") AS "rows",
  "__cell",
  SUM(IFF(NOT "__h" IS NULL, "rows", NULL)) AS "__rows",
  COUNT_IF(NOT "__h" IS NULL) AS "__distinct",
  COUNT_IF(NOT "__h" IS NULL AND "rows" % 4 = 0) AS "__x4",
  COUNT_IF(NOT "__h" IS NULL AND "rows" % 3 = 0) AS "__x3",
  COUNT_IF(NOT "__h" IS NULL AND "rows" % 2 = 0) AS "__x2"
FROM (
  SELECT
    "d0",
    "d1",
    "d2",
    "__p",
    "__day",
    SUM("__n") AS "n",
    SUM("__n" * "__n") AS "qn",
    COUNT(*) AS "rows",
    GROUPING("__h") AS "__cell",
    "__h"
  FROM (
    SELECT
      "t0"."region" AS "d0",
      "t0"."product" AS "d1",
      "t1"."tier" AS "d2",
      IFF("t0"."day" BETWEEN :3 AND :4, 1, 0) AS "__p",
      CAST("t0"."day" AS DATE) AS "__day",
      CAST(IFF(
        (
          NOT "t0"."revenue" IN (CAST('NaN' AS DOUBLE), CAST('inf' AS DOUBLE), CAST('-inf' AS DOUBLE))
        ),
        "t0"."revenue",
        NULL
      ) AS DOUBLE) AS "__n",
      1 AS "__d",
      CASE
        WHEN HASH(
          "t0"."day",
          "t0"."region",
          "t0"."product",
          "t0"."revenue",
          "t0"."orders",
          "t0"."customer_id"
        ) % 4 = 0
        THEN HASH(
          "t0"."day",
          "t0"."region",
          "t0"."product",
          "t0"."revenue",
          "t0"."orders",
          "t0"."customer_id"
        )
      END AS "__h"
    FROM "sales" AS "t0"
    LEFT JOIN "customers" AS "t1"
      ON "t0"."customer_id" = "t1"."customer_id"
    WHERE
      "t0"."region" <> :5
      AND (
        "t0"."day" BETWEEN :1 AND :2 OR "t0"."day" BETWEEN :3 AND :4
      )
  )
  GROUP BY
    GROUPING SETS (
      ("d0", "d1", "d2", "__p", "__day"),
      ("__p", "__day", "__h")
    )
)
GROUP BY
  "d0",
  "d1",
  "d2",
  "__p",
  "__day",
  "__cell"
