-- engine_leaf_days_sum: engine: the one pass over the source, the rows summed per leaf, period and day (the cube, the daily series and the segments' sums are read from it)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'LATAM'
SELECT
  `d0`,
  `d1`,
  `d2`,
  `__p`,
  `__day`,
  SUM(`__n`) AS `n`,
  SUM(`__n` * `__n`) AS `qn`,
  COUNT(*) AS `rows`
FROM (
  SELECT
    `t0`.`region` AS `d0`,
    `t0`.`product` AS `d1`,
    `t1`.`tier` AS `d2`,
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
    1 AS `__d`
  FROM `sales` AS `t0`
  LEFT JOIN `customers` AS `t1`
    ON `t0`.`customer_id` = `t1`.`customer_id`
  WHERE
    `t0`.`region` <> @p5
    AND (
      `t0`.`day` BETWEEN @p1 AND @p2 OR `t0`.`day` BETWEEN @p3 AND @p4
    )
)
GROUP BY
  `d0`,
  `d1`,
  `d2`,
  `__p`,
  `__day`
