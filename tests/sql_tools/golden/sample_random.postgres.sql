-- sample_random: metric_sample: a reproducible random sample (seed); is_null, =, >
-- p1 = 'home'
-- p2 = datetime.datetime(2024, 1, 1, 8, 0)
-- p3 = 7
SELECT
  "t0"."ts" AS "__dd_g0",
  "t0"."page" AS "__dd_g1",
  "t0"."visits" AS "__dd_g2",
  "t0"."note" AS "__dd_g3",
  (
    SELECT
      COUNT(*)
    FROM "visits" AS "t0"
    WHERE
      "t0"."note" IS NULL AND "t0"."page" = %(p1)s AND "t0"."ts" > %(p2)s
  ) AS "__dd_matched"
FROM "visits" AS "t0"
WHERE
  "t0"."note" IS NULL AND "t0"."page" = %(p1)s AND "t0"."ts" > %(p2)s
ORDER BY
  HASHTEXTEXTENDED(CAST(ROW("t0", %(p3)s) AS TEXT), 0)
LIMIT 11
