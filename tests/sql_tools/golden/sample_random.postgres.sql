-- sample_random: metric_sample: a reproducible random sample (seed); is_null, =, >
-- p1 = 'home'
-- p2 = datetime.datetime(2024, 1, 1, 8, 0)
-- p3 = 7
SELECT
  "t0"."ts" AS "ts",
  "t0"."page" AS "page",
  "t0"."visits" AS "visits",
  "t0"."note" AS "note",
  (
    SELECT
      COUNT(*)
    FROM "visits" AS "t0"
    WHERE
      "t0"."note" IS NULL AND "t0"."page" = %(p1)s AND "t0"."ts" > %(p2)s
  ) AS "__matched"
FROM "visits" AS "t0"
WHERE
  "t0"."note" IS NULL AND "t0"."page" = %(p1)s AND "t0"."ts" > %(p2)s
ORDER BY
  HASHTEXTEXTENDED(CAST(ROW("t0", %(p3)s) AS TEXT), 0)
LIMIT 11
