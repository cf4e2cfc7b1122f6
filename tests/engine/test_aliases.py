"""One segment, one name: rows that answer to several names are named once.

Small event tables where columns are tied: the web app has no version (``app_version = web`` on
exactly the web rows), and ``country`` is the joined ``users.country``. A cause on tied rows is
named with the fewest columns, base-table columns before joined ones, the other names listed as
``aliases``; a tie broken by a handful of stray rows still holds, one broken for real does not.
The evidence gate accepts a finding written under any of the names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sql_tools import ToolContext
from tasks.agent.gate import Gate
from tasks.agent.ledger import Ledger
from tasks.agent.models import Budget, Hypothesis
from tasks.agent.session import Session
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question

VERSIONS = {"ios": ("1.1", "1.2"), "android": ("1.1", "1.2"), "web": ("web",)}
COUNTRIES = ("US", "GB", "DE", "FR")


def _tables(cause: dict[str, str], stray: int = 0, users: int = 2000) -> dict[str, str]:
    """``events`` (a row per user and period) and ``users``; ``cause``'s users order 40% as much
    in the comparison period; ``stray`` web users report app version 1.2 (a broken tie)."""
    rng = np.random.default_rng(11)
    events = ["user_id,period,platform,app_version,country,orders"]
    people = ["user_id,country,plan"]
    strays = 0
    for uid in range(1, users + 1):
        platform = str(rng.choice(["ios", "android", "web"], p=[0.4, 0.4, 0.2]))
        version = str(rng.choice(VERSIONS[platform]))
        if platform == "web" and strays < stray:
            version, strays = "1.2", strays + 1
        country = str(rng.choice(COUNTRIES))
        people.append(f"{uid},{country},{rng.choice(['free', 'pro'])}")
        hit = all({"platform": platform, "country": country}[k] == v for k, v in cause.items())
        for period, factor in (("base", 1.0), ("cmp", 0.4 if hit else 1.0)):
            orders = int(rng.poisson(20 * factor))
            events.append(f"{uid},{period},{platform},{version},{country},{orders}")
    return {"events": "\n".join(events) + "\n", "users": "\n".join(people) + "\n"}


def _analysis(ctx: ToolContext, dimensions: str | None = None) -> Any:
    q = build_question(
        ctx.schema,
        metric="sum(orders)",
        table="events",
        period_column="period",
        baseline="base",
        comparison="cmp",
        dimensions=dimensions,
    )
    return q, analyze(ctx, q)


def _explain(make_db, tables: dict[str, str], dimensions: str | None = None) -> Any:
    with ToolContext(make_db(**tables)) as ctx:
        return _analysis(ctx, dimensions)[1].explanation


def _rows(s: Any) -> tuple[float | None, float | None]:
    return s.baseline, s.comparison


def test_a_cause_on_tied_columns_is_named_once_with_the_fewest_columns(make_db):
    e = _explain(make_db, _tables({"platform": "web"}))
    [cause] = e.root_causes
    assert cause.segment == {"platform": "web"}
    assert cause.aliases == [{"app_version": "web"}, {"platform": "web", "app_version": "web"}]
    assert cause.evidence is not None
    assert cause.evidence.arguments["filters"] == [
        {"column": "platform", "op": "=", "value": "web"}
    ]
    for movers in (e.drivers, e.offsetting):  # no list names the same rows twice
        numbers = [_rows(s) for s in movers]
        assert len(numbers) == len(set(numbers)), [s.segment for s in movers]
        names = [s.segment for s in movers]
        assert not [a for s in movers for a in s.aliases if a in names]


def test_a_joined_copy_of_a_column_gives_way_to_the_base_table_column(make_db):
    # the joined column listed first still loses: base-table columns name a segment first
    e = _explain(make_db, _tables({"country": "DE"}), "users.country,users.plan,country,platform")
    [cause] = e.root_causes
    assert cause.segment == {"country": "DE"}
    assert cause.aliases == [{"users.country": "DE"}, {"users.country": "DE", "country": "DE"}]
    named = [s.segment for s in [*e.drivers, *e.offsetting]]
    assert not [s for s in named if "users.country" in s], named


def test_a_tie_broken_by_a_stray_row_still_holds(make_db):
    # one web user of about 400 reports a version: 0.25% of the web rows
    e = _explain(make_db, _tables({"platform": "web"}, stray=1))
    [cause] = e.root_causes
    assert cause.segment == {"platform": "web"}
    assert {"app_version": "web"} in cause.aliases


def test_a_tie_broken_for_real_is_two_segments(make_db):
    # 30 web users of about 400 (7%) report version 1.2: app_version = web is fewer rows
    e = _explain(make_db, _tables({"platform": "web"}, stray=30))
    [cause] = e.root_causes
    assert {"app_version": "web"} not in cause.aliases
    assert cause.segment in ({"platform": "web"}, {"app_version": "web"})


def test_the_gate_accepts_a_finding_under_any_name_and_keeps_one(make_db):
    db = make_db(**_tables({"platform": "web"}))
    with ToolContext(db) as ctx:
        q, analysis = _analysis(ctx)
        h = Hypothesis(
            id="h1",
            title="The web checkout broke",
            story="Web orders fell.",
            expected="app_version = web falls far more than the versions of the apps.",
            segment={"app_version": "web"},
            category="rate",
            prior=0.5,
            source="model",
        )
        ledger = Ledger()
        gate = Gate(ctx, q, analysis, ledger)
        session = Session(ctx, h, ledger, gate, Budget())
        split = {
            "table": "events",
            "metric": {"agg": "sum", "column": "orders"},
            "period_column": "period",
            "baseline": {"label": "base"},
            "comparison": {"label": "cmp"},
            "group_by": ["app_version"],
        }
        is_error, payload, entry = session.call("metric_compare_periods", split)
        assert not is_error
        row = next(r for r in payload["rows"] if r["app_version"] == "web")
        statuses = []
        for name in ({"app_version": "web"}, {"platform": "web", "app_version": "web"}):
            finding = {
                "segment": name,
                "category": "rate",
                "title": "web orders fell",
                "summary": "Web orders fell by more than half.",
                "evidence": [entry.id],
                "baseline_value": row["baseline"],
                "comparison_value": row["comparison"],
            }
            is_error, out, _ = session.call("write_finding", finding)
            assert not is_error, out
            statuses.append(out["status"])
        assert statuses == ["accepted", "accepted"], [f.critique for f in gate.findings.values()]
        [kept] = gate.findings.values()  # the same rows under two names: one finding, updated
        assert kept.revision == 2
        assert kept.share == pytest.approx(1.0, abs=0.1)
        test = analysis.test({"app_version": "web"})
        assert test is not None and not test.explained


def test_overlapping_root_causes_say_so():
    """Shares above the whole change come with a note naming the root causes that share rows."""
    from tasks.engine.result import Segment
    from tasks.engine.segments import _overlap_notes

    a = Segment(segment={"platform": "ios"}, contribution=-80.0, share=0.8)
    b = Segment(segment={"country": "US"}, contribution=-60.0, share=0.6)
    c = Segment(segment={"platform": "web"}, contribution=-60.0, share=0.6)
    (note,) = _overlap_notes([a, b], -100.0)
    assert "platform = ios and country = US" in note
    assert "add to 140.0% of the total change of -100" in note
    assert _overlap_notes([a, c]) == []  # disjoint: their shares may add up past the change
    assert _overlap_notes([a]) == []


def test_a_segment_renamed_to_its_best_name_keeps_what_was_found_about_it(make_db):
    # a list may meet a segment under a worse name first (which name comes first among equal
    # movers follows the database's row order): the renamed segment is still the same rows
    from tasks.engine.segments import one_name_each

    with ToolContext(make_db(**_tables({"platform": "web"}))) as ctx:
        _, a = _analysis(ctx, "platform,app_version,users.country,country")
        cube, contrib = a.cube, a.contrib
        [cause] = a.explanation.root_causes
        worse = cause.model_copy(
            update={"segment": {"app_version": "web"}, "explained_by_root_causes": True}
        )
        [[renamed]] = one_name_each(cube, contrib, [worse])
    assert renamed.segment == {"platform": "web"}
    assert renamed.explained_by_root_causes is True
