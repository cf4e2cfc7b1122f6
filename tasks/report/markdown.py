"""report.md: the answer in plain words a manager can read in a minute.

Text that comes from the data (segment values, column names) is escaped: it can never add links,
images, HTML or table structure to the report, and characters that draw nothing or steer the
terminal or the text direction are shown as escapes (``Wid\\u200bget``, ``\\x1b[2J``).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sql_tools.output import dumps, printable, printable_line
from tasks.engine.result import Explanation, Segment
from tasks.report.command import drilldown_command

# Said once above a list of similar past investigations when some of them read other data.
OTHER_DATA_NOTE = (
    "{mark} marks a past investigation of a different dataset (other contents, and not the "
    "same named source): what it found is not evidence about this data."
)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~#])")
_LINKISH = re.compile(r"(?i)\b(http|ftp|file|javascript|data)(s?):|\bwww\.")


def _defang(m: re.Match[str]) -> str:
    if m.group(0).lower() == "www.":
        return m.group(0)[:3] + "[.]"
    word = m.group(1)
    return word[0] + "x" * (len(word) - 2) + word[-1] + m.group(2) + ":"


def defang(text: str) -> str:
    """Addresses made inert (``hxxps:``, ``www[.]``) so no viewer turns them into links."""
    return _LINKISH.sub(_defang, text)


def esc(value: Any, limit: int = 120) -> str:
    """Data text made inert for Markdown: one line, capped, hidden characters shown as escapes
    (``output.printable_line``), addresses defanged, Markdown specials escaped."""
    return _MD_SPECIAL.sub(r"\\\1", defang(printable_line(value, limit)))


def fmt(x: float | None, kind: str = "number", decimals: int | None = None) -> str:
    """A number for people: thousands separators, sensible precision, percent when asked;
    ``decimals`` fixes the places (one precision for a whole column, see :func:`decimals`)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if kind == "percent":
        return f"{x * 100:+.1f}%"
    if decimals is not None:
        text = f"{x:,.{decimals}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.,") else text
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    return f"{x:.4g}"


def decimals(values: Iterable[Any]) -> int:
    """Decimal places for a column of numbers, from its largest magnitude: none for whole
    numbers or from 1,000 up, two from 1, and four significant digits below 1."""
    xs = [abs(float(x)) for x in values if isinstance(x, int | float) and math.isfinite(x)]
    if not xs or all(x == round(x) for x in xs):
        return 0
    top = max(xs)
    if top >= 1000:
        return 0
    if top >= 1:
        return 2
    return min(10, 3 - math.floor(math.log10(top)))


def segment_text(seg: dict[str, Any], aliases: Sequence[dict[str, Any]] = ()) -> str:
    """``platform = ios, app_version = 5.2`` (escaped), or ``everything`` for the population;
    with its other names of as many columns as ``also: ...``."""
    if not seg:
        return "everything"
    text = ", ".join(f"{esc(k)} = {esc(v)}" for k, v in seg.items())
    also = short_aliases(seg, aliases)
    return text + (f" (also: {'; '.join(segment_text(a) for a in also)})" if also else "")


def short_aliases(seg: dict[str, Any], aliases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The other names worth showing: those with no more columns than ``seg`` (the longer ones
    only add a tied column), at most three."""
    return [a for a in aliases if len(a) <= len(seg)][:3]


def other_movers(
    rows: Sequence[Mapping[str, Any]], causes: Sequence[Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any], str | None, dict[str, Any] | None]]:
    """The segments to show beside the root causes, each with how it relates to one.

    Rows are ``result.json`` segments (``segment``, ``aliases``, ``contribution``). A root cause
    itself is left out, and so is a part of one that moved its way (it is the cause, seen in
    part); a part that moved against its cause comes back as ``("part", cause segment)``, a
    segment holding a root cause as ``("contains", cause segment)``, one whose move the root
    causes account for as ``("explained", None)``, others as ``(None, None)``. Names are
    compared under every alias, so a tied column hides no relation.
    """
    out: list[tuple[Mapping[str, Any], str | None, dict[str, Any] | None]] = []
    for row in rows:
        mine = _name_sets(row)
        relation: tuple[str | None, dict[str, Any] | None] = (None, None)
        for c in causes:
            theirs = _name_sets(c)
            if mine & theirs:
                relation = ("same", None)
                break
            if any(t < m for m in mine for t in theirs):
                same_way = (row.get("contribution") or 0.0) * (c.get("contribution") or 0.0) > 0
                relation = ("same", None) if same_way else ("part", c["segment"])
                break
            if any(m < t for m in mine for t in theirs):
                relation = ("contains", c["segment"])
        if relation[0] is None and row.get("explained_by_root_causes"):
            relation = ("explained", None)
        if relation[0] != "same":
            out.append((row, *relation))
    return out


def _name_sets(s: Mapping[str, Any]) -> set[frozenset[tuple[str, str]]]:
    names = [s.get("segment") or {}, *(s.get("aliases") or [])]
    return {frozenset((str(k), str(v)) for k, v in n.items()) for n in names}


def reported_name(segment: dict[str, Any], reported: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The name the result gives the rows of ``segment``: a reported segment's name when
    ``segment`` is one of its aliases, else ``segment`` itself."""
    mine = _name_sets({"segment": segment})
    return next((dict(r["segment"]) for r in reported if mine & _name_sets(r)), segment)


RELATION = {
    "part": "part of root cause",
    "contains": "contains the root cause",
    "explained": "follows from the root causes",
}


@dataclass(frozen=True)
class Columns:
    """One precision per column of a segment table: the metric's values before and after
    share one, the contribution (and its rate and mix parts) another."""

    values: int
    contribution: int

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> Columns:
        return cls(
            values=decimals(v for r in rows for v in (r.get("baseline"), r.get("comparison"))),
            contribution=decimals(
                v for r in rows for v in (r.get("contribution"), r.get("rate"), r.get("mix"))
            ),
        )


def data_first(result: dict[str, Any]) -> list[str]:
    """The headline's first words when the data explains the move (plain text, unescaped): what
    share of the change is a data problem, then each such root cause's or shift's note. Empty
    when no move is put down to the data."""
    change = result.get("change") or {}
    if not change.get("significant"):
        return []
    moved = [*(result.get("root_causes") or []), result.get("global_shift")]
    data = [s for s in moved if s and s.get("effect") == "data_quality"]
    if not data:
        return []
    absolute = change.get("absolute")
    word = "drop" if isinstance(absolute, int | float) and absolute < 0 else "rise"
    shares = [s.get("share") for s in data]
    share = sum(shares) if all(isinstance(x, int | float) for x in shares) else None
    how_much = "" if share is None else f" ({min(share, 1.0) * 100:.0f}% of the change)"
    business = [s for s in moved if s and s.get("effect") != "data_quality"]
    rest = " The business causes below account for the rest." if business else ""
    kinds = {k for s in data for k in (s.get("data_quality") or {}).get("kinds", [])}
    what = " and ".join(
        w
        for w, hit in (
            ("days missing from the data", kinds != {"duplicate_rows"}),
            ("days loaded more than once", "duplicate_rows" in kinds),
        )
        if hit
    )
    first = (
        f"This {word} is a data problem first{how_much}: {what}, not a change in the "
        f"business.{rest}"
    )
    notes = [(s.get("data_quality") or {}).get("message") for s in data]
    return [first, *[n for n in notes if n]]


def _row(s: Segment, ratio: bool, cols: Columns, note: str = "") -> str:
    effect = s.effect
    if ratio and s.rate is not None and s.mix is not None:
        d = cols.contribution
        effect += f" (rate {fmt(s.rate, decimals=d)}, mix {fmt(s.mix, decimals=d)})"
    p = "n/a" if s.p_value is None else f"{s.p_value:.2g}"
    return (
        f"| {segment_text(s.segment, s.aliases)}{note} | {fmt(s.baseline, decimals=cols.values)} | "
        f"{fmt(s.comparison, decimals=cols.values)} | "
        f"{fmt(s.contribution, decimals=cols.contribution)} | {_share(s.share)} | "
        f"{effect} | {p} |"
    )


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _table(rows: list[Segment], ratio: bool, notes: Sequence[str] = ()) -> list[str]:
    head = "segment | before | after | contribution | share of change | effect | p"
    cols = Columns.of([s.model_dump() for s in rows])
    notes = [*notes, *[""] * (len(rows) - len(notes))]
    body = [_row(s, ratio, cols, note) for s, note in zip(rows, notes, strict=True)]
    return [f"| {head} |", "|---|---:|---:|---:|---:|---|---:|", *body]


def _others_table(rows: list[Segment], causes: list[Segment], ratio: bool, limit: int) -> list[str]:
    """Drivers or offsetting segments beside the root causes (see :func:`other_movers`)."""
    dumped = [s.model_dump() for s in rows]
    shown = other_movers(dumped, [c.model_dump() for c in causes])[:limit]
    if not shown:
        return []
    by_id = {id(d): s for d, s in zip(dumped, rows, strict=True)}
    notes = [
        f" ({RELATION[rel]} {segment_text(seg)})"
        if rel and seg
        else f" ({RELATION[rel]})"
        if rel
        else ""
        for _, rel, seg in shown
    ]
    return _table([by_id[id(d)] for d, _, _ in shown], ratio, notes)


def render(e: Explanation, *, db: str | None = None) -> str:
    """The whole report as Markdown."""
    ratio = e.metric.kind == "ratio"
    c = e.change
    name = esc(e.metric.name or e.metric.expression)
    lines = [f"# Why did {name} move?", ""]
    lines.append(
        f"**{name}** on `{esc(e.metric.table)}` went from **{fmt(e.baseline.value)}** "
        f"({esc(e.baseline.label)}) to **{fmt(e.comparison.value)}** ({esc(e.comparison.label)}): "
        f"{fmt(c.absolute)} ({fmt(c.relative, 'percent') if c.relative is not None else 'n/a'})."
    )
    lines.append("")
    first = data_first(e.model_dump(mode="json", include={"change", "root_causes", "global_shift"}))
    if first:
        lines += [f"**{esc(first[0], 400)}**", "", *[f"- {esc(n, 600)}" for n in first[1:]], ""]
    if c.significant:
        lines.append(f"This change is **significant** (p = {c.p_value:.2g}; {esc(c.method, 400)}).")
    else:
        p = "n/a" if c.p_value is None else f"{c.p_value:.2g}"
        lines.append(
            f"This change is **not significant**: it is within the normal noise (p = {p}; "
            f"{esc(c.method, 400)}). No root cause is named."
        )
    lines.append("")
    if e.data_quality:
        lines += ["## Data quality first", ""]
        lines += [
            f"- **{d.kind.replace('_', ' ')}** ({d.severity}): {esc(d.message, 400)}"
            for d in e.data_quality
        ]
        lines.append("")
    if c.significant:
        lines += ["## Root causes", ""]
        if e.root_causes:
            share = (
                f" Together they account for {fmt(e.explained_share, 'percent').lstrip('+')} "
                "of the change."
                if e.explained_share is not None
                else ""
            )
            lines.append(
                f"The smallest set of segments that explains the change, most specific level "
                f"first.{share}"
            )
            lines.append("")
            lines += _table(e.root_causes, ratio)
            # notes of moves not put down to the data (those are in the headline)
            notes = [
                rc.data_quality.message
                for rc in e.root_causes
                if rc.data_quality is not None and rc.effect != "data_quality"
            ]
            lines += ["", *[f"- {esc(n, 600)}" for n in notes]] if notes else []
        else:
            lines.append("No single segment stands out: the change is spread across the data.")
        lines.append("")
        if e.global_shift is not None:
            g = e.global_shift
            why = "every segment moved by about the same factor"
            if g.data_quality is not None:
                why = esc(g.data_quality.message.rstrip("."), 600)
            elif g.effect == "data_quality":
                why = "it matches the data-quality problems above"
            lines += [
                "## Everything moved",
                "",
                f"An even shift across all the data accounts for {fmt(g.contribution)} "
                f"({fmt(g.share, 'percent') if g.share is not None else 'n/a'} of the change): {why}.",
                "",
            ]
    table = _others_table(e.offsetting, e.root_causes, ratio, 5)
    if table:
        lines += ["## Moving the other way", "", *table, ""]
    table = _others_table(e.drivers, e.root_causes, ratio, 10)
    if table:
        lines += ["## Other segments that moved", "", *table, ""]
    lines += _hypotheses(e, db)
    if e.similar_investigations:
        lines += ["## Similar past investigations", ""]
        if any(p.get("same_data") is False for p in e.similar_investigations):
            lines += [OTHER_DATA_NOTE.format(mark="**Other data**"), ""]
        for p in e.similar_investigations:
            causes = "; ".join(esc(c) for c in p.get("root_causes", [])) or "no root cause"
            other = ", **other data**" if p.get("same_data") is False else ""
            lines.append(
                f"- {esc(p.get('date'))}{other}: {esc(p.get('metric'))}, "
                f"{esc(p.get('periods'))}: {causes} "
                f"(similarity {p.get('score', 0):.2f}, run `{esc(p.get('run_id'))}`)"
            )
        lines.append("")
    lines += ["## Check it yourself", ""]
    if e.root_causes:
        lines.append("Each root cause comes from a query anyone can re-run:")
        lines.append("")
        for s in e.root_causes:
            if s.evidence is None:
                continue
            args = dumps(s.evidence.arguments).replace("`", "\\u0060")
            lines += ["```", _tool_command(s.evidence.tool, args, db), "```"]
    lines.append("")
    searched = e.stats.get("search_dimensions") or e.dimensions
    dims = ", ".join(esc(d) for d in searched)
    lines.append(
        f"Searched {e.stats.get('segments', 0):,} segments over {dims} "
        f"(up to {e.stats.get('max_depth')} columns at a time)."
    )

    if e.notes:
        lines.append("")
    for n in e.notes:
        lines.append(f"- {esc(n, 400)}")
    return "\n".join(lines).rstrip() + "\n"


_STATUS = {"confirmed": "Confirmed", "ruled_out": "Ruled out", "inconclusive": "Inconclusive"}


def _hypotheses(e: Explanation, db: str | None) -> list[str]:
    """Hypotheses with verdicts and evidence (SQL collapsed), then the gate's findings."""
    if not e.hypotheses:
        return []
    agent = e.stats.get("agent") or {}
    how = "the offline planner" if agent.get("mode") == "offline" else esc(agent.get("model"))
    lines = ["## Hypotheses", "", f"Investigated by {how} through the SQL tools.", ""]
    for h in e.hypotheses:
        status = _STATUS.get(h.get("status", ""), "Inconclusive")
        lines.append(
            f"### {status}: {esc(h.get('title'), 200)} ({esc(h.get('confidence'))} confidence)"
        )
        lines += ["", esc(h.get("summary"), 1000), ""]
        if h.get("cites"):
            runs = ", ".join(f"`{esc(r)}`" for r in h["cites"])
            lines += [f"Seen before: past investigation {runs} named the same segment.", ""]
        for ev in h.get("evidence", []):
            lines.append(
                f"- `{esc(ev.get('id'))}` {esc(ev.get('tool'))}: {esc(ev.get('result', {}).get('summary'), 200)}"
            )
        if h.get("evidence"):
            lines += ["", "<details><summary>Evidence queries</summary>", ""]
            for ev in h["evidence"]:
                if ev.get("sql"):
                    sql = printable(" ".join(str(ev["sql"]).split())).replace("`", "'")
                    params = dumps(ev.get("params", {})).replace("`", "'")
                    lines += [f"{esc(ev.get('id'))}:", "```sql", sql, f"-- params: {params}", "```"]
            lines += ["", "</details>", ""]
    accepted = [f for f in e.findings if f.get("status") == "accepted"]
    dismissed = [f for f in e.findings if f.get("status") != "accepted"]
    if accepted:
        lines += [
            "## Findings",
            "",
            "| finding | before | after | share | p |",
            "|---|---|---|---|---|",
        ]
        reported = [s.model_dump() for s in [*e.root_causes, *e.drivers, *e.offsetting]]
        d = decimals(v for f in accepted for v in (f.get("measured") or {}).values())
        for f in accepted:
            m = f.get("measured") or {}
            name = reported_name(f["segment"], reported)
            if name != f["segment"]:
                name_text = f"{segment_text(name)} (written as {segment_text(f['segment'])})"
            else:
                name_text = segment_text(name)
            lines.append(
                f"| {name_text} ({esc(f['category'])}) "
                f"| {fmt(m.get('baseline'), decimals=d)} | {fmt(m.get('comparison'), decimals=d)} "
                f"| {_share(f.get('share'))} "
                f"| {'n/a' if f.get('p_value') is None else format(f['p_value'], '.2g')} |"
            )
        lines.append("")
        lines.append(
            "Each finding's numbers were re-computed by its own query before it was accepted "
            "(`result.json`: `findings[].sql`, `params`)."
        )
        lines.append("")
    if dismissed:
        lines += ["Dismissed by the evidence gate:", ""]
        lines += [
            f"- {segment_text(f['segment'])} ({esc(f['category'])}): {esc(f.get('critique'), 400)}"
            for f in dismissed
        ]
        lines.append("")
    usage = agent.get("usage") or {}
    if agent.get("mode") == "claude":
        lines += [
            f"Model use: {usage.get('requests', 0)} requests, {usage.get('input_tokens', 0):,} input "
            f"and {usage.get('output_tokens', 0):,} output tokens, about "
            f"${usage.get('cost_usd', 0.0):.2f}.",
            "",
        ]
    return lines


def _tool_command(tool: str, args: str, db: str | None) -> str:
    quoted = "'" + args.replace("'", "'\\''") + "'"
    return f"{drilldown_command()} tool {tool} --db {shlex.quote(db) if db else 'DB'} --args {quoted}"
