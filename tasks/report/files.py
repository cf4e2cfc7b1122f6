"""The report people read: ``report.html`` with charts, next to ``report.md``.

``write_report_files(result, out, db)`` draws ``charts/waterfall.png`` (and
``charts/timeseries.png`` when the periods are date ranges) and writes a standalone
``report.html`` built from the ``result.json`` dict: inline CSS, charts inline as ``data:`` PNGs,
no scripts, no external fetches, and a Content-Security-Policy that forbids both.

Every piece of text from the data or from a model (segment values, column names, titles,
summaries, critiques, SQL) is HTML-escaped, with characters that draw nothing or steer the
terminal or the text direction shown as escapes (``Wid\\u200bget``); addresses in prose are
defanged (``hxxps:``) so no viewer turns them into links; the only images are our own charts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from sql_tools import SqlToolError, ToolContext
from sql_tools.output import mask_secrets, printable_line
from tasks.engine.result import Explanation
from tasks.outdir import remove_file, write_file
from tasks.report.charts import (
    TIMESERIES,
    WATERFALL,
    DailySeries,
    daily_series,
    timeseries_png,
    waterfall_png,
)
from tasks.report.model import Report, build
from tasks.report.render import html

__all__ = ["DailySeries", "charts_markdown", "daily_series", "render_html", "write_report_files"]

CHARTS: dict[str, str] = {
    WATERFALL: "Contribution waterfall",
    TIMESERIES: "The metric per day, before and after",
}
"""Our chart files (fixed names) and their alt text, in report order."""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def write_report_files(
    result: dict[str, Any],
    out: Path,
    db: Path | str,
    ctx: ToolContext | None = None,
    report: Report | None = None,
) -> list[Path]:
    """Write ``out/charts/*.png`` and ``out/report.html``; return the paths written (the per-day
    numbers are read on ``ctx`` when given, else on a read-only context of its own).

    Pieces that cannot be drawn are left out: no waterfall without both period values, no
    per-day chart for period-label questions or when the database cannot be read. Nothing is
    written through a link (:func:`tasks.outdir.write_file`).
    """
    images: dict[str, bytes] = {}
    notes: list[str] = []
    png = waterfall_png(result)
    if png is not None:
        images[WATERFALL] = png
    try:
        series = daily_series(result, db, ctx=ctx)
    except SqlToolError as exc:
        series = []
        notes.append(f"No per-day chart: the data could not be read ({exc.message}).")
    png = timeseries_png(series, result)
    if png is not None:
        images[TIMESERIES] = png
    written: list[Path] = []
    for name in CHARTS:  # a chart not drawn now is not left from an earlier investigation
        if name not in images:
            remove_file(out, f"charts/{name}")
    for name, data in images.items():
        written.append(write_file(out, f"charts/{name}", data))
    page = render_html(result, images, db=str(db), chart_notes=notes, report=report)
    written.append(write_file(out, "report.html", mask_secrets(page)))
    return written


def charts_markdown(paths: Iterable[Path | str]) -> str:
    """A ``## Charts`` section for report.md linking our chart files (relative links).

    Only our own fixed file names are linked; anything else in ``paths`` is ignored.
    """
    names = {Path(p).name for p in paths if Path(p).parent.name == "charts"}
    lines = [f"![{alt}](charts/{name})" for name, alt in CHARTS.items() if name in names]
    if not lines:
        return ""
    return "\n\n".join(["## Charts", *lines]) + "\n"


_CSS = """
body{font:15px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#222;
 max-width:980px;margin:2em auto;padding:0 1em;background:#fff}
h1{font-size:1.7em;margin-bottom:.3em}h2{margin-top:1.8em;border-bottom:1px solid #e3e6eb;
 padding-bottom:.2em}h3{font-size:1.05em;margin:1.2em 0 .3em}
.headline{font-size:1.15em}.sig{padding:.6em .9em;border-radius:6px;background:#f3f4f7}
.sig.yes{border-left:4px solid #c0392b}.sig.no{border-left:4px solid #8a94a6}
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:.92em}
th,td{border-bottom:1px solid #e3e6eb;padding:.35em .5em;text-align:left;vertical-align:top}
th{background:#f7f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.down{color:#c0392b}.up{color:#1e8449}
.badge{display:inline-block;padding:.05em .55em;border-radius:10px;font-size:.8em;
 font-weight:600;color:#fff;vertical-align:middle}
.confirmed{background:#1e8449}.ruled_out{background:#8a94a6}.inconclusive{background:#b7791f}
.dq{border-left:4px solid #b7791f;background:#fdf6e7;padding:.5em .9em;border-radius:4px}
.dq.error{border-left-color:#c0392b;background:#fbeceb}
.datafirst{border-left:4px solid #b7791f;background:#fdf6e7;padding:.6em .9em;border-radius:6px}
pre{background:#f7f8fa;border:1px solid #e3e6eb;border-radius:4px;padding:.6em;
 white-space:pre-wrap;word-break:break-word;font-size:.82em}
details{margin:.4em 0 1em}summary{cursor:pointer;color:#4a5a78}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #e3e6eb}
figcaption{font-size:.85em;color:#666}.muted{color:#666;font-size:.9em}
"""


def render_html(
    result: dict[str, Any],
    images: dict[str, bytes] | None = None,
    *,
    db: str | None = None,
    chart_notes: Sequence[str] = (),
    report: Report | None = None,
) -> str:
    """The whole report as one standalone HTML page: the report model (the same one report.md
    renders; built from ``result`` unless given) through ``report.html.j2``, plus charts."""
    report = report or build(Explanation.model_validate(result), db)
    notes = [printable_line(n, 400) for n in chart_notes]
    return html(report, images or {}, CHARTS, notes, Markup(CSP), _CSS)
