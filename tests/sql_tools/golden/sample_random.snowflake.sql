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
      "t0"."note" IS NULL AND "t0"."page" = :1 AND "t0"."ts" > :2
  ) AS "__matched"
FROM "visits" AS "t0"
WHERE
  "t0"."note" IS NULL AND "t0"."page" = :1 AND "t0"."ts" > :2
ORDER BY
  HASH(HASH("t0".*), :3)
LIMIT 11
