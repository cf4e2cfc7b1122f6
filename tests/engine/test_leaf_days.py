"""The source read once: the engine aggregates the question's rows to cells (leaf, period, day)
in one query, and reads the cube, the daily series and the segments' sums from them.

On planted scenarios loaded by the real loader: the numbers read from the cells are the numbers
their SQL gives on the source (the cube's SQL, each root cause's and driver's evidence SQL, the
daily series), on DuckDB here and on real Postgres in ``tests/flows/test_postgres_source.py``;
and the engine's passes over the source do not grow with the root causes it checks.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sql_tools import ToolContext
from tasks.engine import cube as cube_mod
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question
from tasks.engine.spec import Question
from tasks.ingest.load import load_files
from tests.engine.test_scenarios import SCENARIOS, expected_of
from tests.flows.test_postgres_source import _question as scenario_question
from tests.support.provenance import assert_same_answer, source_beside

# Slow end to end (planted scenarios' numbers re-computed on the source):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

# two root causes; a cause in a joined column; a missing day (clean days measured); a ratio
NAMES = ["two_causes", "pricing_join", "missing_day", "mix_shift"]
REL = 1e-9


def _db(tmp_path: Path, name: str) -> Path:
    db = tmp_path / "data.duckdb"
    files = sorted(p for p in (SCENARIOS / name).iterdir() if p.name != "expected.json")
    load_files(files, db)
    return db


def _question(ctx: ToolContext, name: str) -> Question:
    """The scenario's question, as the investigation asks it."""
    args = scenario_question(expected_of(name))
    for key in ("offline", "remember"):
        args.pop(key)
    return build_question(ctx.schema, **args)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_numbers_from_the_cells_are_what_their_sql_gives_on_the_source(tmp_path, name):
    with ToolContext(_db(tmp_path, name)) as ctx, source_beside(ctx) as src:
        q = _question(ctx, name)
        a = analyze(ctx, q)
        assert a.cells is not None
        e = a.explanation
        dims = e.stats["search_dimensions"]
        q = q.model_copy(update={"max_depth": e.stats["max_depth"]})
        # the cube: its SQL, run on the source, gives the same segments and statistics
        source = cube_mod.build_cube(src, q, dims)
        assert source.sql == a.cube.sql
        assert np.array_equal(source.seg_codes, a.cube.seg_codes)
        assert source.values == a.cube.values
        for key, arr in source.seg.items():
            assert np.allclose(arr, a.cube.seg[key], rtol=REL, atol=1e-12), key
        # the daily series the change was tested on
        on_source = cube_mod.daily_series(src, q)[0]
        from_cells = cube_mod.daily_series(ctx, q, {})[0]
        for which in ("baseline", "comparison"):
            for key in ("n", "d"):
                assert np.allclose(on_source[which][key], from_cells[which][key], rtol=REL)
            assert np.array_equal(on_source[which]["present"], from_cells[which]["present"])
        # every root cause's and driver's evidence SQL, run on the source
        checked = 0
        for c in [*e.root_causes, *e.drivers]:
            assert c.evidence is not None
            sq = cube_mod.SegmentQuery(sql=c.evidence.sql, params=c.evidence.params, formula="")
            cube_mod.run_segment_query(src, q, sq)  # the source
            assert _close(sq.baseline, c.baseline) and _close(sq.comparison, c.comparison), c
            checked += 1
        assert checked or not e.change.significant


def test_root_causes_are_checked_without_reading_the_source_again(tmp_path):
    """The engine's passes over the tables, however many root causes it names and checks: the
    one aggregation (events joined to users), and the two data-quality passes the cells cannot
    answer (the time column's range over every day with each column's non-NULL counts, joined
    to users for its columns; repeated rows)."""
    with ToolContext(_db(tmp_path, "two_causes")) as ctx:
        a = analyze(ctx, _question(ctx, "two_causes"))
        assert len(a.explanation.root_causes) == 2
        assert ctx.passes.by_table() == {"events": 3, "users": 2}


def test_too_many_cells_read_the_source_for_each_number_with_the_same_answer(
    tmp_path, monkeypatch
):
    """More cells than the engine stores (two months of many leaves): no cells, each number
    from the source as before, the same answer."""
    from tasks.engine import leaf_days

    with ToolContext(_db(tmp_path, "two_causes")) as ctx:
        q = _question(ctx, "two_causes")
        stored = analyze(ctx, q)
        monkeypatch.setattr(leaf_days, "MAX_CELLS", 10)
        read = analyze(ctx, q)
    assert stored.cells is not None and read.cells is None
    a, b = stored.explanation, read.explanation
    assert [c.segment for c in a.root_causes] == [c.segment for c in b.root_causes]
    for x, y in zip(a.root_causes, b.root_causes, strict=True):
        assert _close(x.baseline, y.baseline) and _close(x.comparison, y.comparison)
    assert _close(a.change.p_value, b.change.p_value)


def test_after_screening_the_one_pass_counts_the_rows_per_day_and_value(tmp_path, monkeypatch):
    """Screening keeps fewer columns than the missing-days check reads, so the cells cannot
    give its rows per day and value: the one aggregation counts them too (one grouping set per
    column checked that the cells leave out; the others are summed from the cells), and the
    check finds the web collector's missing day as when it read the
    source itself, with its own SQL shown, whose rows on the source are the rows it was given;
    the engine reads the table once less."""
    from tasks.engine import leaf_days as leaf_days_mod
    from tasks.engine.answerable import check_answerable
    from tasks.engine.quality import days as days_mod

    monkeypatch.setattr(cube_mod, "LEAF_BUDGET", 6)  # too many leaves: screen the columns first
    db = _db(tmp_path, "segment_outage")
    given = []
    on_cells = days_mod._on_cells

    def keep(*args, **kwargs):
        out = on_cells(*args, **kwargs)
        if out is not None:
            given.append(out)
        return out

    monkeypatch.setattr(days_mod, "_on_cells", keep)
    found, passes = [], []
    for fold in (True, False):
        if not fold:
            monkeypatch.setattr(leaf_days_mod, "_days_not_in", lambda *args: ())
        with ToolContext(db) as ctx:
            q = _question(ctx, "segment_outage")
            check_answerable(ctx, q)
            with ctx.passes.during("engine"):
                a = analyze(ctx, q)
            e = a.explanation
            assert e.stats.get("screening"), e.stats
            assert len(e.stats["search_dimensions"]) < 4, e.stats["search_dimensions"]
            passes.append(ctx.passes.by_step()["engine"]["events"])
            found.append(
                [(i.kind, i.details, i.evidence.sql, i.evidence.params) for i in e.data_quality]
            )
            if fold:  # the days query's rows, given from the cells, are its SQL's on the source
                assert len(given) == 1
                (out,) = [p for p in ctx.reader.provenance if "day_values" in p.sql]
                assert_same_answer(ctx, a.cells, out)

            else:
                assert len(given) == 1  # the source was read for the days instead
    assert found[0] == found[1]
    assert "segment_missing_days" in [kind for kind, *_ in found[0]]
    assert passes[0] == passes[1] - 1, passes
