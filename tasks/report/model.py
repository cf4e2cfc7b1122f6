"""The report as one typed model, computed once from the engine's explanation.

report.md, report.html and the run's markdown artifact are renderings of this model (see
:mod:`tasks.report.render`), so they cannot tell different stories. The model decides the story:
which segments are causes, which are folded into them, what the rest of the change is, one
number format per quantity, and how to say a small net change that hides large opposite moves.

Text from the data or a model is kept here as plain text (one line, capped, hidden characters
shown as escapes); the templates escape it for their format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sql_tools.output import (
    Figures,
    Quantity,
    dumps,
    gross_movement,
    number,
    percent,
    printable_line,
    signed,
)
from sql_tools.output import finite as _finite
from tasks.agent.ledger import aggregate_text, flat_expression
from tasks.engine.result import Explanation, Segment, segment_key
from tasks.report.command import tool_command
from tasks.report.text import (
    data_first,
    gross_text,
    other_movers,
    own_change,
    reported_name,
    share_of,
    share_of_gross,
    short_aliases,
    whole_text,
)

STATUS = {"confirmed": "Confirmed", "ruled_out": "Ruled out", "inconclusive": "Inconclusive"}


def text(value: Any, limit: int = 120) -> str:
    """Data or model text, inert in any format: one line, capped, hidden characters as escapes."""
    return printable_line("" if value is None else value, limit)


def p_text(x: Any) -> str:
    return "n/a" if not _finite(x) else f"{x:.2g}"


@dataclass(frozen=True)
class Name:
    """A segment's name: ``(column, value)`` pairs (empty: everything) and its other names."""

    pairs: tuple[tuple[str, str], ...]
    also: tuple[Name, ...] = ()

    @classmethod
    def of(cls, seg: Mapping[str, Any] | None, aliases: Sequence[dict[str, Any]] = ()) -> Name:
        seg = dict(seg or {})
        also = tuple(cls.of(a) for a in short_aliases(seg, aliases)) if seg else ()
        return cls(tuple((text(k), text(v)) for k, v in seg.items()), also)

    @property
    def plain(self) -> str:
        return ", ".join(f"{k} = {v}" for k, v in self.pairs) or "everything"


@dataclass(frozen=True)
class Row:
    """One segment in a table: numbers already in the report's formats."""

    name: Name
    before: str
    after: str
    contribution: str
    share: str
    effect: str
    p: str
    note: str = ""
    note_name: Name | None = None


@dataclass(frozen=True)
class Mover:
    """A segment named in a sentence: its own move (``fell 96.0% (from 50 to 2)``, empty for an
    even shift of everything), its contribution, and that as a share of a named whole."""

    name: Name
    contribution: str
    moved: str = ""
    share: str = ""
    check: Check | None = None


@dataclass(frozen=True)
class EvidenceLine:
    """One tool call a hypothesis rests on; ``caveat`` says when its figures are not the
    metric's own (a ratio's numerator)."""

    id: str
    tool: str
    summary: str
    sql: str = ""
    params: str = ""
    caveat: str = ""


@dataclass(frozen=True)
class Hypothesis:
    """A hypothesis with its verdict and the tool calls behind it."""

    status: str
    status_text: str
    title: str
    confidence: str
    summary: str
    cites: tuple[str, ...]
    evidence: tuple[EvidenceLine, ...]
    cites_other_data: bool = False
    """Every past investigation it cites read a different dataset: not evidence about this one."""

    @property
    def queries(self) -> tuple[EvidenceLine, ...]:
        return tuple(e for e in self.evidence if e.sql)


@dataclass(frozen=True)
class Check:
    """A way to re-run a root cause: a ``drilldown tool`` command or, when the tool cannot
    compute this metric, the SQL that computed it."""

    name: Name
    command: str = ""
    sql: str = ""
    params: str = ""


@dataclass(frozen=True)
class Similar:
    """A past investigation like this one; ``other_data``: of a different dataset."""

    date: str
    other_data: bool
    metric: str
    periods: str
    causes: tuple[str, ...]
    score: str
    run_id: str


@dataclass
class Report:
    """Everything a reader sees, in reading order."""

    name: str
    table: str
    filters: str
    before: str
    before_label: str
    after: str
    after_label: str
    change: str
    relative: str
    direction: str
    significant: bool
    p: str
    method: str
    noise_unjudged: str = ""
    movers: list[Mover] = field(default_factory=list)
    data_first: str = ""
    data_first_notes: list[str] = field(default_factory=list)
    hides: str = ""
    hides_movers: list[Mover] = field(default_factory=list)
    data_quality: list[tuple[str, str, str]] = field(default_factory=list)
    share_head: str = "share of change"
    causes: list[Row] = field(default_factory=list)
    together: str = ""
    cause_notes: list[str] = field(default_factory=list)
    folded: list[Mover] = field(default_factory=list)
    folded_more: str = ""
    folded_of: str = ""
    rest: str = ""
    shift: str = ""
    shift_why: str = ""
    against: list[Row] = field(default_factory=list)
    others: list[Row] = field(default_factory=list)
    agent: str = ""
    hypotheses: list[Hypothesis] = field(default_factory=list)
    findings: list[Row] = field(default_factory=list)
    dismissed: list[tuple[Name, str, str]] = field(default_factory=list)
    usage: str = ""
    similar: list[Similar] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    searched: str = ""
    search_details: str = ""
    notes: list[str] = field(default_factory=list)


# --- building ------------------------------------------------------------------------------


def build(e: Explanation, db: str | None = None) -> Report:
    """The report model of ``e`` (``db``: the database named in the re-run commands)."""
    q = _Quantities.of(e)
    causes = sorted(e.root_causes, key=lambda s: -abs(s.contribution)) if q.gross else e.root_causes
    r = Report(
        name=text(e.metric.name or e.metric.expression),
        table=text(e.metric.table),
        filters=filters_text(e.metric.filters),
        before=q.value(e.baseline.value),
        before_label=text(e.baseline.label),
        after=q.value(e.comparison.value),
        after_label=text(e.comparison.label),
        change=signed(e.change.absolute, q.contribution),
        relative=percent(e.change.relative),
        direction=_direction(e.change.absolute),
        significant=e.change.significant,
        p=p_text(e.change.p_value),
        method=text(e.change.method, 400),
        noise_unjudged=text(e.change.noise_unjudged or "", 600),
    )
    first = data_first(e.model_dump(mode="json", include={"change", "root_causes", "global_shift"}))
    if first:
        r.data_first, r.data_first_notes = text(first[0], 400), [text(n, 600) for n in first[1:]]
    r.data_quality = [
        (d.kind.replace("_", " "), d.severity, text(d.message, 400)) for d in e.data_quality
    ]
    if q.gross:
        r.share_head = "share of all movement"
        r.hides, r.hides_movers = _hides(e, causes, q)
    if e.change.significant:
        r.causes = [q.row(s, *_verdict(e, s)) for s in causes]
        r.together = _together(e, q)
        r.cause_notes = [
            text(s.data_quality.message, 600)
            for s in causes
            if s.data_quality is not None and s.effect != "data_quality"
        ] + _ruled_out_notes(e, causes)
        r.rest = _rest(e, q)
        if e.global_shift is not None:
            r.shift, r.shift_why = _shift(e.global_shift, q)
    _movers(r, e, q)
    r.movers = [_mover(s, q, _whole(e, e.movers), db) for s in e.movers]
    _investigation(r, e, q)
    r.checks = _checks(e, db)
    r.searched, r.search_details = _searched(e)
    r.notes = [text(n, 400) for n in e.notes]
    return r


@dataclass(frozen=True)
class _Quantities:
    """One number format per quantity: the metric's values, and its changes."""

    values: int
    contribution: int
    net: float | None
    gross: float | None
    """Sum of the causes' absolute contributions when they hide opposite moves, else None."""

    @classmethod
    def of(cls, e: Explanation) -> _Quantities:
        keys = {"baseline", "comparison", "change", "root_causes", "drivers", "offsetting"}
        f = Figures.of(e.model_dump(mode="json", include={*keys, "global_shift"}))
        return cls(f.values.places, f.changes.places, f.net, f.gross)

    def value(self, x: Any) -> str:
        return number(x, self.values)

    def change(self, x: Any) -> str:
        return signed(x, self.contribution)

    def of_total(self, part: Any, gross: float | None = None, units: bool = False) -> str:
        """``part`` as a share with its whole named: of the total change, or (in units too) of
        the movement in either direction when opposite moves hide in the net (``gross``, else
        the causes')."""
        gross = gross if gross is not None else self.gross
        changes = Quantity(self.contribution)
        if gross:
            return share_of_gross(part, gross, self.net, changes)
        return share_of(part, self.net, changes, units=units)

    def whole(self) -> str:
        """What :meth:`part` is a share of, its figure said."""
        changes = Quantity(self.contribution)
        return (
            gross_text(self.gross, self.net, changes)
            if self.gross
            else whole_text(self.net, changes)
        )

    def part(self, part: Any) -> str:
        """``part`` as a percent of :meth:`whole` (said once beside a list of such parts)."""
        whole = self.gross or self.net
        return percent(part / whole, sign=False) if _finite(part) and whole else "n/a"

    def moved(self, s: Segment) -> str:
        """A segment's own move in words (empty for an even shift: it has no values)."""
        return own_change(s.baseline, s.comparison, Quantity(self.values)) if s.segment else ""

    def share(self, s: Segment) -> str:
        """Of the net change, or of the gross movement when opposite moves hide in the net."""
        if self.gross:
            return percent(s.contribution / self.gross, sign=True)
        return percent(s.share, sign=False)

    def row(self, s: Segment, note: str = "", note_name: Name | None = None) -> Row:
        effect = s.effect
        if s.rate is not None and s.mix is not None:
            d = self.contribution
            effect += f" (rate {signed(s.rate, d)}, mix {signed(s.mix, d)})"
        return Row(
            Name.of(s.segment, s.aliases),
            self.value(s.baseline),
            self.value(s.comparison),
            self.change(s.contribution),
            self.share(s),
            effect,
            p_text(s.p_value),
            note,
            note_name,
        )


def _movements(e: Explanation) -> list[Segment]:
    """The named moves: the root causes and an even shift across all the data."""
    moves = [*e.root_causes, *([e.global_shift] if e.global_shift is not None else [])]
    return [s for s in moves if _finite(s.contribution)]


def filters_text(filters: Sequence[Mapping[str, Any]]) -> str:
    """The question's filters as asked: ``country != IN; platform in (ios, web)``."""
    parts = []
    for f in filters:
        value = f.get("value")
        if isinstance(value, list | tuple):
            value = "(" + ", ".join(str(v) for v in value) + ")"
        parts.append(f"{f.get('column')} {f.get('op', '=')} {value}")
    return text("; ".join(parts), 400)


def _direction(x: Any) -> str:
    if not _finite(x) or x == 0:
        return ""
    return "down" if x < 0 else "up"


def _hides(e: Explanation, causes: Sequence[Segment], q: _Quantities) -> tuple[str, list[Mover]]:
    """The headline's warning: the net change hides larger moves that cancel out."""
    movers = [
        Mover(Name.of(s.segment), q.change(s.contribution), q.moved(s))
        for s in sorted(_movements(e), key=lambda s: -abs(s.contribution))[:3]
    ]
    return f"net {percent(e.change.relative)}", movers


def _together(e: Explanation, q: _Quantities) -> str:
    """What the causes add up to, said so it cannot read as more than all or less than none."""
    total = sum(s.contribution for s in e.root_causes)
    if not e.root_causes:
        return ""
    if q.gross:
        return (
            f"The named moves pull in opposite directions: {number(q.gross, q.contribution)} of "
            f"movement in all for a net change of {q.change(q.net)}, so shares below are of "
            "that gross movement."
        )
    share = e.explained_share
    if _finite(share) and 0 <= share <= 1:
        return f"Together they account for {q.of_total(total)}."
    return f"Together they move it by {q.change(total)}, against a net change of {q.change(q.net)}."


def _rest_value(e: Explanation) -> float | None:
    if not e.root_causes or not _finite(e.change.absolute):
        return None
    return float(e.change.absolute) - sum(s.contribution for s in e.root_causes)


def _rest(e: Explanation, q: _Quantities) -> str:
    """The waterfall's "Everything else" in words."""
    rest = _rest_value(e)
    if rest is None:
        return ""
    share = f" ({q.of_total(rest)})" if q.net and not q.gross else ""
    where = (
        "an even shift across all the data (below) and many small moves"
        if e.global_shift is not None
        else "many segments, each too small to be named on its own"
    )
    return f"Everything else: {q.change(rest)}{share}, spread over {where}."


def _shift(g: Segment, q: _Quantities) -> tuple[str, str]:
    why = "every segment moved by about the same factor"
    if g.data_quality is not None:
        why = text(g.data_quality.message.rstrip("."), 600)
    elif g.effect == "data_quality":
        why = "it matches the data-quality problems above"
    if q.gross:
        return q.of_total(g.contribution), why
    return f"{q.change(g.contribution)} ({q.of_total(g.contribution)})", why


def _movers(r: Report, e: Explanation, q: _Quantities) -> None:
    """Segments beside the causes: those inside or above a cause are the cause seen again
    (left out); those the causes explain are folded into one sentence; the rest are tables."""
    causes = [c.model_dump() for c in e.root_causes]
    seen: set[str] = set()
    folded: list[float] = []
    for key, rows, limit in (("against", e.offsetting, 5), ("others", e.drivers, 10)):
        dumped = [s.model_dump() for s in rows]
        by_id = {id(d): s for d, s in zip(dumped, rows, strict=True)}
        shown: list[Row] = []
        for d, rel, seg in other_movers(dumped, causes):
            s = by_id[id(d)]
            name = Name.of(s.segment)
            if rel == "contains" or name.plain in seen:
                continue
            seen.add(name.plain)
            if rel == "explained":
                r.folded.append(Mover(name, q.change(s.contribution), share=q.part(s.contribution)))
                folded.append(s.contribution)
            elif len(shown) < limit:
                note = "part of root cause" if rel == "part" else ""
                shown.append(q.row(s, note, Name.of(seg) if rel == "part" else None))
        setattr(r, key, shown)
    r.folded_of = q.whole()
    order = sorted(range(len(folded)), key=lambda k: -abs(folded[k]))
    r.folded = [r.folded[k] for k in order[:MAX_FOLDED]]
    rest = [folded[k] for k in order[MAX_FOLDED:]]
    if rest:
        r.folded_more = (
            f"{len(rest)} smaller one{'' if len(rest) == 1 else 's'}, none beyond "
            f"{number(max(abs(c) for c in rest), q.contribution)} in either direction"
        )


MAX_FOLDED = 3
"""Segments a "folded into the root causes" sentence names, largest first; the rest are counted
with the largest of their moves, so the sentence stays short and hides no large move."""


def _investigation(r: Report, e: Explanation, q: _Quantities) -> None:
    """Hypotheses, the findings not already shown as root causes, and the gate's dismissals
    of anything but a root cause."""
    agent = e.stats.get("agent") or {}
    r.agent = "the offline planner" if agent.get("mode") == "offline" else text(agent.get("model"))
    numerator = _numerator(e)
    metric = text(e.metric.expression)
    other = {str(p.get("run_id")) for p in e.similar_investigations if p.get("same_data") is False}
    grain = text(e.metric.grain or "")
    r.hypotheses = [_hypothesis(h, metric, numerator, other, grain) for h in e.hypotheses]
    reported = [s.model_dump() for s in [*e.root_causes, *e.drivers, *e.offsetting]]
    causes = [{"segment": c.segment, "aliases": c.aliases} for c in e.root_causes]
    ruled_out = {h.get("id") for h in e.hypotheses if h.get("status") == "ruled_out"}
    for f in e.findings:
        written = f.get("segment") or {}
        if _names_cause(written, causes):
            continue
        if f.get("status") != "accepted":
            if f.get("hypothesis_id") in ruled_out:
                continue  # said under Hypotheses, as ruled out, with the same critique
            critique = text(f.get("critique"), 400)
            r.dismissed.append((Name.of(written), text(f.get("category")), critique))
            continue
        m = f.get("measured") or {}
        name = reported_name(written, reported)
        r.findings.append(
            Row(
                Name.of(name),
                q.value(m.get("baseline")),
                q.value(m.get("comparison")),
                "",
                _finding_share(f, q),
                text(f.get("category")),
                p_text(f.get("p_value")),
                "written as" if name != written else "",
                Name.of(written) if name != written else None,
            )
        )
    usage = agent.get("usage") or {}
    if agent.get("mode") == "claude":
        r.usage = (
            f"Model use: {int(usage.get('requests', 0))} requests, "
            f"{int(usage.get('input_tokens', 0)):,} input and "
            f"{int(usage.get('output_tokens', 0)):,} output tokens, about "
            f"${float(usage.get('cost_usd', 0.0)):.2f}."
        )
    r.similar = [
        Similar(
            text(p.get("date")),
            p.get("same_data") is False,
            text(p.get("metric")),
            text(p.get("periods")),
            tuple(text(c) for c in p.get("root_causes") or []),
            f"{p['score']:.2f}" if _finite(p.get("score")) else "n/a",
            text(p.get("run_id")),
        )
        for p in e.similar_investigations
    ]


def _finding_share(f: Mapping[str, Any], q: _Quantities) -> str:
    """A finding's share as the segment tables say it: of the gross movement when opposite
    moves hide in the net change (a share of the net would read -1,747%)."""
    if q.gross:
        c = f.get("contribution")
        return percent(c / q.gross) if _finite(c) else "n/a"
    return percent(f.get("share"), sign=False)


def _names_cause(segment: dict[str, Any], causes: Sequence[Mapping[str, Any]]) -> bool:
    return (
        bool(causes)
        and reported_name(segment, causes) != segment
        or any(c["segment"] == segment for c in causes)
    )


def _numerator(e: Explanation) -> str:
    """For a ratio metric, its numerator as written (``sum(revenue)``); else empty."""
    if e.metric.kind != "ratio":
        return ""
    return text(e.metric.expression.split("/", 1)[0].strip())


def _single_aggregate(arguments: Mapping[str, Any], numerator: str = "") -> bool:
    """True when a tool call computed one aggregate (``numerator`` given: that one)."""
    written = aggregate_text(dict(arguments))
    return written is not None and (not numerator or written == flat_expression(numerator))


def _caveat(arguments: Mapping[str, Any], metric: str, numerator: str, grain: str = "") -> str:
    """Whose figures an evidence line quotes when they are not the metric's own: a ratio's
    numerator, the rows counted (the data-quality check's rows per day), or a metric asked per
    ``grain`` (a day's average) computed over each whole period."""
    if numerator and _single_aggregate(arguments, numerator):
        return f"figures of {numerator}, the ratio's numerator, not of the ratio"
    written = aggregate_text(dict(arguments))
    if grain and written == flat_expression(metric) and not arguments.get("grain"):
        return f"figures of {metric} over each whole period, not its average per {grain}"
    if written == "count(*)" and written != flat_expression(metric):
        return f"figures are counts of rows, not {metric}"
    return ""


def _hypothesis(
    h: Mapping[str, Any], metric: str, numerator: str, other_data: set[str], grain: str = ""
) -> Hypothesis:
    status = h.get("status") if h.get("status") in STATUS else "inconclusive"
    lines = []
    for ev in h.get("evidence") or []:
        caveat = _caveat(ev.get("arguments") or {}, metric, numerator, grain)
        lines.append(
            EvidenceLine(
                text(ev.get("id")),
                text(ev.get("tool")),
                text((ev.get("result") or {}).get("summary"), 200),
                str(ev.get("sql") or ""),
                dumps(ev.get("params") or {}) if ev.get("sql") else "",
                caveat,
            )
        )
    return Hypothesis(
        str(status),
        STATUS[str(status)],
        text(h.get("title"), 200),
        text(h.get("confidence")),
        text(h.get("summary"), 1000),
        tuple(text(c) for c in h.get("cites") or []),
        tuple(lines),
        bool(h.get("cites")) and all(str(c) in other_data for c in h.get("cites") or []),
    )


def _checks(e: Explanation, db: str | None) -> list[Check]:
    """A re-run per root cause: the tool command, or for a ratio metric whose tool call computed
    only one aggregate, the accepted finding's SQL (numerator and denominator)."""
    out = []
    for s in e.root_causes:
        if s.evidence is None:
            continue
        args = s.evidence.arguments
        name = Name.of(s.segment)
        if e.metric.kind == "ratio" and _single_aggregate(args):
            f = next(
                (
                    f
                    for f in e.findings
                    if f.get("sql")
                    and reported_name(f.get("segment") or {}, [s.model_dump()]) == s.segment
                ),
                None,
            )
            if f is not None:
                out.append(Check(name, sql=str(f["sql"]), params=dumps(f.get("params") or {})))
            continue
        out.append(_check(s, db))
    return out


def _check(s: Segment, db: str | None) -> Check:
    """The ``drilldown tool`` command that shows segment ``s`` (its evidence's tool call)."""
    assert s.evidence is not None
    arguments = dumps(s.evidence.arguments)
    return Check(Name.of(s.segment), command=tool_command(s.evidence.tool, db, arguments))


def _whole(e: Explanation, segments: Sequence[Segment]) -> float | None:
    """The movement in either direction when ``segments`` pull apart in a small net change
    (their shares are then of it), else None (shares of the total change)."""
    return gross_movement(e.change.absolute, [s.contribution for s in segments])


def _mover(s: Segment, q: _Quantities, gross: float | None, db: str | None) -> Mover:
    """One of the largest moves, as a fact: its own move, its part of the change and the
    command that shows it."""
    check = _check(s, db) if s.evidence is not None else None
    share = q.of_total(s.contribution, gross or 0.0, units=True)
    return Mover(Name.of(s.segment, s.aliases), q.change(s.contribution), q.moved(s), share, check)


def _hypothesis_of(e: Explanation, s: Segment) -> Mapping[str, Any] | None:
    """The hypothesis about root cause ``s`` (under any of its names), if one was investigated."""
    names = {segment_key(n) for n in (s.segment, *s.aliases)}
    return next((h for h in e.hypotheses if segment_key(h.get("segment") or {}) in names), None)


def _verdict(e: Explanation, s: Segment) -> tuple[str, Name | None]:
    """A root cause's table note when its own hypothesis was ruled out."""
    h = _hypothesis_of(e, s)
    if h is not None and h.get("status") == "ruled_out":
        return "its hypothesis was ruled out (below): not confirmed as a cause", None
    return "", None


def _ruled_out_notes(e: Explanation, causes: Sequence[Segment]) -> list[str]:
    """Why a root cause the search named is not confirmed: its hypothesis's verdict."""
    out = []
    for s in causes:
        h = _hypothesis_of(e, s)
        if h is not None and h.get("status") == "ruled_out":
            summary = text(h.get("summary"), 600).rstrip(".")
            out.append(f"{Name.of(s.segment).plain}: ruled out by its hypothesis: {summary}.")
    return out


def _searched(e: Explanation) -> tuple[str, str]:
    """One sentence a reader understands, and the search's counts in one place."""
    stats = e.stats
    dims = ", ".join(text(d) for d in (stats.get("search_dimensions") or e.dimensions))
    segments = stats.get("segments")
    count = f"{segments:,} segments" if isinstance(segments, int) else "the segments"
    depth = stats.get("max_depth")
    combos = (
        f" and every combination of up to {depth} of them"
        if isinstance(depth, int) and depth > 1 and len(stats.get("search_dimensions") or []) != 1
        else ""
    )
    sentence = (
        f"Searched {count} over {dims or 'the columns'}: every value of each column{combos}. "
        "A segment is named only when its move stands out from chance, allowing for how many "
        "were looked at."
    )
    details = [
        phrase.format(stats[key])
        for key, phrase in (
            ("segments_tested", "{:,} of them large enough to compare with the noise"),
            ("leaves", "built from {:,} finest groups of rows"),
        )
        if isinstance(stats.get(key), int)
    ]
    return sentence, "; ".join(details)
