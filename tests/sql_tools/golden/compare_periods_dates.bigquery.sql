-- compare_periods_dates: metric_compare_periods: date ranges, sum per region; != and in on a joined column
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'Gizmo'
-- p6 = 'gold'
-- p7 = 'silver'
WITH `__dd_seg` AS (
  SELECT
    `t0`.`region` AS `__dd_g0`,
    SUM(IF(`t0`.`day` BETWEEN @p1 AND @p2, `t0`.`revenue`, NULL)) AS `__dd_baseline`,
    SUM(IF(`t0`.`day` BETWEEN @p3 AND @p4, `t0`.`revenue`, NULL)) AS `__dd_comparison`,
    COUNTIF(`t0`.`day` BETWEEN @p1 AND @p2) AS `__dd_baseline_rows`,
    COUNTIF(`t0`.`day` BETWEEN @p3 AND @p4) AS `__dd_comparison_rows`
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
  GROUP BY
    `t0`.`region`
), `__dd_tot` AS (
  SELECT
    SUM(`__dd_seg`.`__dd_baseline`) AS `__dd_baseline`,
    SUM(`__dd_seg`.`__dd_comparison`) AS `__dd_comparison`
  FROM `__dd_seg`
)
SELECT
  `__dd_seg`.`__dd_g0`,
  `__dd_seg`.`__dd_baseline`,
  `__dd_seg`.`__dd_comparison`,
  (
    COALESCE(`__dd_seg`.`__dd_comparison`, 0) - COALESCE(`__dd_seg`.`__dd_baseline`, 0)
  ) AS `__dd_delta`,
  CAST((
    COALESCE(`__dd_seg`.`__dd_comparison`, 0) - COALESCE(`__dd_seg`.`__dd_baseline`, 0)
  ) AS FLOAT64) / NULLIF(ABS(`__dd_seg`.`__dd_baseline`), 0) AS `__dd_relative_delta`,
  CAST((
    COALESCE(`__dd_seg`.`__dd_comparison`, 0) - COALESCE(`__dd_seg`.`__dd_baseline`, 0)
  ) AS FLOAT64) / NULLIF(
    (
      COALESCE(`__dd_tot`.`__dd_comparison`, 0) - COALESCE(`__dd_tot`.`__dd_baseline`, 0)
    ),
    0
  ) AS `__dd_share_of_delta`,
  `__dd_seg`.`__dd_baseline_rows`,
  `__dd_seg`.`__dd_comparison_rows`,
  `__dd_tot`.`__dd_baseline` AS `__dd_total_baseline`,
  `__dd_tot`.`__dd_comparison` AS `__dd_total_comparison`,
  COUNT(*) OVER () AS `__dd_matched`
FROM `__dd_seg`
CROSS JOIN `__dd_tot`
WHERE
  `__dd_seg`.`__dd_baseline_rows` > 0 OR `__dd_seg`.`__dd_comparison_rows` > 0
ORDER BY
  ABS(`__dd_delta`) DESC,
  `__dd_seg`.`__dd_g0` NULLS LAST
LIMIT 51
