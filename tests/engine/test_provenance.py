"""Every number keeps its provenance: each answer the context's reader gave from the stored cells
during a real investigation (the engine's cube, daily series, root causes' sums and days query;
the hypotheses' tool calls; the report's per-day numbers; the gate's re-run) is what the source
SQL it notes gives on the source.

On random data loaded by the real loader (several shapes of columns and rows; additive and
ratio metrics; daily periods, a per-day grain and period labels), through a real
:class:`~tasks.run.Run`, beside a second connection to the same file that reads the source.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tasks import tools as registry
from tasks.ingest.load import load_files
from tasks.request import Request
from tasks.run import Run
from tests.support.cell_calls import charts_from_cells, gate_from_cells, planner_calls
from tests.support.provenance import assert_same_answer, source_beside

# Slow end to end (random data loaded, investigated and every answer re-run on the source):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

START = date(2024, 3, 4)
DAYS = 14
DATES = {"time_column": "day", "baseline": "2024-03-04:2024-03-10",
         "comparison": "2024-03-11:2024-03-17"}  # fmt: skip
LABELS = {"period_column": "week", "baseline": "w1", "comparison": "w2"}
SHAPES = {
    "sum, days": (1, {"metric": "sum(revenue)", **DATES}),
    "ratio, days": (2, {"metric": "sum(orders) / sum(sessions)", **DATES}),
    "sum per day": (3, {"metric": "sum(orders)", "grain": "day", **DATES}),
    "count, labels": (4, {"metric": "count(*)", **LABELS}),
    "ratio, labels": (5, {"metric": "sum(revenue) / sum(sessions)", **LABELS}),
}


def _data(tmp_path: Path, seed: int) -> Path:
    """Two weeks of rows over two to four columns of random sizes; one random value of the
    first column moves in the second week (its revenue and orders grow, or its rows)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    sizes = [int(rng.integers(2, 7)) for _ in range(k)]
    moved = int(rng.integers(sizes[0]))
    lift = float(rng.choice([0.5, 2.0, 3.0]))
    names = [f"c{j}" for j in range(k)]
    lines = [",".join(["day", "week", *names, "revenue", "orders", "sessions"])]
    for d in range(DAYS):
        day = START + timedelta(days=d)
        for _ in range(int(rng.integers(40, 90))):
            values = [int(rng.integers(s)) for s in sizes]
            up = d >= 7 and values[0] == moved
            sessions = int(rng.integers(1, 30))
            orders = int(rng.binomial(sessions, 0.3 * (lift if up else 1.0) / 3.0))
            revenue = round(float(rng.gamma(2.0, 20.0)) * (lift if up else 1.0), 2)
            cells = [f"{n}_{v}" for n, v in zip(names, values, strict=True)]
            week = "w1" if d < 7 else "w2"
            lines.append(",".join([day.isoformat(), week, *cells, str(revenue), str(orders),
                                   str(sessions)]))  # fmt: skip
    csv = tmp_path / "sales.csv"
    csv.write_text("\n".join(lines) + "\n")
    db = tmp_path / "sales.duckdb"
    load_files([csv], db)
    return db


def _investigate(run: Run, source: Any) -> None:
    """What an investigation asks: the engine's analysis, the hypotheses' calls, the report's
    per-day numbers, and the gate's re-run of a cited call."""
    e = run.analysis.explanation
    for name, args in planner_calls(run):
        registry.call(run.ctx, name, args)
    charts_from_cells(run, source)
    if e.root_causes:
        gate_from_cells(run, source)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_answer_from_the_cells_is_what_its_source_sql_gives(tmp_path, shape):
    seed, question = SHAPES[shape]
    db = _data(tmp_path, seed)
    args = Request(data=["-"], table="sales", **question).question()
    with Run(db, args) as run, source_beside(run.ctx) as source:
        _investigate(run, source)
        noted = run.ctx.reader.provenance
        cells = run.analysis.cells
        assert cells is not None and noted
        assert any("GROUPING" in p.source_sql.upper() for p in noted)  # the cube at least
        for p in noted:
            assert_same_answer(source, cells, p)
