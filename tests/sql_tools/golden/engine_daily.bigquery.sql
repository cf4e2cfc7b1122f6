-- engine_daily: engine daily series: per-day totals of a ratio
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  `__day`,
  `__p`,
  SUM(`__n`) AS `n`,
  SUM(`__d`) AS `d`
FROM (
  SELECT
    IF(`t0`.`day` BETWEEN @p3 AND @p4, 1, 0) AS `__p`,
    CAST(`t0`.`day` AS DATE) AS `__day`,
    CAST(IF(
      (
        NOT (
          IS_INF(`t0`.`revenue`) OR IS_NAN(`t0`.`revenue`)
        )
      ),
      `t0`.`revenue`,
      NULL
    ) AS FLOAT64) AS `__n`,
    CAST(`t0`.`orders` AS FLOAT64) AS `__d`
  FROM `sales` AS `t0`
  WHERE
    `t0`.`day` BETWEEN @p1 AND @p2 OR `t0`.`day` BETWEEN @p3 AND @p4
)
GROUP BY
  `__day`,
  `__p`
ORDER BY
  `__day`
