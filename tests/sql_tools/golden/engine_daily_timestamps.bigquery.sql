-- engine_daily_timestamps: engine daily series: a TIMESTAMP time column (half-open periods, cast to DATE)
-- p1 = datetime.datetime(2024, 1, 1, 0, 0)
-- p2 = datetime.datetime(2024, 1, 8, 0, 0)
-- p3 = datetime.datetime(2024, 1, 8, 0, 0)
-- p4 = datetime.datetime(2024, 1, 15, 0, 0)
SELECT
  `__day`,
  `__p`,
  SUM(`__n`) AS `n`,
  SUM(`__d`) AS `d`
FROM (
  SELECT
    IF(`t0`.`ts` >= @p3 AND `t0`.`ts` < @p4, 1, 0) AS `__p`,
    CAST(`t0`.`ts` AS DATE) AS `__day`,
    CAST(`t0`.`visits` AS FLOAT64) AS `__n`,
    1 AS `__d`
  FROM `visits` AS `t0`
  WHERE
    (
      `t0`.`ts` >= @p1 AND `t0`.`ts` < @p2
    )
    OR (
      `t0`.`ts` >= @p3 AND `t0`.`ts` < @p4
    )
)
GROUP BY
  `__day`,
  `__p`
ORDER BY
  `__day`
