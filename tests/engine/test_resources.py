"""What the engine does at the edges of its resources and its arithmetic: a file wider than any
search can combine, many dimensions, and a baseline of zero.

The wide cases run ``drilldown investigate`` as a user runs it, in a process of its own whose
address space is capped. The cap is 4 GiB, not less: DuckDB 2 reserves address space it never
touches (a run whose resident memory peaks near 330 MB maps 3.3 GB), so a tighter cap fails
in DuckDB's allocator whatever the engine does. What the engine holds is the resident peak,
measured on the child (``os.wait4``) and bounded here at 1 GiB; before its stages were bounded,
the same 300-column file took the process past 4 GiB.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, timedelta

import pytest

from benchmarks.wide import WEEKS, investigate_capped, wide_csv, wide_duckdb
from sql_tools import ToolContext
from tasks.engine import cube as cube_mod
from tasks.engine.explain import explain_change
from tasks.engine.parse import build_question
from tasks.ingest.load import load_files
from tasks.report.markdown import render

ADDRESS_SPACE = 4 * 1024**3
RESIDENT_MAX_KB = 1024**2  # ru_maxrss is in kB on Linux


@pytest.mark.slow
def test_a_wide_file_gets_an_answer_within_a_memory_cap(tmp_path):
    # 300 three-value columns x 420 rows (0.3 MB): every combination of three of them is 4.5
    # million grouping sets; the search screens the columns first and names those it left out
    data = tmp_path / "wide.csv"
    wide_csv(data, 300, 420, planted=150)
    run = investigate_capped(
        [str(data), "--metric", "sum(purchases)", *WEEKS], tmp_path / "out", ADDRESS_SPACE
    )
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.peak_kb < RESIDENT_MAX_KB, run.peak_kb
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["root_causes"][0]["segment"] == {"c150": "a"}
    screening = result["stats"]["screening"]
    kept = result["stats"]["search_dimensions"]
    assert "c150" in kept and len(kept) <= 12
    assert sorted(screening["left_out"] + kept) == sorted(f"c{j}" for j in range(300))
    assert any("screened and left out: c0, c1" in n for n in result["notes"]), result["notes"]


@pytest.mark.slow
def test_two_thousand_dimensions_get_an_answer_not_a_traceback(tmp_path):
    # a database written by DuckDB itself (no profiles: every column's values are a guess) with
    # 2,000 columns, all named with --dimensions; the move is in the 1,501st
    db = tmp_path / "wide.duckdb"
    wide_duckdb(db, 2000, 420, planted=1500)
    dims = ",".join(f"c{j}" for j in range(2000))
    args = [str(db), "--metric", "sum(purchases)", "--dimensions", dims, *WEEKS]
    run = investigate_capped(args, tmp_path / "out", ADDRESS_SPACE)
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.peak_kb < RESIDENT_MAX_KB, run.peak_kb
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["root_causes"][0]["segment"] == {"c1500": "a"}
    assert len(result["stats"]["screening"]["left_out"]) >= 2000 - 12


def _wide_question(tmp_path, columns: int, **extra: object):
    """A loaded file of ``columns`` three-value columns x 420 rows, the cause in c1, and the
    question of its purchases' move (with ``extra`` arguments)."""
    data = tmp_path / "wide.csv"
    wide_csv(data, columns, 420, planted=1)
    db = tmp_path / "wide.duckdb"
    load_files([data], db)
    ctx = ToolContext(db)
    q = build_question(
        ctx.schema,
        metric="sum(purchases)",
        baseline="2024-03-04:2024-03-17",
        comparison="2024-03-18:2024-03-31",
        **extra,
    )
    return ctx, q


def test_forty_columns_are_screened_to_a_search_of_at_most_twelve(tmp_path):
    # to depth 3, forty columns were 10,700 grouping sets in one query: past the memory limit
    ctx, q = _wide_question(tmp_path, 40)
    with ctx:
        e = explain_change(ctx, q)
    kept = e.stats["search_dimensions"]
    assert e.root_causes[0].segment == {"c1": "a"}
    assert "c1" in kept and len(kept) <= cube_mod.MAX_SEARCH_COLUMNS
    assert cube_mod.grouping_sets(len(kept), e.stats["max_depth"]) <= cube_mod.GROUPING_SET_BUDGET
    assert len(e.stats["screening"]["left_out"]) == 40 - len(kept)


def test_a_depth_beyond_the_budget_is_lowered_with_a_note(tmp_path):
    # twelve columns to depth 6 are 2,509 grouping sets; to depth 3, 298
    dims = ",".join(f"c{j}" for j in range(12))
    ctx, q = _wide_question(tmp_path, 12, dimensions=dims, max_depth=6)
    with ctx:
        e = explain_change(ctx, q)
    assert e.stats["max_depth"] == 3
    assert any(n.startswith("segments combine at most 3 columns, not 6") for n in e.notes)
    assert e.root_causes[0].segment == {"c1": "a"}


def _days_csv(rows_per_day: int, value: Callable[[date, int], int]) -> str:
    """date, platform, purchases over the 14 days from 2024-03-04."""
    lines = ["date,platform,purchases"]
    for i in range(14):
        day = date(2024, 3, 4) + timedelta(days=i)
        for r in range(rows_per_day):
            lines.append(f"{day},{'web' if r % 2 else 'ios'},{value(day, r)}")
    return "\n".join(lines) + "\n"


def test_a_zero_baseline_says_why_the_change_has_no_relative_size(make_db):
    # nothing was bought in the first week: the move has a size, but no relative one
    text = _days_csv(4, lambda day, r: 0 if day < date(2024, 3, 11) else 3 + r)
    db = make_db(sales=text)
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema,
            metric="sum(purchases)",
            baseline="2024-03-04:2024-03-10",
            comparison="2024-03-11:2024-03-17",
        )
        e = explain_change(ctx, q)
    assert e.baseline.value == 0 and e.change.absolute > 0
    assert e.change.relative is None
    note = "the baseline is 0, so the change has no relative size"
    assert note in e.notes
    assert note in render(e)
