-- engine_cube_sum: engine cube: the leaves above, grouping sets up to depth 2 and the total
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'LATAM'
SELECT
  (
    GROUPING(`d0`) * 4 + GROUPING(`d1`) * 2 + GROUPING(`d2`)
  ) AS `__g`,
  `d0`,
  `d1`,
  `d2`,
  SUM(`nb`) AS `nb`,
  SUM(`nc`) AS `nc`,
  SUM(`qnb`) AS `qnb`,
  SUM(`qnc`) AS `qnc`,
  SUM(`rowsb`) AS `rowsb`,
  SUM(`rowsc`) AS `rowsc`,
  SUM(`vnb`) AS `vnb`,
  SUM(`vnc`) AS `vnc`,
  SUM(`cellsb`) AS `cellsb`,
  SUM(`cellsc`) AS `cellsc`
FROM (
  SELECT
    `d0`,
    `d1`,
    `d2`,
    SUM(IF(`__p` = 0, `n`, NULL)) AS `nb`,
    SUM(IF(`__p` = 0, `qn`, NULL)) AS `qnb`,
    SUM(IF(`__p` = 0, `rows`, NULL)) AS `rowsb`,
    SUM(IF(`__p` = 0, 1, NULL)) AS `cellsb`,
    SUM(IF(`__p` = 0, `n` * `n`, NULL)) AS `vnb`,
    SUM(IF(`__p` = 1, `n`, NULL)) AS `nc`,
    SUM(IF(`__p` = 1, `qn`, NULL)) AS `qnc`,
    SUM(IF(`__p` = 1, `rows`, NULL)) AS `rowsc`,
    SUM(IF(`__p` = 1, 1, NULL)) AS `cellsc`,
    SUM(IF(`__p` = 1, `n` * `n`, NULL)) AS `vnc`
  FROM (
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
  )
  GROUP BY
    `d0`,
    `d1`,
    `d2`
)
GROUP BY
  GROUPING SETS (
    (`d0`, `d1`, `d2`),
    (`d0`, `d1`),
    (`d0`, `d2`),
    (`d1`, `d2`),
    (`d0`),
    (`d1`),
    (`d2`),
    ()
  )
