"""The randomized families of ``benchmarks/families.py``: draws are reproducible, and what a draw
says it planted is what its CSV files show, read back with DuckDB independently of the
generator's own bookkeeping. The engine's accuracy on the draws is the benchmark's business and
is not asserted here."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pytest

from benchmarks.families import FAMILIES, Draw, draw, missed_evidence, score

SEEDS = (0, 1, 2)
METRIC_SQL = {
    "sum(revenue)": "sum(revenue)",
    "sum(sessions)": "sum(sessions)",
    "count(*)": "count(*)",
    # one row per user and day: the week's daily distinct users, summed, are its distinct pairs
    "count(distinct user_id)": "count(DISTINCT (user_id, date))",
    "sum(purchases) / sum(sessions)": "sum(purchases) / sum(sessions)",
    "sum(revenue) / sum(orders)": "sum(revenue) / sum(orders)",
}


@cache
def drawn(family: str, seed: int) -> Draw:
    return draw(family, seed)


class Data:
    """A draw's files read by DuckDB: table ``t`` of the two weeks (or periods), with ``per`` =
    ``base`` / ``cmp`` and the users' columns as ``"users.<name>"``."""

    def __init__(self, d: Draw, folder: Path) -> None:
        d.write(folder)
        self.draw = d
        self.folder = folder
        self.con = duckdb.connect()
        q = d.question
        if "time_column" in q:
            self.con.execute(
                f"""CREATE TABLE t AS SELECT e.*, u.channel AS "users.channel",
                       u.plan AS "users.plan", u.age_group AS "users.age_group",
                       CASE WHEN e.date >= DATE '2024-03-25' THEN 'cmp' ELSE 'base' END AS per
                FROM read_csv('{folder / "events.csv"}') e
                LEFT JOIN read_csv('{folder / "users.csv"}') u USING (user_id)
                WHERE e.date BETWEEN DATE '2024-03-18' AND DATE '2024-03-31'"""
            )
        else:
            self.con.execute(
                f"""CREATE TABLE t AS SELECT *,
                       CASE WHEN period = '{q["comparison"]}' THEN 'cmp' ELSE 'base' END AS per
                FROM read_csv('{folder / "sales.csv"}', types={{'period': 'VARCHAR'}})"""
            )

    def _by_period(self, cond: str, params: list[Any] | None) -> dict[str, float]:
        """The draw's metric per period (``base``, ``cmp``) on the rows ``cond`` selects."""
        metric = METRIC_SQL[self.draw.question["metric"]]
        return dict(
            self.con.execute(
                f"SELECT per, {metric} FROM t WHERE {cond} GROUP BY per", params or []
            ).fetchall()
        )

    def rel(self, cond: str = "TRUE", params: list[Any] | None = None) -> float:
        """Comparison / baseline - 1 of the draw's metric on the rows ``cond`` selects."""
        got = self._by_period(cond, params)
        return got["cmp"] / got["base"] - 1

    def delta(self, cond: str = "TRUE", params: list[Any] | None = None) -> float:
        """Comparison - baseline of the draw's (additive) metric on the rows ``cond`` selects."""
        got = self._by_period(cond, params)
        return got["cmp"] - got["base"]

    def rate(self, cond: str, params: list[Any]) -> tuple[float, float]:
        """Baseline and comparison conversion (purchases / sessions) of the rows."""
        got = dict(
            self.con.execute(
                f"SELECT per, sum(purchases) / sum(sessions) FROM t WHERE {cond} GROUP BY per",
                params,
            ).fetchall()
        )
        return got["base"], got["cmp"]

    def share(self, cond: str, params: list[Any]) -> tuple[float, float]:
        """The rows' share of all sessions in the baseline and in the comparison."""
        got = dict(
            self.con.execute(
                f"SELECT per, sum(CASE WHEN {cond} THEN sessions ELSE 0 END) / sum(sessions) "
                "FROM t GROUP BY per",
                params,
            ).fetchall()
        )
        return got["base"], got["cmp"]


def where(segment: dict[str, str]) -> tuple[str, list[str]]:
    """SQL condition and parameters for ``{column: value}``."""
    parts = [f'CAST("{col}" AS VARCHAR) = ?' for col in segment]
    return "(" + " AND ".join(parts or ["TRUE"]) + ")", [str(v) for v in segment.values()]


def only(segments: list[dict[str, str]], i: int) -> tuple[str, list[str]]:
    """Rows in segment ``i`` and in none of the others (``i = -1``: in none at all)."""
    sql, params = [], []
    for j, seg in enumerate(segments):
        cond, p = where(seg)
        sql.append(cond if j == i else f"NOT {cond}")
        params += p
    return " AND ".join(sql or ["TRUE"]), params


def factor_of(cause: dict[str, Any]) -> float:
    """A cause's planted factor (the product of its plants' factors)."""
    if "factor" in cause:
        return cause["factor"]
    return math.prod(p["factor"] for p in cause["plants"])


def segments_of(d: Draw) -> list[dict[str, str]]:
    return [c["segment"] for c in d.planted["root_causes"]]


def relative_to_rest(db: Data, i: int) -> float:
    """How much more segment ``i`` (its rows outside the other causes) moved than the rows of no
    cause: ``(1 + own) / (1 + rest) - 1``."""
    segs = segments_of(db.draw)
    return (1 + db.rel(*only(segs, i))) / (1 + db.rel(*only(segs, -1))) - 1


def assert_causes_moved_as_planted(db: Data) -> None:
    """Each cause's own rows moved against the rest in the planted direction, by a good part of
    the planted factor (the rest is noise: at least 6 of its SDs were planted)."""
    causes = db.draw.facts["causes"]
    assert len(causes) == len(db.draw.planted["root_causes"]) >= 1
    for i, cause in enumerate(causes):
        f = factor_of(cause)
        moved = relative_to_rest(db, i)
        assert moved * (f - 1) > 0, (cause, moved)
        assert abs(moved) >= 0.3 * abs(f - 1), (cause, moved)
        assert cause["z"] >= 6


@pytest.fixture
def data(tmp_path: Path):
    opened: list[Data] = []

    def make(family: str, seed: int) -> Data:
        db = Data(drawn(family, seed), tmp_path / f"{family}-{seed}")
        opened.append(db)
        return db

    yield make
    for db in opened:
        db.con.close()


# --------------------------------------------------------------------------------------------
# reproducible


@pytest.mark.parametrize("family", FAMILIES)
def test_a_draw_is_the_same_for_its_seed_and_differs_for_another(family: str) -> None:
    a, b, c = drawn(family, 5), draw(family, 5), drawn(family, 6)
    assert a.files == b.files
    assert (a.question, a.planted, a.facts) == (b.question, b.planted, b.facts)
    assert a.files != c.files


def test_report_seeds_draw_other_cases_than_tune_seeds() -> None:
    assert drawn("k_of_n", 0).files != drawn("k_of_n", 100_000).files


def test_an_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown family"):
        draw("nope", 0)


# --------------------------------------------------------------------------------------------
# product-shaped data


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "preaggregated"])
def test_events_are_one_row_per_active_user_and_day_and_join_users(family: str, data) -> None:
    db = data(family, 0)
    rows, pairs, orphans, days = db.con.execute(
        f"""SELECT count(*), count(DISTINCT (e.user_id, e.date)),
                   count(*) FILTER (WHERE u.user_id IS NULL), count(DISTINCT e.date)
            FROM read_csv('{db.folder / "events.csv"}') e
            LEFT JOIN read_csv('{db.folder / "users.csv"}') u USING (user_id)"""
    ).fetchone()
    assert rows == pairs and orphans == 0 and days == 28
    assert 15_000 <= rows <= 70_000
    # app versions are nested in platforms: "web" is the web platform and nothing else
    mixed = db.con.execute(
        "SELECT count(*) FROM t WHERE (platform = 'web') != (CAST(app_version AS VARCHAR) = 'web')"
    ).fetchone()[0]
    assert mixed == 0


def test_preaggregated_is_one_row_per_cell_and_period(data) -> None:
    for seed in SEEDS:
        db = data("preaggregated", seed)
        dims = ", ".join(db.draw.base_columns[:4])
        cells, rows, periods = db.con.execute(
            f"SELECT count(DISTINCT ({dims})), count(*), count(DISTINCT period) FROM t"
        ).fetchone()
        assert periods == 2 and rows == 2 * cells
        assert 900 <= cells <= 9000


# --------------------------------------------------------------------------------------------
# the plant is in the data


def test_k_of_n_moves_k_values_of_one_column_one_way(data) -> None:
    for seed in SEEDS:
        db = data("k_of_n", seed)
        segs = segments_of(db.draw)
        (column,) = {c for s in segs for c in s}
        assert all(len(s) == 1 for s in segs)
        assert 1 <= len(segs) <= db.draw.facts["n"] - 1
        assert len({factor_of(c) > 1 for c in db.draw.facts["causes"]}) == 1  # one direction
        assert column == db.draw.facts["column"]
        assert_causes_moved_as_planted(db)


@pytest.mark.parametrize("family", ["overlapping", "two_plus_one", "offsetting"])
def test_two_cause_families_move_both_causes(family: str, data) -> None:
    for seed in SEEDS:
        db = data(family, seed)
        s1, s2 = segments_of(db.draw)
        if family == "overlapping":
            assert len(s1) == len(s2) == 2 and len(set(s1.items()) & set(s2.items())) == 1
        elif family == "two_plus_one":
            assert sorted([len(s1), len(s2)]) == [1, 2]
            assert not set(s1) & set(s2)
        else:
            assert len(s1) == len(s2) == 1 and s1 != s2
        assert_causes_moved_as_planted(db)


def test_offsetting_causes_nearly_cancel(data) -> None:
    for seed in SEEDS:
        db = data("offsetting", seed)
        f1, f2 = (factor_of(c) for c in db.draw.facts["causes"])
        assert (f1 - 1) * (f2 - 1) < 0
        assert db.draw.facts["net_over_gross"] <= 0.3
        gross = sum(abs(c["expected_effect"]) for c in db.draw.facts["causes"])
        net = sum(c["expected_effect"] for c in db.draw.facts["causes"])
        assert abs(net) <= 0.3 * gross
        # in the data: the causes moved opposite ways and the net is small against the gross
        d1, d2 = (db.delta(*where(s)) for s in segments_of(db.draw))
        assert d1 * d2 < 0 and abs(db.delta()) <= 0.6 * (abs(d1) + abs(d2))


@pytest.mark.parametrize("family", ["mix_low", "mix_high"])
def test_mix_families_grow_a_share_and_keep_every_conversion(family: str, data) -> None:
    for seed in SEEDS:
        db = data(family, seed)
        (seg,) = segments_of(db.draw)
        assert db.draw.planted["root_causes"][0]["effect"] == "mix"
        ((column, _),) = seg.items()
        assert column.startswith("users.")
        cond, params = where(seg)
        before, after = db.share(cond, params)
        assert 1.6 <= after / before <= 3.6
        own_before, own_after = db.rate(cond, params)
        total_before, _ = db.rate("TRUE", [])
        if family == "mix_low":
            assert own_before < 0.9 * total_before and db.rel() < 0
        else:
            assert own_before > 1.1 * total_before and db.rel() > 0
        # the grown share at the value's own baseline conversion accounts for the move ...
        total_after = db.rate("TRUE", [])[1]
        mix = (after - before) * (own_before - total_before)
        assert 0.5 <= mix / (total_after - total_before) <= 2.0
        # ... while every value's own conversion stays within the noise
        values = [r[0] for r in db.con.execute(f'SELECT DISTINCT "{column}" FROM t').fetchall()]
        for v in values:
            b, a = db.rate(*where({column: v}))
            assert abs(a / b - 1) < max(0.3, abs(db.rel())), (v, b, a)


def test_even_shift_moves_every_large_value_alike(data) -> None:
    for seed in SEEDS:
        db = data("even_shift", seed)
        assert db.draw.planted == {"root_causes": [], "global_shift": True, "significant": True}
        shift = db.draw.facts["shift"]
        f = shift["factor"]
        total = db.rel()
        assert total * (f - 1) > 0 and abs(total) >= 0.5 * abs(f - 1)
        # what the shift moved, with the least noise: active user-days, or revenue per purchase
        def measure(per: str) -> str:
            only = f"FILTER (WHERE per = '{per}')"
            if shift["what"] == "activity":
                return f"count(*) {only}"
            return f"sum(revenue) {only} / sum(purchases) {only}"

        for column in ("platform", "users.plan", "users.channel"):
            moves = db.con.execute(
                f"""SELECT "{column}", count(*) / sum(count(*)) OVER (),
                           ({measure('cmp')}) / ({measure('base')})
                    FROM t GROUP BY 1"""
            ).fetchall()
            for value, share, ratio in moves:
                if share >= 0.25:
                    assert abs(ratio - f) <= 0.5 * abs(f - 1), (column, value, ratio, f)


def test_noise_only_plants_nothing(data) -> None:
    for seed in SEEDS:
        db = data("noise_only", seed)
        assert db.draw.planted == {"root_causes": [], "global_shift": False, "significant": None}
        assert db.draw.facts["causes"] == []
        assert abs(db.rel()) < 0.1


def test_preaggregated_causes_and_shift_are_in_the_cells(data) -> None:
    shifted = 0
    for seed in range(6):
        db = data("preaggregated", seed)
        assert 1 <= len(db.draw.planted["root_causes"]) <= 2
        assert_causes_moved_as_planted(db)
        rest = db.rel(*only(segments_of(db.draw), -1))
        if db.draw.planted["global_shift"]:
            shifted += 1
            g = db.draw.facts["shift"]["factor"]
            assert abs(rest - (g - 1)) <= 0.3 * abs(g - 1)
        else:
            assert abs(rest) < 0.02
    assert 0 < shifted < 6


# --------------------------------------------------------------------------------------------
# scoring


PLANTED = {
    "root_causes": [
        {"segment": {"users.channel": "email"}, "effect": "mix"},
        {"segment": {"platform": "ios", "country": "US"}, "effect": "rate"},
    ],
    "global_shift": False,
    "significant": None,
}
BASE = ("events", ["date", "user_id", "platform", "country", "revenue"])


def cause(segment: dict[str, Any], effect: str = "mix", aliases: list | None = None) -> dict:
    return {"segment": segment, "aliases": aliases or [], "effect": effect}


def answer(*causes: dict, shift: bool = False, significant: bool = True) -> dict:
    return {"root_causes": list(causes), "global_shift": shift, "significant": significant}


def test_score_matches_segments_by_name_alias_and_table_prefix() -> None:
    got = answer(
        cause({"channel": "email"}),
        cause({"device": "x"}, "rate", aliases=[{"events.platform": "ios", "country": "US"}]),
    )
    assert score(PLANTED, got, *BASE) == (True, [])


def test_score_misses_an_extra_cause_a_wrong_effect_and_a_wrong_shift() -> None:
    ok = [cause({"users.channel": "email"}), cause({"platform": "ios", "country": "US"}, "rate")]
    exact, why = score(PLANTED, answer(*ok, cause({"country": "BR"}, "rate")), *BASE)
    assert not exact and why == ["extra country=BR"]
    exact, why = score(PLANTED, answer(cause({"channel": "email"}, "rate"), ok[1]), *BASE)
    assert not exact and why == ["effect rate, not mix"]
    exact, why = score(PLANTED, answer(*ok, shift=True), *BASE)
    assert not exact and why == ["global shift reported"]
    exact, why = score(PLANTED, answer(ok[0], ok[0]), *BASE)
    assert not exact
    assert sorted(why) == ["extra users.channel=email", "missed country=US&platform=ios"]


def test_score_keeps_the_prefix_when_the_base_table_has_the_column() -> None:
    planted = {"root_causes": [{"segment": {"users.channel": "email"}, "effect": "rate"}],
               "global_shift": False, "significant": None}  # fmt: skip
    got = answer(cause({"channel": "email"}, "rate"))
    assert not score(planted, got, "events", ["channel", "revenue"])[0]
    assert score(planted, got, "events", ["revenue"])[0]


def test_score_even_shift_needs_a_shift_and_significance() -> None:
    planted = {"root_causes": [], "global_shift": True, "significant": True}
    assert score(planted, answer(shift=True), *BASE)[0]
    assert score(planted, answer(shift=True, significant=False), *BASE)[1] == [
        "change not significant"
    ]
    assert score(planted, answer(), *BASE)[1] == ["no global shift"]


def test_a_missed_cause_is_told_by_what_the_answer_says_of_its_evidence() -> None:
    ok = cause({"users.channel": "email"})
    ios_us = {"country": "US", "platform": "ios"}
    # not a driver: under the bound
    assert missed_evidence(PLANTED, answer(ok), *BASE) == ["under the bound"]
    # a driver the named causes account for, and one they do not
    for explained, kind in ((True, "explained by the story"), (False, "left out")):
        driver = {"segment": ios_us, "explained_by_root_causes": explained}
        got = {**answer(ok), "drivers": [driver]}
        assert missed_evidence(PLANTED, got, *BASE) == [kind]
    # named causes have no entry, whatever the drivers say
    both = answer(ok, cause({"events.platform": "ios", "country": "US"}, "rate"))
    assert missed_evidence(PLANTED, {**both, "drivers": []}, *BASE) == []
    assert missed_evidence(PLANTED, answer(), *BASE) == ["under the bound", "under the bound"]
