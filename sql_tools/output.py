"""How values leave the product: as JSON, and as text a person or a model reads.

Values are kept exact in the data, in SQL parameters and in memory; only their rendering changes.

- :func:`printable` is the one display escape: every character that draws nothing or changes
  how the rest is drawn (controls, zero-width and direction characters, odd spaces) is written
  as a visible escape, so ``Wid\\u200bget`` never looks like ``Widget``, a direction override
  cannot reorder a line and a terminal escape sequence is shown, not run. The terminal, report.md,
  report.html and chart labels all show values through it (:func:`printable_line` for one
  capped line of prose or a table cell).
- :func:`dumps` writes every JSON document the product emits (tool results, MCP responses,
  result.json, evidence.jsonl, the model's data blocks): the same characters as JSON ``\\u``
  escapes (so parsed values stay exact), integers beyond 2^53 - 1 as strings (JavaScript and
  many JSON readers silently round them), and non-finite numbers as ``null``.
- :func:`mask_secrets` (:mod:`sql_tools.secrets`) is the one place secret-shaped values are
  recognised: text that has the form of a well-known API key, token or private key (Stripe,
  JWT, AWS, GitHub, Slack, Google, OpenAI, Anthropic, PEM private keys), as it is or
  percent- or base64-encoded, keeps its first characters and loses the rest
  (``sk_live_••••``). :func:`printable` and :func:`dumps` apply it (to dict keys too), so every
  report, JSON file, model data block and printed line does; :func:`masked` applies it to a
  whole document (the memory store's records), and :func:`secrets_note` says how many were
  masked. A file may hold such a value by accident (a token pasted into a column, a key in a
  file name); nothing the product writes may repeat it.
- :func:`shallow` measures (and cuts) the nesting of JSON text without parsing it: the standard
  library's parser recurses and fails with ``RecursionError`` at about a thousand levels, and
  pydantic's refuses a few hundred levels with an error that drops the message, so a request
  that deep has to be recognised before either sees it.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from sql_tools.secrets import MASK as MASK
from sql_tools.secrets import mask_secrets as mask_secrets
from sql_tools.secrets import masked as masked
from sql_tools.secrets import secrets_note as secrets_note
from sql_tools.secrets import walk

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer every JSON reader holds exactly (``Number.MAX_SAFE_INTEGER``)."""

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u034f")  # Hangul fillers, grapheme joiner
_NOT_PLAIN_ASCII = re.compile(r"[^\x20-\x7e]")
_NOT_ASCII_TEXT = re.compile(r"[^\x00-\x7e]")  # json.dumps escapes C0 inside strings itself
_LAYOUT = re.compile(r"[ \t\r\n]+")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def hidden(ch: str) -> bool:
    """True for a character that draws nothing or changes how the text around it is drawn."""
    if ch == " ":
        return False
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES or ch in _BLANK_LETTERS


def _escape(ch: str) -> str:
    n = ord(ch)
    if ch in _SHORT:
        return _SHORT[ch]
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text: object, keep: str = "") -> str:
    """``text`` with every hidden character (see :func:`hidden`) but those in ``keep`` written as
    a Python-style escape: ``\\x1b``, ``\\n``, ``\\u200b``, ``\\u202e``, ``\\U000e0041``."""

    def sub(m: re.Match[str]) -> str:
        ch = m.group()
        return _escape(ch) if ch not in keep and hidden(ch) else ch

    return _NOT_PLAIN_ASCII.sub(sub, mask_secrets(str(text)))


def printable_line(value: object, limit: int) -> str:
    """``value`` as one line a report or a finding shows: runs of spaces, tabs and newlines
    flattened to one space, capped at ``limit`` characters (``…``), then :func:`printable`
    (secrets are masked before the cap, which could cut one short of its recognisable form)."""
    text = _LAYOUT.sub(" ", mask_secrets("(null)" if value is None else str(value))).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return printable(text)


def _json_escape(m: re.Match[str]) -> str:
    ch = m.group()
    if not hidden(ch):
        return ch
    return "".join(f"\\u{u:04x}" for u in _utf16(ch))


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _json_leaf(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > MAX_SAFE_INTEGER else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def json_safe(value: Any) -> Any:
    """``value`` with every integer beyond 2^53 - 1 (either sign) as a string, every
    non-finite float as None and secret-shaped text masked, dict keys included
    (:func:`~sql_tools.secrets.walk`); dicts, lists and tuples are copied, other values kept."""
    return walk(value, _json_leaf)


def dumps(
    value: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None
) -> str:
    """JSON the product emits: :func:`json_safe` values, hidden characters as ``\\u`` escapes,
    other text as it is (UTF-8), anything else (dates) as its ``str``."""
    text = json.dumps(
        json_safe(value),
        ensure_ascii=False,
        allow_nan=False,
        default=str,
        indent=indent,
        separators=separators,
    )
    return _NOT_ASCII_TEXT.sub(_json_escape, text)


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|[^"\[\]{}]+|"')


def shallow(text: str, max_depth: int) -> tuple[str, int]:
    """``text`` with every array or object nested deeper than ``max_depth`` replaced by
    ``null``, and the deepest nesting found (0 for a scalar)."""
    out: list[str] = []
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
            if depth == max_depth + 1:
                out.append("null")
            if depth > max_depth:
                continue
        elif tok in ("]", "}"):
            depth -= 1
            if depth >= max_depth:
                continue
        elif depth > max_depth:
            continue
        out.append(tok)
    return "".join(out), deepest


# --- numbers for people ----------------------------------------------------------------------

GROSS_FACTOR = 2.0
"""Moves whose absolute sizes add up to more than this many times the net change are offsetting
movers: a share of the net change (``-1747%``) says nothing, so a move is said in the metric's
units and as a share of the gross movement."""


def finite(x: Any) -> bool:
    """A real, finite number (not a bool)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def places(values: Any) -> int:
    """Decimal places for one quantity across everything that prints it: none for whole
    numbers or when the smallest non-zero magnitude is 100 or more, two from 1, and two
    significant digits below 1 (0.69 stays 0.69, never "1")."""
    xs = [abs(float(x)) for x in values if finite(x)]
    if not xs or all(x == round(x) for x in xs):
        return 0
    small = min((x for x in xs if x), default=0.0)
    if small >= 100 or small == 0:
        return 0
    if small >= 1:
        return 2
    return min(8, 1 - math.floor(math.log10(small)))


def number(x: Any, decimals: int) -> str:
    """``x`` with thousands separators and ``decimals`` places; ``n/a`` when not a number."""
    if not finite(x):
        return "n/a"
    # read at 12 significant digits first: the same values summed in another order (another
    # database, another plan) differ in their last bits, and print the same digits
    out = f"{float(f'{float(x):.12g}'):,.{decimals}f}"
    return out[1:] if out.startswith("-") and not out.strip("-0.,") else out


def signed(x: Any, decimals: int) -> str:
    """A change: :func:`number` with its sign, ``+`` included; a change that prints as zero
    has none (``0``, never ``+0``)."""
    out = number(x, decimals)
    return out if out == "n/a" or out.startswith("-") or not out.strip("0.,") else "+" + out


def percent(x: Any, sign: bool = True) -> str:
    """A share or relative change as a percent, one decimal; one that prints as zero has no
    sign (``0.0%``, never ``-0.0%``)."""
    if not finite(x):
        return "n/a"
    out = f"{x * 100:+.1f}%" if sign else f"{x * 100:.1f}%"
    return "0.0%" if not out.strip("+-0.%") else out


@dataclass(frozen=True)
class Quantity:
    """One quantity's format (a metric's values, or its changes): its places are chosen once
    from every figure of it, so a value reads the same wherever it is printed."""

    places: int

    @classmethod
    def of(cls, values: Any) -> Quantity:
        return cls(places(values))

    def value(self, x: Any) -> str:
        return number(x, self.places)

    def change(self, x: Any) -> str:
        return signed(x, self.places)


def gross_movement(net: Any, moves: Any) -> float | None:
    """The moves' absolute sizes added up, when they pull in opposite directions so much that
    they exceed :data:`GROSS_FACTOR` times the net change; else None (shares of the net
    change read fine)."""
    sizes = [abs(float(m)) for m in moves if finite(m)]
    if not finite(net) or not sizes:
        return None
    gross = sum(sizes)
    return gross if gross > GROSS_FACTOR * abs(float(net)) else None


def share_text(part: Any, net: Any, gross: float | None, changes: Quantity, of: str) -> str:
    """``part``'s share of the net change ``of`` (``84.1% of the change``); when ``gross``
    (:func:`gross_movement`) says opposite moves hide in the net, ``part`` in the metric's
    units and as a share of that gross movement instead."""
    if gross:
        return (
            f"{changes.change(part)}, {percent(float(part) / gross)} of {changes.value(gross)} "
            f"moved in either direction for a net {changes.change(net)}"
        )
    if not finite(part) or not finite(net) or not net:
        return f"{changes.change(part)} of {of}"
    return f"{percent(float(part) / float(net), sign=False)} of {of}"


@dataclass(frozen=True)
class Figures:
    """How an investigation prints its metric: one :class:`Quantity` for the metric's values,
    one for its changes, and the gross movement when the named moves hide in a small net.

    Built from a ``result.json``-shaped document (the engine's answer): the report, the tool
    summaries and the planner's text all read the same figures the same way."""

    values: Quantity
    changes: Quantity
    net: float | None
    gross: float | None

    @classmethod
    def of(cls, result: Any) -> Figures:
        causes = list(result.get("root_causes") or [])
        shift = result.get("global_shift")
        segs = [*causes, *(result.get("drivers") or []), *(result.get("offsetting") or [])]
        segs += [shift] if shift else []
        base, comp = (result.get(k) or {} for k in ("baseline", "comparison"))
        values = [base.get("value"), comp.get("value")]
        values += [s.get(k) for s in segs for k in ("baseline", "comparison")]
        net = (result.get("change") or {}).get("absolute")
        net = float(net) if finite(net) else None
        contributions = [s.get("contribution") for s in causes]
        changes = [net, *contributions]
        if causes and net is not None and all(finite(c) for c in contributions):
            changes.append(net - sum(contributions))  # the rest of the change
        moves = contributions + ([shift.get("contribution")] if shift else [])
        gross = gross_movement(net, moves) if causes else None
        return cls(Quantity.of(values), Quantity.of(changes), net, gross)

    def share(self, part: Any, share_of_net: Any = None) -> str:
        """A named move's share, said as the report says it (see :func:`share_text`)."""
        if share_of_net is not None and not self.gross and finite(share_of_net):
            return f"{percent(share_of_net, sign=False)} of the change"
        return share_text(part, self.net, self.gross, self.changes, "the change")
