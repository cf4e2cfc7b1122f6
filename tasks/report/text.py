"""Text helpers shared by the report model and its renderings: escaping and defanging, number
formats, segment names, and how other movers relate to the root causes.

Text that comes from the data (segment values, column names) is escaped: it can never add links,
images, HTML or table structure to the report, and characters that draw nothing or steer the
terminal or the text direction are shown as escapes (``Wid\\u200bget``, ``\\x1b[2J``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sql_tools.output import Figures, gross_movement, printable_line
from sql_tools.words import (  # noqa: F401  (the report's words for a segment's change)
    gross_text,
    own_change,
    own_relative,
    share_in,
    share_of,
    share_of_gross,
    whole_text,
)

# Said once above a list of similar past investigations when some of them read other data.
OTHER_DATA_NOTE = (
    "{mark} marks a past investigation of a different dataset (other contents, and not the "
    "same named source): what it found is not evidence about this data."
)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~#])")
_LINKISH = re.compile(
    r"(?i)\b(?:(http|ftp|file)(s?):(?=//)|(javascript)():|(data)():(?=[a-z]+/[a-z0-9.+-]+)"
    r"|(http|ftp)(s?):(?=[^\s]))|\bwww\."
)
"""Real URL schemes in link position: ``https://``, ``ftp://``, ``file://``, ``http:x`` (no
space before the address), ``javascript:``, and ``data:`` followed by a MIME type
(``data:text/html,``). A plain word followed by a colon (``too little data: 2 rows``) is prose."""


def _defang(m: re.Match[str]) -> str:
    if m.group(0).lower() == "www.":
        return m.group(0)[:3] + "[.]"
    groups = [g for g in m.groups() if g is not None]
    word, s = groups[0], groups[1]
    return word[0] + "x" * (len(word) - 2) + word[-1] + s + ":"


def defang(text: str) -> str:
    """Addresses made inert (``hxxps:``, ``www[.]``) so no viewer turns them into links; words
    that merely end in a colon keep their letters."""
    return _LINKISH.sub(_defang, text)


def esc(value: Any, limit: int = 120) -> str:
    """Data text made inert for Markdown: one line, capped, hidden characters shown as escapes
    (``output.printable_line``), addresses defanged, Markdown specials escaped."""
    return _MD_SPECIAL.sub(r"\\\1", defang(printable_line(value, limit)))


def fmt(x: float | None, kind: str = "number", decimals: int | None = None) -> str:
    """A number for people: thousands separators, sensible precision, percent when asked;
    ``decimals`` fixes the places (one precision per quantity: ``sql_tools.output.Quantity``)."""
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


def noise_lines(result: Mapping[str, Any]) -> list[str]:
    """The console's words when the noise cannot be judged (``change.noise_unjudged``): why,
    then each of the largest moves (``movers``) as a fact, with its share of a named whole."""
    why = (result.get("change") or {}).get("noise_unjudged")
    if not why:
        return []
    f = Figures.of(result)
    movers = list(result.get("movers") or [])
    net = (result.get("change") or {}).get("absolute")
    gross = gross_movement(net, [m.get("contribution") for m in movers])
    out = [f"{why}; the largest moves, as measured (not causes):"]
    for m in movers:
        name = ", ".join(f"{k} = {v}" for k, v in (m.get("segment") or {}).items())
        part = m.get("contribution")
        share = share_of_gross(part, gross, net, f.changes) if gross else share_of(
            part, net, f.changes, units=True
        )
        moved = own_change(m.get("baseline"), m.get("comparison"), f.values)
        out.append(f"{name} {moved}: {share}")
    return out


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


def data_first(result: dict[str, Any]) -> list[str]:
    """The headline's first words when the data explains the move (plain text, unescaped): what
    share of the change is a data problem, then each such root cause's or shift's note. Empty
    when no move is put down to the data."""
    change = result.get("change") or {}
    moved = [*(result.get("root_causes") or []), result.get("global_shift")]
    # missing data is told whether or not the move is beyond the noise (the engine keeps an even
    # shift within the noise only when it is the data's)
    data = [s for s in moved if s and s.get("effect") == "data_quality"]
    if not data:
        return []
    absolute = change.get("absolute")
    word = "drop" if isinstance(absolute, int | float) and absolute < 0 else "rise"
    parts = [s.get("contribution") for s in data]
    how_much = (
        f" ({share_in(sum(parts), Figures.of(result))})"
        if all(isinstance(x, int | float) for x in parts)
        else ""
    )
    business = [s for s in moved if s and s.get("effect") != "data_quality"]
    rest = " The business causes below account for the rest." if business else ""
    kinds = {k for s in data for k in (s.get("data_quality") or {}).get("kinds", [])}
    units = f"{result.get('data_grain') or 'day'}s"  # missing in the data's own grain
    what = " and ".join(
        w
        for w, hit in (
            (f"{units} missing from the data", kinds != {"duplicate_rows"}),
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
