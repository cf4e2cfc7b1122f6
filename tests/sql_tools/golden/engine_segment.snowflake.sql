-- engine_segment: engine evidence: one segment's metric per period (= on an own and a joined column)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'EU'
-- p6 = 'gold'
SELECT
  "__p",
  SUM("n") AS "n",
  SUM("d") AS "d"
FROM (
  SELECT
    "__p",
    SUM("__n") AS "n",
    SUM("__d") AS "d"
  FROM (
    SELECT
      IFF("t0"."day" BETWEEN :3 AND :4, 1, 0) AS "__p",
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
      (
        "t0"."region" = :5 AND "t1"."tier" = :6
      )
      AND (
        "t0"."day" BETWEEN :1 AND :2 OR "t0"."day" BETWEEN :3 AND :4
      )
  )
  GROUP BY
    "__p"
)
GROUP BY
  "__p"
ORDER BY
  "__p"
