-- engine_cover_cells: engine screening: two covers of a per-day distinct count (approximate, per day)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  (
    GROUPING(`d0`) * 4 + GROUPING(`d1`) * 2 + GROUPING(`d2`)
  ) AS `__g`,
  `d0`,
  `d1`,
  `d2`,
  approx_count_distinct(IF(`__p` = 0, FARM_FINGERPRINT(TO_JSON_STRING(STRUCT(`__un`, `__day`))), NULL)) AS `nb`,
  approx_count_distinct(IF(`__p` = 0, FARM_FINGERPRINT(TO_JSON_STRING(STRUCT(`__un`, `__day`))), NULL)) AS `qnb`,
  SUM(IF(`__p` = 0, `__d`, NULL)) AS `db`,
  SUM(IF(`__p` = 0, `__d` * `__d`, NULL)) AS `qdb`,
  SUM(IF(`__p` = 0, 1, NULL)) AS `rowsb`,
  SUM(IF(`__p` = 0, `__n` * `__d`, NULL)) AS `qndb`,
  approx_count_distinct(IF(`__p` = 1, FARM_FINGERPRINT(TO_JSON_STRING(STRUCT(`__un`, `__day`))), NULL)) AS `nc`,
  approx_count_distinct(IF(`__p` = 1, FARM_FINGERPRINT(TO_JSON_STRING(STRUCT(`__un`, `__day`))), NULL)) AS `qnc`,
  SUM(IF(`__p` = 1, `__d`, NULL)) AS `dc`,
  SUM(IF(`__p` = 1, `__d` * `__d`, NULL)) AS `qdc`,
  SUM(IF(`__p` = 1, 1, NULL)) AS `rowsc`,
  SUM(IF(`__p` = 1, `__n` * `__d`, NULL)) AS `qndc`
FROM (
  SELECT
    `t0`.`region` AS `d0`,
    `t0`.`product` AS `d1`,
    `t1`.`tier` AS `d2`,
    IF(`t0`.`day` BETWEEN @p3 AND @p4, 1, 0) AS `__p`,
    CAST(`t0`.`day` AS DATE) AS `__day`,
    IF(NOT `t0`.`customer_id` IS NULL, 1, 0) AS `__n`,
    `t0`.`customer_id` AS `__un`,
    1 AS `__d`
  FROM `sales` AS `t0`
  LEFT JOIN `customers` AS `t1`
    ON `t0`.`customer_id` = `t1`.`customer_id`
  WHERE
    `t0`.`day` BETWEEN @p1 AND @p2 OR `t0`.`day` BETWEEN @p3 AND @p4
)
GROUP BY
  GROUPING SETS (
    (`d0`, `d1`),
    (`d1`, `d2`)
  )
