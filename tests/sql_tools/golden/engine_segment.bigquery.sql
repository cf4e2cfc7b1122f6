-- engine_segment: engine evidence: one segment's metric per period (= on an own and a joined column)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'EU'
-- p6 = 'gold'
SELECT
  `__p`,
  SUM(`n`) AS `n`,
  SUM(`d`) AS `d`
FROM (
  SELECT
    `__p`,
    SUM(`__n`) AS `n`,
    SUM(`__d`) AS `d`
  FROM (
    SELECT
      IF(`t0`.`day` BETWEEN @p3 AND @p4, 1, 0) AS `__p`,
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
    LEFT JOIN `customers` AS `t1`
      ON `t0`.`customer_id` = `t1`.`customer_id`
    WHERE
      (
        `t0`.`region` = @p5 AND `t1`.`tier` = @p6
      )
      AND (
        `t0`.`day` BETWEEN @p1 AND @p2 OR `t0`.`day` BETWEEN @p3 AND @p4
      )
  )
  GROUP BY
    `__p`
)
GROUP BY
  `__p`
ORDER BY
  `__p`
