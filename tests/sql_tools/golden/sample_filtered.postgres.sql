-- sample_filtered: metric_sample: some columns; contains (with % and _ in the value), in on a joined column, <=
-- p1 = '50%_'
-- p2 = 'gold'
-- p3 = 'silver'
-- p4 = datetime.date(2024, 1, 9)
SELECT
  "t0"."day" AS "__dd_g0",
  "t0"."product" AS "__dd_g1",
  "t0"."revenue" AS "__dd_g2",
  (
    SELECT
      COUNT(*)
    FROM "sales" AS "t0"
    LEFT JOIN "customers" AS "t1"
      ON "t0"."customer_id" = "t1"."customer_id"
    WHERE
      (
        POSITION(%(p1)s IN "t0"."product") > 0
      )
      AND "t1"."tier" IN (%(p2)s, %(p3)s)
      AND "t0"."day" <= %(p4)s
  ) AS "__dd_matched"
FROM "sales" AS "t0"
LEFT JOIN "customers" AS "t1"
  ON "t0"."customer_id" = "t1"."customer_id"
WHERE
  (
    POSITION(%(p1)s IN "t0"."product") > 0
  )
  AND "t1"."tier" IN (%(p2)s, %(p3)s)
  AND "t0"."day" <= %(p4)s
LIMIT 4
