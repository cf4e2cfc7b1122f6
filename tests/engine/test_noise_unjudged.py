"""When the data cannot say what noise is: a few cells (groups), none with days of its own to
measure a spread on, so a cell's move can only be set against the others'. The answer says so,
names no cause, calls nothing significant, and still shows the largest moves as facts, each with
the query that reproduces it (result.json, report.md and the console's lines).

Each case is built here in a temporary folder, with random group names, sizes and moves."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from sql_tools import ToolContext
from sql_tools.registry import SQL_TOOLS
from tasks.engine.explain import explain_change
from tasks.engine.parse import build_question
from tasks.engine.result import Explanation
from tasks.ingest.load import load_files
from tasks.report.charts import _waterfall_caption
from tasks.report.markdown import render
from tasks.report.text import noise_lines


def _names(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    names: set[str] = set()
    while len(names) < n:
        names.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 8))))
    return sorted(names)


def _yearly(rng: random.Random, groups: int, count: bool) -> tuple[str, dict[str, Any]]:
    """Yearly rows over 2000-2010, on January 1st: pre-aggregated sums (one row per group and
    year) or, for a count, that many event rows per group and year. Two groups pull apart
    from the 2007 rows on: one falls, the other rises by a similar amount."""
    names = _names(rng, groups)
    falls, rises = names[0], names[1]
    base = {g: rng.randint(20, 60) if count else rng.randint(10_000, 90_000) for g in names}
    drop = rng.uniform(0.3, 0.6)
    rows = ["date,source,value"]
    for year in range(2000, 2011):
        for g in names:
            v = base[g] * (1 + 0.01 * (year - 2000))
            if year >= 2007 and g == falls:
                v *= 1 - drop
            if year >= 2007 and g == rises:
                v += base[falls] * drop * rng.uniform(0.7, 1.0)
            if count:
                rows += [f"{year}-01-01,{g},1"] * max(1, round(v))
            else:
                rows.append(f"{year}-01-01,{g},{v:.1f}")
    return "\n".join(rows) + "\n", {"falls": falls, "rises": rises, "names": names}


def _explain(folder: Path, text: str, metric: str, baseline: str, comparison: str) -> Explanation:
    csv = folder / "energy.csv"
    csv.write_text(text, encoding="utf-8")
    db = folder / "data.duckdb"
    load_files([csv], db)
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema, metric=metric, table="energy", time_column="date",
            baseline=baseline, comparison=comparison,
        )  # fmt: skip
        e = explain_change(ctx, q)
        # every mover's figures come back from its own metric_compare_periods call
        for m in e.movers:
            assert m.evidence is not None and m.evidence.tool == "metric_compare_periods"
            is_error, out = SQL_TOOLS.dispatch(ctx, "metric_compare_periods", m.evidence.arguments)
            assert not is_error, out
            total = out["total"]
            assert total["baseline"] == pytest.approx(m.baseline)
            assert total["comparison"] == pytest.approx(m.comparison)
    return e


YEARS = ("2002-01-01:2002-12-31", "2007-01-01:2007-12-31")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("count", [False, True], ids=["sums", "counts"])
def test_few_cells_without_days_say_the_noise_cannot_be_judged_and_show_the_movers(
    tmp_path: Path, seed: int, count: bool
) -> None:
    rng = random.Random(seed * 7 + count)
    # (two groups of counted rows are judged by the count's own noise, which needs no
    # spread measured across cells: three or more make the case)
    groups = rng.randint(3, 5) if count else rng.randint(2, 4)
    text, plant = _yearly(rng, groups, count)
    metric = "count(*)" if count else "sum(value)"
    e = _explain(tmp_path, text, metric, *YEARS)

    why = e.change.noise_unjudged
    assert why and f"the noise cannot be judged from {groups} cells" in why, why
    assert ("with one row each" in why) is (not count), why
    assert not e.change.significant and not e.root_causes and e.global_shift is None
    # the largest moves, as facts: the two groups that pulled apart lead, none is called
    # significant, each with its share of the change
    assert {tuple(m.segment.items()) for m in e.movers[:2]} == {
        (("source", plant["falls"]),), (("source", plant["rises"]),)
    }
    for m in e.movers:
        assert m.p_value is None and not m.significant
        assert m.share == pytest.approx(m.contribution / e.change.absolute)

    md = render(e)
    assert "cannot be called significant or not" in md and why in md
    assert "within the normal noise" not in md and "## Root causes" not in md
    section = md.split("## Largest moves", 1)[1]
    for m in e.movers:
        value = m.segment["source"]
        line = next(x for x in section.splitlines() if x.startswith(f"- source = {value} "))
        word = "fell" if m.comparison < m.baseline else "rose"
        own = abs(m.comparison / m.baseline - 1) * 100
        assert re.search(rf" {word} {own:.1f}% \(from ", line), line
        assert "drilldown" in section and '"value": "' + value + '"' in section

    result = e.model_dump(mode="json")
    assert "cannot be judged" in _waterfall_caption(result)
    printed = noise_lines(result)
    assert printed[0].startswith(why) and len(printed) == 1 + len(e.movers)
    assert all(f"source = {m.segment['source']} " in p for m, p in zip(e.movers, printed[1:]))


@pytest.mark.parametrize("seed", range(2))
def test_the_noise_is_judged_where_cells_are_many_or_have_days(tmp_path: Path, seed: int) -> None:
    """The same offsetting movers among enough cells to measure a spread across them, or with
    days of their own in each period, are judged as usual: nothing is said to be unjudged."""
    rng = random.Random(100 + seed)
    text, _ = _yearly(rng, rng.randint(40, 60), count=False)
    (tmp_path / "many").mkdir()
    many = _explain(tmp_path / "many", text, "sum(value)", *YEARS)
    assert many.change.noise_unjudged is None and not many.movers

    names = _names(rng, 3)
    rows = ["date,source,value"]
    for day in range(1, 29):
        for g in names:
            for month in (1, 2):
                v = 1000 * (1 + 0.05 * rng.random())
                if month == 2 and g == names[0]:
                    v *= 0.6
                rows.append(f"2024-{month:02d}-{day:02d},{g},{v:.1f}")
    (tmp_path / "days").mkdir()
    daily = _explain(
        tmp_path / "days", "\n".join(rows) + "\n", "sum(value)",
        "2024-01-01:2024-01-28", "2024-02-01:2024-02-28",
    )  # fmt: skip
    assert daily.change.noise_unjudged is None and not daily.movers
