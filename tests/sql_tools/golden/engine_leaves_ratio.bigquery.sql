-- engine_leaves_ratio: engine leaves: a ratio over labels of a period column (no daily statistics)
-- p1 = 'Widget'
-- p2 = 'Gadget'
SELECT
  `d0`,
  `d1`,
  SUM(IF(`__p` = 0, `__n`, NULL)) AS `nb`,
  SUM(IF(`__p` = 0, `__n` * `__n`, NULL)) AS `qnb`,
  SUM(IF(`__p` = 0, 1, NULL)) AS `rowsb`,
  SUM(IF(`__p` = 0, `__d`, NULL)) AS `db`,
  SUM(IF(`__p` = 0, `__d` * `__d`, NULL)) AS `qdb`,
  SUM(IF(`__p` = 0, `__n` * `__d`, NULL)) AS `qndb`,
  SUM(IF(`__p` = 1, `__n`, NULL)) AS `nc`,
  SUM(IF(`__p` = 1, `__n` * `__n`, NULL)) AS `qnc`,
  SUM(IF(`__p` = 1, 1, NULL)) AS `rowsc`,
  SUM(IF(`__p` = 1, `__d`, NULL)) AS `dc`,
  SUM(IF(`__p` = 1, `__d` * `__d`, NULL)) AS `qdc`,
  SUM(IF(`__p` = 1, `__n` * `__d`, NULL)) AS `qndc`
FROM (
  SELECT
    `t0`.`region` AS `d0`,
    `t1`.`tier` AS `d1`,
    IF(`t0`.`product` = @p2, 1, 0) AS `__p`,
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
    `t0`.`product` = @p1 OR `t0`.`product` = @p2
)
GROUP BY
  `d0`,
  `d1`
