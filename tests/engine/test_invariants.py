"""The answer does not depend on how the question is asked.

On randomized product-shaped draws (``benchmarks.families``): swapping baseline and comparison
names the same segments with the opposite sign; reordering rows, renaming and reordering columns,
adding an unrelated random column, and multiplying the metric by a constant name the same
segments.
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

import pytest

from benchmarks.families import draw
from sql_tools import ToolContext
from tasks.engine.explain import explain_change
from tasks.engine.parse import build_question
from tasks.ingest.load import load_files

CASES = [("k_of_n", 3), ("two_plus_one", 5), ("overlapping", 2)]


def _answer(folder: Path, question: dict, **changes) -> tuple[set, dict, bool]:
    db = folder / "data.duckdb"
    load_files([folder], db)
    with ToolContext(db) as ctx:
        q = build_question(ctx.schema, **{**question, **changes})
        ex = explain_change(ctx, q)
    names = {frozenset((k, str(v)) for k, v in c.segment.items()) for c in ex.root_causes}
    signs = {
        frozenset((k, str(v)) for k, v in c.segment.items()): c.contribution > 0
        for c in ex.root_causes
    }
    return names, signs, ex.global_shift is not None


def _rewrite(folder: Path, files: dict[str, str], edit) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        rows = list(csv.reader(io.StringIO(text)))
        rows = edit(name, rows)
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        (folder / name).write_text(buf.getvalue(), encoding="utf-8")


def _rename(segments: set, mapping: dict[str, str]) -> set:
    def col(c: str) -> str:
        table, _, name = c.rpartition(".")
        return f"{table}.{mapping.get(name, name)}" if table else mapping.get(name, name)

    return {frozenset((col(k), v) for k, v in s) for s in segments}


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def case(request, tmp_path_factory):
    family, seed = request.param
    d = draw(family, seed)
    base = tmp_path_factory.mktemp(f"{family}{seed}")
    d.write(base / "as-drawn")
    names, signs, even = _answer(base / "as-drawn", d.question)
    assert names, f"{family} seed {seed}: the draw names no segment, nothing to compare"
    return d, base, names, signs, even


def test_swapping_the_periods_names_the_same_segments_with_the_opposite_sign(case):
    d, base, names, signs, even = case
    q = {**d.question, "baseline": d.question["comparison"], "comparison": d.question["baseline"]}
    got, got_signs, got_even = _answer(base / "as-drawn", q)
    assert got == names
    assert all(got_signs[s] != signs[s] for s in names)
    assert got_even == even


def test_reordering_rows_and_columns_changes_nothing(case):
    d, base, names, _, even = case
    rng = random.Random(7)

    def edit(name, rows):
        header, body = rows[0], rows[1:]
        rng.shuffle(body)
        order = list(range(len(header)))
        rng.shuffle(order)
        return [[r[i] for i in order] for r in [header, *body]]

    _rewrite(base / "shuffled", d.files, edit)
    got, _, got_even = _answer(base / "shuffled", d.question)
    assert (got, got_even) == (names, even)


def test_renaming_columns_and_adding_an_unrelated_one_changes_nothing(case):
    d, base, names, _, even = case
    keep = {"date", "user_id", "sessions", "purchases", "revenue"}
    rng = random.Random(11)

    def edit(name, rows):
        header = [h if h in keep else f"x_{h}" for h in rows[0]]
        body = rows[1:]
        if name.startswith("events"):
            header.append("x_noise")
            body = [[*r, rng.choice(["n1", "n2", "n3"])] for r in body]
        return [header, *body]

    _rewrite(base / "renamed", d.files, edit)
    dims = d.question.get("dimensions")
    extra = {"dimensions": [f"x_{c}" for c in dims]} if dims else {}
    got, _, got_even = _answer(base / "renamed", d.question, **extra)
    mapping = {h: f"x_{h}" for h in ("platform", "app_version", "country", "device")}
    mapping |= {h: f"x_{h}" for h in ("channel", "plan", "age_group")}
    assert (got, got_even) == (_rename(names, mapping), even)


def test_scaling_the_metric_changes_nothing(case):
    d, base, names, _, even = case

    def edit(name, rows):
        if not name.startswith("events"):
            return rows
        header = rows[0]
        cols = [header.index(c) for c in ("revenue",) if c in header]
        return [header] + [
            [f"{float(v) * 37.5:.2f}" if i in cols else v for i, v in enumerate(r)]
            for r in rows[1:]
        ]

    if "revenue" not in d.question["metric"]:
        pytest.skip("the draw's metric is a count; scaling applies to revenue")
    _rewrite(base / "scaled", d.files, edit)
    got, _, got_even = _answer(base / "scaled", d.question)
    assert (got, got_even) == (names, even)
