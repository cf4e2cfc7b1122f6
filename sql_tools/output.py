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
from typing import Any

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

    return _NOT_PLAIN_ASCII.sub(sub, str(text))


def printable_line(value: object, limit: int) -> str:
    """``value`` as one line a report or a finding shows: runs of spaces, tabs and newlines
    flattened to one space, capped at ``limit`` characters (``…``), then :func:`printable`."""
    text = _LAYOUT.sub(" ", "(null)" if value is None else str(value)).strip()
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


def json_safe(value: Any) -> Any:
    """``value`` with every integer beyond 2^53 - 1 (either sign) as a string and every
    non-finite float as None; dicts, lists and tuples are copied, other values kept."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > MAX_SAFE_INTEGER else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


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
