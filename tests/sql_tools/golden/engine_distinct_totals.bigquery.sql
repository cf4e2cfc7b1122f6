-- engine_distinct_totals: engine: a distinct count's exact value per period, per day
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  `__p`,
  SUM(`n`) AS `n`
FROM (
  SELECT
    `__p`,
    `__day`,
    COUNT(DISTINCT `__un`) AS `n`
  FROM (
    SELECT
      IF(`t0`.`day` BETWEEN @p3 AND @p4, 1, 0) AS `__p`,
      CAST(`t0`.`day` AS DATE) AS `__day`,
      IF(NOT `t0`.`customer_id` IS NULL, 1, 0) AS `__n`,
      `t0`.`customer_id` AS `__un`,
      1 AS `__d`
    FROM `sales` AS `t0`
    WHERE
      `t0`.`day` BETWEEN @p1 AND @p2 OR `t0`.`day` BETWEEN @p3 AND @p4
  )
  GROUP BY
    `__p`,
    `__day`
)
GROUP BY
  `__p`
