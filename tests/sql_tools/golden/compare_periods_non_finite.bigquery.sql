-- compare_periods_non_finite: metric_compare_periods' follow-up: NaN and ±Infinity in the rows it read
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'Gizmo'
-- p6 = 'gold'
-- p7 = 'silver'
SELECT
  COUNTIF(IS_NAN(`t0`.`revenue`)),
  COUNTIF(IS_INF(`t0`.`revenue`) AND `t0`.`revenue` > 0),
  COUNTIF(IS_INF(`t0`.`revenue`) AND `t0`.`revenue` < 0)
FROM `sales` AS `t0`
LEFT JOIN `customers` AS `t1`
  ON `t0`.`customer_id` = `t1`.`customer_id`
WHERE
  (
    `t0`.`day` BETWEEN @p1 AND @p2 OR `t0`.`day` BETWEEN @p3 AND @p4
  )
  AND (
    `t0`.`product` <> @p5 AND `t1`.`tier` IN (@p6, @p7)
  )
