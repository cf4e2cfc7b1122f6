-- aggregate_non_finite: metric_aggregate's follow-up: NaN and ±Infinity in the rows it read
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 14)
-- p3 = 'LATAM'
-- p4 = 2
-- p5 = 1000.5
SELECT
  COUNTIF(IS_NAN(`t0`.`revenue`)),
  COUNTIF(IS_INF(`t0`.`revenue`) AND `t0`.`revenue` > 0),
  COUNTIF(IS_INF(`t0`.`revenue`) AND `t0`.`revenue` < 0)
FROM `sales` AS `t0`
LEFT JOIN `customers` AS `t1`
  ON `t0`.`customer_id` = `t1`.`customer_id`
WHERE
  `t0`.`day` BETWEEN @p1 AND @p2
  AND NOT `t1`.`tier` IS NULL
  AND NOT `t0`.`region` IN (@p3)
  AND `t0`.`orders` >= @p4
  AND `t0`.`revenue` < @p5
