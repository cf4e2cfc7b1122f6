"""The Finding Gate: a claim becomes a finding only when the data says the same, again.

``write_finding`` is idempotent by (segment, category): the same key updates in place, and a
segment written under another name of the same rows (a tied column such as ``app_version = web``
for ``platform = web``) has the key of the engine's name. Before a finding is accepted the gate

1. checks its evidence: every cited id is a successful call in this investigation's ledger, and
   the segment's values appear in what those calls returned (a value no query showed is not
   evidence);
2. re-runs each cited call and requires the same result (same digest);
3. runs the segment's own query (its metric in each period) and compares the claimed numbers
   with it, within a tolerance;
4. checks the engine's statistics for the segment: share of the change (effect size), share of
   the volume (support) and significance (Bonferroni over the segments searched), and that the
   category agrees with what the data shows (rate, mix, new, gone).

A claim that fails is kept as a dismissed finding with the critique, and the critique goes back
to whoever wrote it.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any, Literal

from pydantic import BaseModel, Field

from sql_tools import (
    MAX_SEGMENT_COLUMNS,
    SqlToolError,
    StrictModel,
    ToolContext,
    ToolInputError,
    short,
)
from tasks import tools as registry
from tasks.agent.ledger import Ledger, capped, same_result
from tasks.agent.models import Category, Finding
from tasks.agent.untrusted import clean
from tasks.engine import cube as cube_mod
from tasks.engine import significance as sig
from tasks.engine.explain import Analysis
from tasks.engine.spec import Question

SegmentValue = str | int | float | bool | None


class WriteFindingInput(StrictModel):
    """Record a finding: one segment's move, the figures you measured for it in each period
    and the ids of the tool calls (q-1, q-2, ...) whose results show them. The gate re-runs
    those calls and the segment's own query, checks your numbers (within 1%), the segment's
    share of the change, its volume and its significance, and answers accepted or dismissed
    with a critique. The same segment and category again updates the finding, also under
    another name of the same rows. Only accepted findings can confirm a hypothesis.
    """

    segment: dict[str, SegmentValue] = Field(
        max_length=MAX_SEGMENT_COLUMNS,
        description="column -> value, e.g. {col_3: ios, col_4: '5.2'}; {} for the whole "
        "population (category global or data_quality).",
        json_schema_extra={"x-live-keys": "column"},
    )
    category: Category = Field(
        description="rate: the segment's own metric moved; mix: its share of the denominator "
        "moved; new / gone: it appeared or disappeared; global: everything moved alike; "
        "data_quality: a data problem, not the business."
    )
    title: str = Field(max_length=200, description="One line, plain words.")
    summary: str = Field(max_length=2000, description="What moved, by how much, and why.")
    evidence: list[str] = Field(
        min_length=1, max_length=10, description="Ids of the tool calls that show it, e.g. q-3."
    )
    baseline_value: float | None = Field(description="The segment's metric in the baseline.")
    comparison_value: float | None = Field(description="The segment's metric in the comparison.")


class ConcludeInput(StrictModel):
    """End the investigation of this hypothesis with a verdict. confirmed needs an accepted
    finding; ruled_out needs the ids of the calls that show the expected pattern is absent;
    inconclusive when the data cannot decide. Call it once, last.
    """

    status: Literal["confirmed", "ruled_out", "inconclusive"]
    confidence: Literal["high", "medium", "low"]
    summary: str = Field(max_length=2000, description="The verdict in two or three sentences.")
    evidence: list[str] = Field(
        default=[], max_length=20, description="Ids of the tool calls the verdict rests on."
    )


class Thresholds(BaseModel):
    """What a finding must show to be accepted."""

    rel_tolerance: float = 0.01
    abs_tolerance: float = 0.005
    min_share: float = Field(default=0.05, description="Of the total change, in either direction.")
    min_volume_share: float = Field(default=0.001, description="Volume share in either period.")
    min_rows: int = 10
    alpha: float = sig.ALPHA


class Gate:
    """Judges ``write_finding`` claims for one investigation and keeps every finding."""

    def __init__(
        self,
        ctx: ToolContext,
        question: Question,
        analysis: Analysis,
        ledger: Ledger,
        thresholds: Thresholds | None = None,
    ) -> None:
        self.ctx, self.q, self.analysis, self.ledger = ctx, question, analysis, ledger
        self.t = thresholds or Thresholds()
        self.findings: dict[str, Finding] = {}
        self._lock = threading.Lock()

    def submit(self, hypothesis_id: str, inp: WriteFindingInput) -> Finding:
        """Judge a claim; store it (accepted or dismissed) under its key and return it.

        Raises ``ToolInputError`` (``unverified_evidence``) when the cited evidence does not
        exist or does not show the segment; the claim is still kept, dismissed.
        """
        segment = {str(k): v for k, v in inp.segment.items()}
        # the same rows under another name (a tied column) are the same finding
        key = finding_key(self.analysis.name_of(segment) or segment, inp.category)
        finding = Finding(
            key=key,
            hypothesis_id=hypothesis_id,
            segment=segment,
            category=inp.category,
            title=clean(inp.title, 200),
            summary=clean(inp.summary, 2000),
            evidence=list(dict.fromkeys(inp.evidence)),
            claimed={"baseline": inp.baseline_value, "comparison": inp.comparison_value},
            status="dismissed",
        )
        unverified = self._unverified(finding)
        if unverified:
            finding.critique = unverified
        else:
            finding.critique = self._judge(finding)
            finding.status = "accepted" if finding.critique is None else "dismissed"
        with self._lock:
            old = self.findings.get(key)
            if old is not None:
                finding.revision = old.revision + 1
            self.findings[key] = finding
        if unverified:
            raise ToolInputError(unverified, code="unverified_evidence")
        return finding

    def accepted(self, hypothesis_id: str | None = None) -> list[Finding]:
        """Accepted findings (of one hypothesis, when given)."""
        return [
            f
            for f in self.findings.values()
            if f.status == "accepted" and hypothesis_id in (None, f.hypothesis_id)
        ]

    def _unverified(self, f: Finding) -> str | None:
        unknown = [e for e in f.evidence if self.ledger.get(e) is None]
        if unknown:
            listed = ", ".join(short(e, 30) for e in unknown[:5])
            return f"unknown evidence id(s) {listed}: cite ids of calls made in this investigation"
        failed = [e for e in f.evidence if self.ledger.get(e).is_error]  # type: ignore[union-attr]
        if failed:
            return f"evidence {', '.join(failed)} returned errors, not results"
        shown = " ".join(
            json.dumps([e.arguments, e.result], default=str)
            for e in (self.ledger.get(i) for i in f.evidence)
            if e is not None
        )
        for col, value in f.segment.items():
            if value is not None and json.dumps(str(value))[1:-1] not in shown:
                return (
                    f"the value {short(value, 40)} of {short(col, 40)} appears in none of the "
                    f"cited results ({', '.join(f.evidence)})"
                )
        return None

    def _judge(self, f: Finding) -> str | None:
        """None when the finding holds, else the critique."""
        for eid in f.evidence:
            entry = self.ledger.get(eid)
            assert entry is not None
            try:
                again = registry.call(self.ctx, entry.tool, entry.arguments).model_dump(mode="json")
            except SqlToolError as exc:
                return f"evidence {eid} no longer runs: {exc.message}"
            if not same_result(capped(again), entry.result):
                return f"evidence {eid} did not reproduce: re-running it gave a different result"
        try:
            sq = cube_mod.segment_query(self.ctx, self.q, f.segment)
            cube_mod.run_segment_query(self.ctx, self.q, sq, f.segment)
        except SqlToolError as exc:
            return f"the segment's query failed: {exc.message}"
        f.sql, f.params, f.formula = sq.sql, _jsonable(sq.params), sq.formula
        f.measured = {"baseline": sq.baseline, "comparison": sq.comparison}
        for which in ("baseline", "comparison"):
            if not self._close(f.claimed[which], f.measured[which]):
                return (
                    f"numbers do not match: claimed {which} {_fmt(f.claimed[which])}, the "
                    f"segment's query gives {_fmt(f.measured[which])}"
                )
        return self._statistics(f)

    def _statistics(self, f: Finding) -> str | None:
        e = self.analysis.explanation
        if f.category == "data_quality":
            return self._data_problem(f)
        if f.category == "global" or not f.segment:
            if e.global_shift is None:
                return "no even shift of the whole population: the move is in segments"
            if e.global_shift.effect == "data_quality":
                return (
                    "no even shift in the business: the even move goes away on the days the "
                    "data fully covers (a data problem)"
                )
            f.contribution, f.share = e.global_shift.contribution, e.global_shift.share
            return None
        test = self.analysis.test(f.segment)
        if test is None:
            searched = ", ".join(e.stats.get("search_dimensions") or e.dimensions)
            return (
                f"the segment is not among those the engine searched (columns {searched}, up "
                f"to {e.stats.get('max_depth')} at a time); its significance cannot be judged"
            )
        f.contribution, f.share, f.p_value = test.contribution, test.share, test.p_value
        if test.baseline_volume + test.comparison_volume < self.t.min_rows:
            return f"too little data: {test.baseline_volume + test.comparison_volume:.0f} rows"
        if test.support < self.t.min_volume_share:
            return f"too small: {test.support:.2%} of the volume"
        if test.share is None or abs(test.share) < self.t.min_share:
            share = "n/a" if test.share is None else f"{test.share:.1%}"
            return f"effect too small: {share} of the change (needs {self.t.min_share:.0%})"
        if not sig.significant(test.p_value, self.t.alpha):
            return (
                f"not significant: p = {test.p_value:.2g} after correcting for the "
                f"{self.analysis.found.n_tested:,} segments searched; the move is within the noise"
            )
        if test.explained:
            named = [", ".join(f"{k}={v}" for k, v in rc.segment.items()) for rc in e.root_causes]
            if e.global_shift is not None:
                named.append("the even shift of everything")
            return (
                f"explained by the root causes: once {'; '.join(named) or 'the named causes'} "
                "are taken into account, what is left of this segment's move is within the noise"
            )
        if any(
            _same(rc.segment, f.segment) and rc.effect == "data_quality" for rc in e.root_causes
        ):
            return (
                f"category {f.category!r} does not fit: the segment's move goes away on the days "
                "its data fully covers (category 'data_quality')"
            )
        if f.category != test.effect:
            return f"category {f.category!r} does not fit: the data shows {test.effect!r}"
        return None

    def _data_problem(self, f: Finding) -> str | None:
        """A data problem holds when the engine puts the segment's move down to the data (a root
        cause, or the even shift for the whole population, with effect data_quality: its move
        goes away on the days the data fully covers, and a check named the defect)."""
        e = self.analysis.explanation
        for s in [*e.root_causes, e.global_shift]:
            if s is not None and s.effect == "data_quality" and _same(s.segment, f.segment):
                f.contribution, f.share = s.contribution, s.share
                return None
        issues = [d for d in e.data_quality if _covers(d.segment, d.column, f.segment)]
        if not issues:
            return "no data-quality check found a problem in this segment"
        kinds = ", ".join(sorted({d.kind.replace("_", " ") for d in issues}))
        return (
            f"no move of this segment is explained by its data: the checks found {kinds}, but "
            "its move does not go away on the days the data fully covers"
        )

    def _close(self, claimed: float | None, measured: float | None) -> bool:
        if claimed is None or measured is None:
            return claimed is None and measured is None
        if not math.isfinite(claimed):
            return False
        return abs(claimed - measured) <= max(
            self.t.rel_tolerance * abs(measured), self.t.abs_tolerance
        )


def finding_key(segment: dict[str, Any], category: str) -> str:
    """The idempotency key: the segment (columns sorted) and the category."""
    return json.dumps(sorted((k, str(v)) for k, v in segment.items())) + "|" + category


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same segment (values compared as text: ``5.2`` from a model names the value 5.2)."""
    return {k: str(v) for k, v in a.items()} == {k: str(v) for k, v in b.items()}


def _covers(issue_segment: dict[str, Any], column: str | None, segment: dict[str, Any]) -> bool:
    if not segment:
        return True
    if issue_segment:
        return {k: str(v) for k, v in issue_segment.items()} == {
            k: str(v) for k, v in segment.items()
        }
    return column is not None and column in segment


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:,.6g}"


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    """A finding's parameters: JSON scalars as they are, anything else as its text (a timestamp
    as ``2024-03-04 00:00:00``, where ``Evidence.params`` holds ``2024-03-04T00:00:00``)."""
    return {
        k: v if isinstance(v, int | float | str | bool | None) else str(v)
        for k, v in params.items()
    }
