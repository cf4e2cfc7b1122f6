"""Tables as a reader sees them in report.md and report.html: rows of cell text by section."""

from __future__ import annotations

import html
import re

SEGMENT_SECTIONS = ("Root causes", "Moving the other way", "Other segments that moved")
NUMBER = re.compile(r"-?[\d,]+(\.\d+)?")


def md_tables(md: str) -> dict[str, list[list[str]]]:
    """The body rows of each table in report.md, by the heading above it (cells unescaped)."""
    tables: dict[str, list[list[str]]] = {}
    section, header = "", False
    for line in md.splitlines():
        if line.startswith("## "):
            section, header = line[3:], True
        elif line.startswith("|"):
            if set(line) <= set("|-: "):
                continue
            if header:
                header = False
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            tables.setdefault(section, []).append([re.sub(r"\\(.)", r"\1", c) for c in cells])
    return tables


def html_tables(page: str) -> dict[str, list[list[str]]]:
    """The body rows of each table in report.html, by the heading above it (tags stripped)."""
    tables: dict[str, list[list[str]]] = {}
    for part in page.split("<h2>")[1:]:
        title, _, body = part.partition("</h2>")
        for row in re.findall(r"<tr><td>(.*?)</tr>", body, re.S):
            cells = re.findall(r"(?:^|<td[^>]*>)(.*?)</td>", row, re.S)
            tables.setdefault(title, []).append(
                [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells]
            )
    return tables


def places(cell: str) -> int | None:
    """Decimal places of a number cell; None for anything else (n/a, text)."""
    if not NUMBER.fullmatch(cell):
        return None
    return len(cell.split(".")[1]) if "." in cell else 0


def one_precision(rows: list[list[str]], columns: tuple[int, ...]) -> bool:
    found = {places(r[j]) for r in rows for j in columns} - {None}
    return len(found) <= 1


def named_twice(tables: dict[str, list[list[str]]]) -> list[str]:
    """Rows of the segment tables that name the same rows as another: the same numbers, or the
    same name (notes in parentheses aside)."""
    rows = [r for title in SEGMENT_SECTIONS for r in tables.get(title, [])]
    numbers = [tuple(r[1:]) for r in rows]
    names = [r[0].split(" (")[0] for r in rows]
    return [
        r[0]
        for r, n, name in zip(rows, numbers, names, strict=True)
        if numbers.count(n) > 1 or names.count(name) > 1
    ]
