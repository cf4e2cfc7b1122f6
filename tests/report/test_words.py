"""Every sentence about a segment's change says one figure with what it is of: the segment's own
change (``fell 96.0% (from 500 to 20)``), or a share with its whole named (``80.3% of the total
change of -2,750``). The root-cause table agrees with the hypotheses' verdicts, a ruled-out
segment is said once, and a "folded into" sentence is short and hides no large move.

The explanations are built here, with random names and figures."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from sql_tools.output import Quantity
from sql_tools.words import own_change, share_of
from tasks.engine.result import Change, Explanation, MetricInfo, PeriodValue, Segment
from tasks.report.markdown import render
from tasks.report.model import MAX_FOLDED, build


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 7)))


def _explanation(
    before: float, after: float, causes: list[Segment], **kw: Any
) -> Explanation:
    return Explanation(
        metric=MetricInfo(expression="sum(x)", table="t", kind="additive"),
        baseline=PeriodValue(label="a", value=before),
        comparison=PeriodValue(label="b", value=after),
        change=Change(
            absolute=after - before, relative=(after - before) / before, significant=True,
            p_value=1e-9, method="test",
        ),  # fmt: skip
        root_causes=causes,
        **kw,
    )


def _seg(segment: dict[str, Any], before: float, after: float, total: float, **kw: Any) -> Segment:
    c = after - before
    return Segment(
        segment=segment, baseline=before, comparison=after, contribution=c, share=c / total,
        p_value=1e-9, significant=True, **kw,
    )  # fmt: skip


def _percents_after(text: str, name: str) -> list[str]:
    """The first percent after each mention of ``name`` in ``text`` (with what follows it)."""
    return [m.group(1) for m in re.finditer(re.escape(name) + r"[^%]*?(-?[\d,.]+%[^;.]*)", text)]


@pytest.mark.parametrize("seed", range(4))
def test_offsetting_moves_in_the_headline_are_each_segments_own_change(seed: int) -> None:
    """A net change hiding large opposite moves: each move is worded as the segment's own change
    (a fall of 96%, not its -24% part of the total), with its values."""
    rng = random.Random(seed)
    col, down, up = _word(rng), _word(rng), _word(rng) + "x"
    b_down = rng.randint(300, 900)
    a_down = round(b_down * rng.uniform(0.02, 0.3))
    b_up = rng.randint(300, 900)
    a_up = b_up + (b_down - a_down) + rng.randint(-20, 20)
    rest = rng.randint(1000, 3000)
    before, after = b_down + b_up + rest, a_down + a_up + rest
    total = after - before or 1
    causes = [
        _seg({col: down}, b_down, a_down, total),
        _seg({col: up}, b_up, a_up, total),
    ]
    md = render(_explanation(before, after, causes))
    head = next(x for x in md.splitlines() if "hides larger moves" in x)
    values = Quantity.of([before, after, b_down, a_down, b_up, a_up])
    for s in causes:
        said = own_change(s.baseline, s.comparison, values)
        assert f"{col} = {s.segment[col]} {said}" in head, head
        own = abs(s.comparison / s.baseline - 1) * 100
        assert _percents_after(head, f"{col} = {s.segment[col]}")[0].startswith(f"{own:.1f}%")
    # the share of the total it once showed as the segment's change is gone
    part = abs(causes[0].contribution / before) * 100
    assert f"{part:.1f}% fall" not in head


def test_own_change_and_share_say_their_figure_and_its_whole() -> None:
    q = Quantity(0)
    assert own_change(50, 2, q) == "fell 96.0% (from 50 to 2)"
    assert own_change(1000, 2479, q) == "rose 147.9% (from 1,000 to 2,479)"
    assert own_change(0, 57, q) == "rose from 0 to 57"
    assert own_change(50, 50, q) == "did not move (50 in both periods)"
    assert share_of(-2207, -2750, q) == "80.3% of the total change of -2,750"
    assert share_of(-2207, -2750, q, units=True) == "-2,207, 80.3% of the total change of -2,750"
    assert share_of(12, 0, q) == "+12 against the total change of 0"


@pytest.mark.parametrize("seed", range(3))
def test_a_root_cause_whose_hypothesis_was_ruled_out_is_marked_and_said_once(seed: int) -> None:
    rng = random.Random(10 + seed)
    col = _word(rng)
    kept, out, other = _word(rng), _word(rng) + "y", _word(rng) + "z"
    before, after = 10_000.0, 10_000.0 - rng.randint(2000, 4000)
    total = after - before
    a = _seg({col: kept}, 3000, 3000 + total * 0.6, total)
    b = _seg({col: out}, 2000, 2000 + total * 0.3, total)
    critique = f"explained by {col} = {kept}: what is left is within the noise"
    hypotheses = [
        {"id": "h1", "title": f"{col} = {kept} changed", "segment": {col: kept},
         "status": "confirmed", "summary": "accepted"},
        {"id": "h2", "title": f"{col} = {out} changed", "segment": {col: out},
         "status": "ruled_out", "summary": f"{col} = {out}: {critique}"},
        {"id": "h3", "title": f"{col} = {other} changed", "segment": {col: other},
         "status": "ruled_out", "summary": f"{col} = {other}: {critique}"},
    ]  # fmt: skip
    findings = [
        {"hypothesis_id": h["id"], "segment": h["segment"], "category": "rate",
         "status": "accepted" if h["status"] == "confirmed" else "dismissed",
         "critique": None if h["status"] == "confirmed" else critique}
        for h in hypotheses
    ]  # fmt: skip
    e = _explanation(before, after, [a, b], hypotheses=hypotheses, findings=findings)
    r = build(e)
    rows = {row.name.plain: row for row in r.causes}
    assert "ruled out" in rows[f"{col} = {out}"].note
    assert rows[f"{col} = {kept}"].note == ""
    md = render(e)
    table = [x for x in md.splitlines() if x.startswith(f"| {col} = {out}")]
    assert table and "ruled out" in table[0]
    # the ruled-out segment's critique is said under its hypothesis, not again as a dismissal
    assert not [d for d in r.dismissed if d[0].plain == f"{col} = {other}"]
    assert md.count(f"{col} = {other}: {critique}") == 1


@pytest.mark.parametrize("seed", range(3))
def test_the_folded_sentence_is_short_and_leads_with_the_largest(seed: int) -> None:
    rng = random.Random(20 + seed)
    col, other = _word(rng), _word(rng) + "q"
    before, after = 50_000.0, 50_000.0 - rng.randint(3000, 6000)
    total = after - before
    cause = _seg({col: "x"}, 8000, 8000 + total * 0.8, total)
    n = rng.randint(MAX_FOLDED + 1, MAX_FOLDED + 5)
    sizes = [rng.uniform(0.01, 0.2) for _ in range(n)]
    sizes[rng.randrange(n)] = 0.75  # almost as large as the cause
    drivers = [
        _seg({other: f"v{i}"}, 5000, 5000 + total * s, total, explained_by_root_causes=True)
        for i, s in enumerate(sizes)
    ]
    e = _explanation(before, after, [cause], drivers=drivers)
    r = build(e)
    assert len(r.folded) == MAX_FOLDED
    shown = [d for d in sorted(drivers, key=lambda d: d.contribution)][:MAX_FOLDED]
    assert [m.name.plain for m in r.folded] == [f"{other} = {d.segment[other]}" for d in shown]
    left = n - MAX_FOLDED
    assert r.folded_more.startswith(f"{left} smaller one")
    md = render(e)
    line = next(x for x in md.splitlines() if x.startswith("Folded into the root causes"))
    assert "each with its part of the total change of " in line
    big = shown[0]
    assert f"{other} = {big.segment[other]} (" in line and f"{big.share * 100:.1f}%)" in line
