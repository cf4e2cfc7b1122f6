"""Safe table and column names for loaded files.

Every name produced here matches ``[A-Za-z0-9_]+`` and is still quoted with :func:`quote_ident`
wherever it appears in SQL. The original header text is kept separately as a display label.
"""

from __future__ import annotations

import re
import unicodedata

from sql_tools import short
from sql_tools.catalog import quote_ident

__all__ = ["column_names", "normalize_column", "quote_ident", "table_name"]

MAX_NAME = 63
_KEEP = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_NON_TABLE = re.compile(r"[^a-z0-9_]+")


def _ascii_fold(text: str) -> str:
    """NFKD-decompose ``text`` and drop everything that is not ASCII (``été`` -> ``ete``)."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def table_name(stem: str) -> str:
    """Table name for a file stem: lowercase ``[a-z0-9_]``, never empty, never a leading digit.

    Args:
        stem: The file name without its extension (``Sales Report (2024)``).

    Returns:
        The sanitised name (``sales_report_2024``); ``table`` when nothing usable is left.
    """
    name = _NON_TABLE.sub("_", _ascii_fold(stem).lower()).strip("_")
    if not name:
        return "table"
    if name[0].isdigit():
        name = "t_" + name
    return name[:MAX_NAME]


def normalize_column(label: str, position: int) -> str:
    """The column name for one header cell (before de-duplication).

    Header text matching ``^[A-Za-z_][A-Za-z0-9_]{0,62}$`` is kept as it is. Anything else is
    folded to ASCII, lowercased, runs of other characters become ``_``, a leading digit gets a
    ``c_`` prefix and the result is capped at 63 characters.

    Args:
        label: The header text.
        position: 1-based column position (used when nothing usable is left).
    """
    if _KEEP.fullmatch(label):
        return label
    name = _NON_ALNUM.sub("_", _ascii_fold(label).lower()).strip("_")
    if not name:
        return f"column_{position}"
    if name[0].isdigit():
        name = "c_" + name
    return name[:MAX_NAME].rstrip("_")


def _with_suffix(base: str, n: int) -> str:
    """``base_n``, truncating ``base`` so the result stays within the name cap."""
    suffix = f"_{n}"
    return base[: MAX_NAME - len(suffix)] + suffix


def column_names(labels: list[str]) -> tuple[list[str], list[str]]:
    """Unique, safe column names for a header, plus a warning for each change.

    Names are de-duplicated case-insensitively (DuckDB identifiers are case-insensitive):
    ``revenue, revenue, Revenue`` become ``revenue, revenue_2, Revenue_3``.

    Args:
        labels: The header cells in file order.

    Returns:
        ``(names, warnings)``.
    """
    bases = [normalize_column(label, i) for i, label in enumerate(labels, start=1)]
    taken = {b.lower() for b in bases}
    seen: dict[str, int] = {}
    names: list[str] = []
    warnings: list[str] = []
    for pos, (label, base) in enumerate(zip(labels, bases, strict=True), start=1):
        key = base.lower()
        count = seen.get(key, 0) + 1
        seen[key] = count
        name = base
        if count > 1:
            n = count
            while _with_suffix(base, n).lower() in taken:
                n += 1
            name = _with_suffix(base, n)
            taken.add(name.lower())
            warnings.append(
                f"column {pos} {short(label)} duplicates an earlier column name; named {name}"
            )
        elif name != label:
            warnings.append(f"column {pos} {short(label)} renamed to {name}")
        names.append(name)
    return names, warnings
