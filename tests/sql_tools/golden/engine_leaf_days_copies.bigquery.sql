-- engine_leaf_days_copies: engine: the one pass over the source also counting the rows loaded twice (one row in 4, sampled by the hash of the whole row, grouped per day by that hash)
-- p1 = datetime.date(2024, 1, 1)
-- p2 = datetime.date(2024, 1, 7)
-- p3 = datetime.date(2024, 1, 8)
-- p4 = datetime.date(2024, 1, 14)
-- p5 = 'LATAM'
SELECT
  `d0`,
  `d1`,
  `d2`,
  `__p`,
  `__day`,
  MIN(`n`) AS `n`,
  MIN(`qn`) AS `qn`,
  MIN(`rows`) AS `rows`,
  `__cell`,
  SUM(IF(NOT `__h` IS NULL, `rows`, NULL)) AS `__rows`,
  COUNTIF(NOT `__h` IS NULL) AS `__distinct`,
  COUNTIF(NOT `__h` IS NULL AND MOD(`rows`, 4) = 0) AS `__x4`,
  COUNTIF(NOT `__h` IS NULL AND MOD(`rows`, 3) = 0) AS `__x3`,
  COUNTIF(NOT `__h` IS NULL AND MOD(`rows`, 2) = 0) AS `__x2`
FROM (
  SELECT
    `d0`,
    `d1`,
    `d2`,
    `__p`,
    `__day`,
    SUM(`__n`) AS `n`,
    SUM(`__n` * `__n`) AS `qn`,
    COUNT(*) AS `rows`,
    GROUPING(`__h`) AS `__cell`,
    `__h`
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
      1 AS `__d`,
      CASE
        WHEN MOD(
          FARM_FINGERPRINT(
            TO_JSON_STRING(
              STRUCT(
                `t0`.`day`,
                `t0`.`region`,
                `t0`.`product`,
                `t0`.`revenue`,
                `t0`.`orders`,
                `t0`.`customer_id`
              )
            )
          ),
          4
        ) = 0
        THEN FARM_FINGERPRINT(
          TO_JSON_STRING(
            STRUCT(
              `t0`.`day`,
              `t0`.`region`,
              `t0`.`product`,
              `t0`.`revenue`,
              `t0`.`orders`,
              `t0`.`customer_id`
            )
          )
        )
      END AS `__h`
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
    GROUPING SETS (
      (`d0`, `d1`, `d2`, `__p`, `__day`),
      (`__p`, `__day`, `__h`)
    )
)
GROUP BY
  `d0`,
  `d1`,
  `d2`,
  `__p`,
  `__day`,
  `__cell`
