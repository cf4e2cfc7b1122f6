"""report.md: the answer in plain words a manager can read in a minute.

Text that comes from the data (segment values, column names) is escaped: it can never add links,
images, HTML or table structure to the report, and characters that draw nothing or steer the
terminal or the text direction are shown as escapes (``Wid\\u200bget``, ``\\x1b[2J``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tasks.engine.result import Explanation
from tasks.report.text import (  # noqa: F401  (the helpers' old home: imported from here too)
    OTHER_DATA_NOTE,
    RELATION,
    _MD_SPECIAL,
    data_first,
    defang,
    esc,
    fmt,
    other_movers,
    reported_name,
    segment_text,
    short_aliases,
)


def render(e: Explanation, *, db: str | None = None, charts: Sequence[tuple[str, str]] = ()) -> str:
    """The whole report as Markdown: the report model rendered by ``report.md.j2``."""
    from tasks.report.model import build
    from tasks.report.render import markdown

    return markdown(build(e, db), charts)
