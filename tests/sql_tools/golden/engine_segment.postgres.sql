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
      CASE WHEN "t0"."day" BETWEEN %(p3)s AND %(p4)s THEN 1 ELSE 0 END AS "__p",
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
      (
        "t0"."region" = %(p5)s AND "t1"."tier" = %(p6)s
      )
      AND (
        "t0"."day" BETWEEN %(p1)s AND %(p2)s OR "t0"."day" BETWEEN %(p3)s AND %(p4)s
      )
  ) AS "b"
  GROUP BY
    "__p"
) AS "i"
GROUP BY
  "__p"
ORDER BY
  "__p"
