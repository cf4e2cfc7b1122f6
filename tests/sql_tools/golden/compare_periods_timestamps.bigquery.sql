-- compare_periods_timestamps: metric_compare_periods: date ranges on a TIMESTAMP column, a non-additive avg
-- p1 = datetime.datetime(2024, 1, 1, 0, 0)
-- p2 = datetime.datetime(2024, 1, 8, 0, 0)
-- p3 = datetime.datetime(2024, 1, 8, 0, 0)
-- p4 = datetime.datetime(2024, 1, 15, 0, 0)
WITH `seg` AS (
  SELECT
    `t0`.`page` AS `page`,
    AVG(IF(`t0`.`ts` >= @p1 AND `t0`.`ts` < @p2, `t0`.`visits`, NULL)) AS `baseline`,
    AVG(IF(`t0`.`ts` >= @p3 AND `t0`.`ts` < @p4, `t0`.`visits`, NULL)) AS `comparison`,
    COUNTIF(`t0`.`ts` >= @p1 AND `t0`.`ts` < @p2) AS `baseline_rows`,
    COUNTIF(`t0`.`ts` >= @p3 AND `t0`.`ts` < @p4) AS `comparison_rows`
  FROM `visits` AS `t0`
  WHERE
    (
      `t0`.`ts` >= @p1 AND `t0`.`ts` < @p2
    )
    OR (
      `t0`.`ts` >= @p3 AND `t0`.`ts` < @p4
    )
  GROUP BY
    `t0`.`page`
), `tot` AS (
  SELECT
    AVG(IF(`t0`.`ts` >= @p1 AND `t0`.`ts` < @p2, `t0`.`visits`, NULL)) AS `baseline`,
    AVG(IF(`t0`.`ts` >= @p3 AND `t0`.`ts` < @p4, `t0`.`visits`, NULL)) AS `comparison`
  FROM `visits` AS `t0`
  WHERE
    (
      `t0`.`ts` >= @p1 AND `t0`.`ts` < @p2
    )
    OR (
      `t0`.`ts` >= @p3 AND `t0`.`ts` < @p4
    )
)
SELECT
  `seg`.`page`,
  `seg`.`baseline`,
  `seg`.`comparison`,
  (
    `seg`.`comparison` - `seg`.`baseline`
  ) AS `delta`,
  CAST((
    `seg`.`comparison` - `seg`.`baseline`
  ) AS FLOAT64) / NULLIF(ABS(`seg`.`baseline`), 0) AS `relative_delta`,
  CAST((
    `seg`.`comparison` - `seg`.`baseline`
  ) AS FLOAT64) / NULLIF((
    `tot`.`comparison` - `tot`.`baseline`
  ), 0) AS `share_of_delta`,
  `seg`.`baseline_rows`,
  `seg`.`comparison_rows`,
  `tot`.`baseline` AS `__total_baseline`,
  `tot`.`comparison` AS `__total_comparison`,
  COUNT(*) OVER () AS `__matched`
FROM `seg`
CROSS JOIN `tot`
WHERE
  `seg`.`baseline_rows` > 0 OR `seg`.`comparison_rows` > 0
ORDER BY
  ABS(`delta`) DESC,
  `seg`.`page` NULLS LAST
LIMIT 51
