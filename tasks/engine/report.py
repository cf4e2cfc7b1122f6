"""report.md: the answer in plain words a manager can read in a minute.

Text that comes from the data (segment values, column names) is escaped: it can never add links,
images, HTML or table structure to the report, and characters that draw nothing or steer the
terminal or the text direction are shown as escapes (``Wid\\u200bget``, ``\\x1b[2J``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from sql_tools.output import dumps, printable, printable_line
from tasks.engine.result import Explanation, Segment

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


def fmt(x: float | None, kind: str = "number") -> str:
    """A number for people: thousands separators, sensible precision, percent when asked."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if kind == "percent":
        return f"{x * 100:+.1f}%"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    return f"{x:.4g}"


def segment_text(seg: dict[str, Any]) -> str:
    """``platform = ios, app_version = 5.2`` (escaped), or ``everything`` for the population."""
    if not seg:
        return "everything"
    return ", ".join(f"{esc(k)} = {esc(v)}" for k, v in seg.items())


def _row(s: Segment, ratio: bool) -> str:
    effect = s.effect
    if ratio and s.rate is not None and s.mix is not None:
        effect += f" (rate {fmt(s.rate)}, mix {fmt(s.mix)})"
    p = "n/a" if s.p_value is None else f"{s.p_value:.2g}"
    return (
        f"| {segment_text(s.segment)} | {fmt(s.baseline)} | {fmt(s.comparison)} | "
        f"{fmt(s.contribution)} | {_share(s.share)} | "
        f"{effect} | {p} |"
    )


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _table(rows: list[Segment], ratio: bool) -> list[str]:
    head = "segment | before | after | contribution | share of change | effect | p"
    return [f"| {head} |", "|---|---:|---:|---:|---:|---|---:|", *[_row(s, ratio) for s in rows]]


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
        else:
            lines.append("No single segment stands out: the change is spread across the data.")
        lines.append("")
        if e.global_shift is not None:
            g = e.global_shift
            why = (
                "it matches the data-quality problems above"
                if g.effect == "data_quality"
                else "every segment moved by about the same factor"
            )
            lines += [
                "## Everything moved",
                "",
                f"An even shift across all the data accounts for {fmt(g.contribution)} "
                f"({fmt(g.share, 'percent') if g.share is not None else 'n/a'} of the change): {why}.",
                "",
            ]
    if e.offsetting:
        lines += ["## Moving the other way", "", *_table(e.offsetting[:5], ratio), ""]
    if e.drivers:
        named = [rc.segment for rc in e.root_causes]
        others = [d for d in e.drivers if d.segment not in named][:10]
        if others:
            lines += ["## Other segments that moved", "", *_table(others, ratio), ""]
    lines += _hypotheses(e, db)
    if e.similar_investigations:
        lines += ["## Similar past investigations", ""]
        for p in e.similar_investigations:
            causes = "; ".join(esc(c) for c in p.get("root_causes", [])) or "no root cause"
            lines.append(
                f"- {esc(p.get('date'))}: {esc(p.get('metric'))}, {esc(p.get('periods'))}: "
                f"{causes} (similarity {p.get('score', 0):.2f}, run `{esc(p.get('run_id'))}`)"
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
        for f in accepted:
            m = f.get("measured") or {}
            lines.append(
                f"| {segment_text(f['segment'])} ({esc(f['category'])}) | {fmt(m.get('baseline'))} "
                f"| {fmt(m.get('comparison'))} | {_share(f.get('share'))} "
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
    return f"drilldown tool {tool} --db {db or 'DB'} --args {quoted}"
