-- engine_leaves_distinct: engine leaves: a distinct count per day, deduplicated per leaf, period and day
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
SELECT
  `d0`,
  `d1`,
  `d2`,
  SUM(IF(`__p` = 0, `__n`, NULL)) AS `nb`,
  SUM(IF(`__p` = 0, `__d`, NULL)) AS `db`,
  SUM(IF(`__p` = 0, `__n`, NULL)) AS `qnb`,
  SUM(IF(`__p` = 0, `__d`, NULL)) AS `qdb`,
  SUM(IF(`__p` = 0, 0, NULL)) AS `qndb`,
  SUM(IF(`__p` = 0, `__rows`, NULL)) AS `rowsb`,
  SUM(IF(`__p` = 1, `__n`, NULL)) AS `nc`,
  SUM(IF(`__p` = 1, `__d`, NULL)) AS `dc`,
  SUM(IF(`__p` = 1, `__n`, NULL)) AS `qnc`,
  SUM(IF(`__p` = 1, `__d`, NULL)) AS `qdc`,
  SUM(IF(`__p` = 1, 0, NULL)) AS `qndc`,
  SUM(IF(`__p` = 1, `__rows`, NULL)) AS `rowsc`
FROM (
  SELECT
    `d0`,
    `d1`,
    `d2`,
    `__p`,
    `__day`,
    COUNT(DISTINCT `__un`) AS `__n`,
    SUM(`__d`) AS `__d`,
    COUNT(*) AS `__rows`
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
    `d0`,
    `d1`,
    `d2`,
    `__p`,
    `__day`
)
GROUP BY
  `d0`,
  `d1`,
  `d2`
