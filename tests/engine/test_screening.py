"""Many columns, many leaves: screening keeps the columns where the change lives, and the search
over them names the same causes as a search over every column.

The planted scenarios are small enough for the full search, so these tests lower the leaf budget
to force the screening pass on the same data and compare the answers.
"""

from __future__ import annotations

import builtins
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from sql_tools import MAX_SEGMENT_COLUMNS, ToolContext
from tasks.engine import cube as cube_mod
from tasks.engine import screen as screen_mod
from tasks.engine.explain import explain_change
from tasks.engine.parse import build_question
from tasks.engine.search import Groups
from tasks.engine.search import groups as search_mod
from tasks.ingest.load import load_files
from tasks.report.markdown import render

# Slow end to end (planted scenarios searched with and without screening):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "data" / "scenarios"


@pytest.fixture(scope="module")
def scenario_db(tmp_path_factory):
    """name -> (database of the scenario's files, its expected.json)."""
    built: dict[str, tuple[Path, dict]] = {}

    def get(name: str) -> tuple[Path, dict]:
        if name not in built:
            db = tmp_path_factory.mktemp(name) / "data.duckdb"
            load_files([SCENARIOS / name], db)
            built[name] = (db, json.loads((SCENARIOS / name / "expected.json").read_text()))
        return built[name]

    return get


def _question(ctx: ToolContext, exp: dict, dimensions: str | None = None):
    return build_question(
        ctx.schema,
        metric=exp["metric"],
        time_column=exp["time_column"],
        baseline=exp["baseline"],
        comparison=exp["comparison"],
        grain=exp.get("grain"),
        dimensions=dimensions,
    )


def _explain(db: Path, exp: dict):
    with ToolContext(db) as ctx:
        return explain_change(ctx, _question(ctx, exp))


def _segments(expl) -> set[frozenset]:
    return {frozenset((k, str(v)) for k, v in c.segment.items()) for c in expl.root_causes}


@pytest.mark.parametrize("name", ["release_loss", "pricing_join", "pure_noise"])
def test_screened_search_names_the_same_causes_as_the_full_search(name, scenario_db, monkeypatch):
    db, exp = scenario_db(name)
    full = _explain(db, exp)
    assert full.stats["screening"] is None
    planted = {frozenset((k, str(v)) for k, v in c["segment"].items()) for c in exp["root_causes"]}
    assert _segments(full) == planted

    monkeypatch.setattr(cube_mod, "LEAF_BUDGET", 60)
    screened = _explain(db, exp)
    sc = screened.stats["screening"]
    assert sc is not None and sc["covers"]
    kept = screened.stats["search_dimensions"]
    assert len(kept) < len(screened.dimensions), "a budget of 60 leaves cannot hold every column"
    assert _segments(screened) == planted
    assert screened.change.significant == exp["significant"]
    for seg in planted:
        assert {col for col, _ in seg} <= set(kept)
    left_out = [d for d in screened.dimensions if d not in kept]
    assert any(all(d in n for d in left_out) for n in screened.notes), screened.notes
    text = render(screened)
    depth = screened.stats["max_depth"]
    assert depth == len(kept), "so few columns are searched at every depth"
    searched = f"segments over {', '.join(kept)}: every value of each column and every combination"
    assert f"{searched} of up to {depth} of them" in text.replace("\\_", "_")


def test_covers_hold_every_combination_within_the_budget():
    rng = np.random.default_rng(7)
    for _ in range(30):
        sizes = [int(x) for x in rng.integers(1, 60, size=int(rng.integers(2, 9)))]
        for depth in (1, 2, 3):
            budget = int(rng.integers(50, 5000))
            cov = screen_mod.covers(sizes, depth, budget)
            for combo in combinations(range(len(sizes)), min(depth, len(sizes))):
                assert any(set(combo) <= set(c) for c in cov), (sizes, depth, combo, cov)
            for c in cov:
                # a cover only grows past the budget when its first combination alone does
                if len(c) > depth:
                    assert np.prod([sizes[j] for j in c]) <= budget
            # never more passes over the rows than growing covers one column at a time
            assert len(cov) <= len(screen_mod._greedy_covers(sizes, depth, budget))


def test_the_fewest_covers_are_found_where_growing_them_needs_more():
    """Eight columns of 3 to 50 values (the scale benchmark's): every pair fits in three sets of
    at most 200k value combinations, where growing them one column at a time takes four (each
    one more pass over every row)."""
    sizes = [3, 6, 8, 12, 25, 50, 4, 6]
    assert len(screen_mod._greedy_covers(sizes, 2, 200_000)) == 4
    cov = screen_mod.covers(sizes, 2, 200_000)
    assert len(cov) == 3
    assert all(np.prod([sizes[j] for j in c]) <= 200_000 for c in cov)
    assert all(any(set(pair) <= set(c) for c in cov) for pair in combinations(range(8), 2))


@pytest.mark.parametrize("by", ["matrix", "cuboid", "unloadable"])
def test_segment_sums_over_leaves_match_a_direct_count(scenario_db, monkeypatch, by):
    """The integer-keyed grouping gives every segment exactly the sum of its own leaves, over
    all the leaves or over some (a mask or the leaves' indices): as one sparse product, and
    cuboid by cuboid where the matrix would be too large or the sparse library fails to load
    (a process whose address space is capped and mostly reserved)."""
    if by == "cuboid":
        monkeypatch.setattr(search_mod, "MATRIX_ENTRIES", 0)
    if by == "unloadable":
        real_import = builtins.__import__

        def no_sparse(name, globals=None, locals=None, fromlist=(), level=0):
            if name == "scipy" and "sparse" in (fromlist or ()):
                raise ImportError("failed to map segment from shared object")
            return real_import(name, globals, locals, fromlist, level)

        monkeypatch.setattr(builtins, "__import__", no_sparse)
    db, exp = scenario_db("two_causes")
    with ToolContext(db) as ctx:
        q = _question(ctx, exp, "platform,device,country,users.plan")
        cube = cube_mod.build_cube(ctx, q, list(q.dimensions))
    groups = Groups(cube)
    n_seg = len(cube.seg_mask)
    x = cube.leaf["nc"]
    sums = groups.sums(x, n_seg)
    assert (groups.matrix is None) == (by == "unloadable")
    # the query's own per-segment sums agree with summing leaves in numpy
    assert np.allclose(sums, cube.seg["nc"])
    rng = np.random.default_rng(1)
    some = rng.random(len(x)) < 0.4
    on_mask, on_index = groups.sums(x, n_seg, where=some), groups.sums(x, n_seg, some.nonzero()[0])
    for i in rng.choice(n_seg, 40, replace=False):
        cols = np.flatnonzero(cube.seg_mask[i])
        inside = (cube.leaf_codes[:, cols] == cube.seg_codes[i, cols]).all(axis=1)
        assert sums[i] == pytest.approx(x[inside].sum())
        assert on_mask[i] == pytest.approx(x[inside & some].sum())
        assert on_index[i] == on_mask[i]
        # its cuboid is the segment's own columns
        seg_ids = groups.cuboids[groups.seg_cuboid[i]][0]
        assert (cube.seg_mask[seg_ids] == cube.seg_mask[i]).all()


def test_explain_change_is_a_tool_with_the_same_answer_as_the_library(scenario_db):
    from tasks.tools import dispatch

    db, exp = scenario_db("pricing_join")
    start, end = exp["baseline"].split(":")
    c_start, c_end = exp["comparison"].split(":")
    args = {
        "metric": exp["metric"],
        "time_column": exp["time_column"],
        "baseline": {"start": start, "end": end},
        "comparison": {"start": c_start, "end": c_end},
    }
    with ToolContext(db) as ctx:
        is_error, out = dispatch(ctx, "explain_change", args)
        assert not is_error, out
        assert [c["segment"] for c in out["root_causes"]] == [{"users.plan": "pro"}]
        assert out["change"]["significant"] is True
        evidence = out["root_causes"][0]["evidence"]
        # the cause's numbers reproduce through the tool its evidence names
        is_error, rerun = dispatch(ctx, evidence["tool"], evidence["arguments"])
        assert not is_error, rerun
        assert rerun["total"]["baseline"] == pytest.approx(out["root_causes"][0]["baseline"])
        assert rerun["total"]["comparison"] == pytest.approx(out["root_causes"][0]["comparison"])
        # filters in the tools' form narrow the question like the CLI's
        only_free = {**args, "filters": [{"column": "users.plan", "op": "=", "value": "free"}]}
        is_error, out_free = dispatch(ctx, "explain_change", only_free)
        assert not is_error and out_free["root_causes"] == []
        # hostile or malformed arguments are errors the model can correct, not SQL
        for bad, code in (
            ({**args, "metric": "sum(revenue); DROP TABLE events"}, "invalid_arguments"),
            ({**args, "metric": "sum(no_such_column)"}, "unknown_column"),
            ({**args, "baseline": {"label": "x", "start": start}}, "invalid_period"),
            ({**args, "baseline": {"label": "week 1"}}, "invalid_period"),
            ({**args, "max_depth": MAX_SEGMENT_COLUMNS + 1}, "limit_exceeded"),
        ):
            is_error, err = dispatch(ctx, "explain_change", bad)
            assert is_error and err["error"]["code"] == code, (bad, err)


def test_thin_cells_of_a_mostly_zero_metric_show_no_moves_where_there_are_none(
    tmp_path, monkeypatch
):
    """Sixty thousand rows of pure noise over seven columns of 2.3 million value combinations,
    revenue 0 on two rows in three. Covers as fine as the leaf budget allows would hold a row or
    two per cell, where the noise cannot be measured (a cell of zeros fits exactly, a cell of one
    row fits nothing): screening then reported thousands of significant segments and told the
    user to investigate moves that are noise. It must find none."""
    rng = np.random.default_rng(11)
    n = 60_000
    sizes = {"a": 4, "b": 5, "c": 6, "d": 8, "e": 10, "f": 12, "g": 20}
    cols = {k: rng.integers(0, s, n) for k, s in sizes.items()}
    day = rng.integers(0, 14, n)
    paid = rng.random(n) < 0.35
    revenue = np.where(paid, np.round(rng.lognormal(2.0, 1.0, n), 2), 0.0)
    lines = ["date," + ",".join(sizes) + ",revenue"]
    for i in range(n):
        values = ",".join(f"{k}{cols[k][i]}" for k in sizes)
        lines.append(f"2024-03-{day[i] + 1:02d},{values},{revenue[i]}")
    (tmp_path / "sales.csv").write_text("\n".join(lines) + "\n")
    db = tmp_path / "data.duckdb"
    load_files([tmp_path / "sales.csv"], db)
    monkeypatch.setattr(cube_mod, "LEAF_BUDGET", 30_000)  # fewer than the rows: screen first
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema,
            metric="sum(revenue)",
            time_column="date",
            baseline="2024-03-01:2024-03-07",
            comparison="2024-03-08:2024-03-14",
        )
        expl = explain_change(ctx, q)
    sc = expl.stats["screening"]
    assert sc is not None, "the budget forces the screening pass"
    assert sc["significant_segments"] == 0, sc["significant_segments"]
    assert sc["dropped"] == []
    assert not [note for note in expl.notes if "significant move" in note], expl.notes
    assert expl.root_causes == []
