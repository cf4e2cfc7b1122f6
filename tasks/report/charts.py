"""Charts for the report: the contribution waterfall and the per-day lines.

The per-day numbers come only through the read-only SQL tools (``metric_aggregate``); nothing here
writes SQL. Drawing uses matplotlib's object API on the Agg canvas: no pyplot, so no display, no
global backend switch and no figure registry to leak. matplotlib is imported inside the drawing
functions, so importing this module stays cheap.

Text from the data (segment values, column names) is drawn as plain text: mathtext (``$...$``) is
off, and control, zero-width and direction characters are drawn as escapes (``Wid\\u200bget``).

Here: both charts and what they share, the figure setup, the text escaping, the colour and
number rules and the per-day query.
"""

from __future__ import annotations

import math
import textwrap
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import date, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

from sql_tools import ToolContext
from sql_tools.output import Figures, Quantity, finite, percent
from sql_tools.output import printable_line as plain
from sql_tools.registry import SQL_TOOLS as registry

WATERFALL = "waterfall.png"
TIMESERIES = "timeseries.png"
MAX_BARS = 8
"""Root causes drawn as their own bar in the waterfall; the rest join "everything else"."""
TOP_SERIES = 3
MAX_DAYS = 400
"""Longest period (days) drawn per day; longer questions get no per-day chart."""
MAX_TIMESTAMP_DAYS = 120
"""Timestamp time columns take one tool call per day, so their periods are capped lower."""

_DOWN, _UP, _TOTAL = "#c0392b", "#1e8449", "#4a5a78"
_DOWN_SOFT, _UP_SOFT = "#e8a49c", "#9fd3b0"
_BEFORE_LINE, _GRID, _TEXT = "#8a94a6", "#e3e6eb", "#222222"
_DPI = 110
_PNG_METADATA: dict[str, str | None] = {"Software": None}


# --- per-day numbers, through the SQL tools ------------------------------------------------------


@dataclass(frozen=True)
class Period:
    """One period's days and, per day, the metric's numerator (and denominator for ratios)."""

    label: str
    days: list[date]
    numerator: list[float]
    denominator: list[float] | None = None
    present: list[bool] | None = None
    """Per day, whether any row was there (a day without rows is drawn as a hollow zero)."""

    @property
    def values(self) -> list[float | None]:
        """The metric per day (None where a ratio's denominator is zero)."""
        if self.denominator is None:
            return list(self.numerator)
        return [n / d if d else None for n, d in zip(self.numerator, self.denominator, strict=True)]


@dataclass(frozen=True)
class DailySeries:
    """The metric per day in both periods, for everything (``segment == {}``) or one segment."""

    label: str
    segment: dict[str, Any]
    kind: str
    grain: str | None
    baseline: Period
    comparison: Period
    additive: bool = True
    """Whether the days add back up to the period's value: False for a distinct count (alone or
    in a ratio) without a daily grain, since one value can appear on several days."""

    def period_value(self, which: str) -> float | None:
        """The period's metric recomputed from its days, as the engine defines it; None when the
        days cannot rebuild it (see ``additive``).

        Sums and counts add up over days; ratios are total numerator over total denominator;
        a daily-grain metric is the average day.
        """
        if not self.additive:
            return None
        p: Period = getattr(self, which)
        n = math.fsum(p.numerator)
        if p.denominator is not None:
            d = math.fsum(p.denominator)
            return n / d if d else None
        if self.grain == "day":
            return n / len(p.days) if p.days else None
        return n


@dataclass(frozen=True)
class _Shape:
    """The question's date-range shape, read from an engine evidence call."""

    table: str
    time_column: str
    baseline: tuple[date, date]
    comparison: tuple[date, date]


def question_shape(result: dict[str, Any]) -> _Shape | None:
    """The table, time column and periods when the question compares date ranges, else None.

    Read from the engine's own evidence calls (root causes first), accepted only when their
    periods are exactly the result's baseline and comparison.
    """
    candidates: list[dict[str, Any]] = []
    for key in ("root_causes", "drivers", "offsetting"):
        candidates += [s.get("evidence") or {} for s in result.get(key) or []]
    if result.get("global_shift"):
        candidates.append(result["global_shift"].get("evidence") or {})
    for h in result.get("hypotheses") or []:
        candidates += list(h.get("evidence") or [])
    table = (result.get("metric") or {}).get("table")
    labels = (
        (result.get("baseline") or {}).get("label"),
        (result.get("comparison") or {}).get("label"),
    )
    for ev in candidates:
        args = ev.get("arguments") or {}
        try:
            b = (
                date.fromisoformat(args["baseline"]["start"]),
                date.fromisoformat(args["baseline"]["end"]),
            )
            c = (
                date.fromisoformat(args["comparison"]["start"]),
                date.fromisoformat(args["comparison"]["end"]),
            )
        except (KeyError, TypeError, ValueError):
            continue
        time_column = args.get("time_column")
        if not isinstance(time_column, str) or args.get("table") != table:
            continue
        if (f"{b[0]}..{b[1]}", f"{c[0]}..{c[1]}") != labels or b[1] < b[0] or c[1] < c[0]:
            continue
        return _Shape(table, time_column, b, c)
    return None


def _measures(
    ctx: ToolContext, result: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The metric as ``metric_aggregate`` measures: numerator, and denominator for a ratio."""
    from tasks.engine.parse import parse_metric

    m = result["metric"]
    metric = parse_metric(m["expression"], ctx.schema, m["table"])

    def measure(agg: str, column: str | None) -> dict[str, Any]:
        return {"agg": agg} if column is None else {"agg": agg, "column": column}

    num, den = metric.numerator, metric.denominator
    if num.fn == "avg":
        return measure("sum", num.column), measure("count", num.column)
    return measure(num.fn, num.column), (measure(den.fn, den.column) if den else None)


def _label(m: dict[str, Any]) -> str:
    return m["agg"] if "column" not in m else f"{m['agg']}_{m['column']}"


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


class _DayQuery:
    """Per-day numerator/denominator of one filtered population over one period."""

    def __init__(self, ctx: ToolContext, result: dict[str, Any], shape: _Shape) -> None:
        self.ctx = ctx
        self.shape = shape
        self.num, self.den = _measures(ctx, result)
        rows = {"agg": "count"}
        self.measures = [self.num] + ([self.den] if self.den and self.den != self.num else [])
        self.measures += [rows] if rows not in self.measures else []
        col = ctx.schema.column(shape.table, shape.time_column, field_name="time_column")
        self.timestamp = col.kind == "timestamp"
        self.distinct = any(m["agg"] == "count_distinct" for m in (self.num, self.den) if m)

    def period(self, label: str, span: tuple[date, date], filters: list[dict[str, Any]]) -> Period:
        days = _days(*span)
        got = self._by_day(days, filters)
        zero = {_label(m): 0.0 for m in self.measures}
        rows = [got.get(d, zero) for d in days]
        num = [float(r[_label(self.num)] or 0.0) for r in rows]
        den = [float(r[_label(self.den)] or 0.0) for r in rows] if self.den else None
        return Period(label, days, num, den, present=[bool(r["count"]) for r in rows])

    def _by_day(
        self, days: list[date], filters: list[dict[str, Any]]
    ) -> dict[date, dict[str, Any]]:
        tc = self.shape.time_column
        if not self.timestamp:
            rng = {
                "column": tc,
                "op": "between",
                "value": [days[0].isoformat(), days[-1].isoformat()],
            }
            out = self._call([*filters, rng], group_by=[tc], limit=len(days))
            return {date.fromisoformat(str(r[tc])[:10]): r for r in out.rows if r[tc] is not None}
        got: dict[date, dict[str, Any]] = {}
        for d in days:
            rng = [
                {"column": tc, "op": ">=", "value": d.isoformat()},
                {"column": tc, "op": "<", "value": (d + timedelta(days=1)).isoformat()},
            ]
            out = self._call([*filters, *rng], group_by=[], limit=1)
            if out.rows:
                got[d] = out.rows[0]
        return got

    def _call(self, filters: list[dict[str, Any]], *, group_by: list[str], limit: int) -> Any:
        args: dict[str, Any] = {
            "table": self.shape.table,
            "measures": self.measures,
            "group_by": group_by,
            "filters": filters,
            "limit": limit,
        }
        if group_by:
            args["order_by"] = {"by": group_by[0], "direction": "asc"}
        return registry.call(self.ctx, "metric_aggregate", args)


def _segment_filters(
    seg: dict[str, Any], evidence: dict[str, Any] | None, base: list[Any]
) -> list[Any]:
    """The segment's filters: its evidence call's (metric filters included), else rebuilt."""
    filters = ((evidence or {}).get("arguments") or {}).get("filters")
    if isinstance(filters, list):
        return filters
    return [*base] + [
        {"column": k, "op": "is_null"} if v is None else {"column": k, "op": "=", "value": v}
        for k, v in seg.items()
    ]


def top_root_causes(result: dict[str, Any], n: int = TOP_SERIES) -> list[dict[str, Any]]:
    """The ``n`` root causes with the largest contribution (either direction)."""
    causes = list(result.get("root_causes") or [])
    return sorted(causes, key=lambda s: -abs(s.get("contribution") or 0.0))[:n]


def daily_series(
    result: dict[str, Any],
    db: Path | str,
    *,
    top: int = TOP_SERIES,
    ctx: ToolContext | None = None,
) -> list[DailySeries]:
    """The metric per day for everything and the top root causes, both periods (on ``ctx``
    when given, else on a read-only context of its own).

    Empty when the question compares period labels rather than date ranges, or when a period is
    longer than the chart can show. Every number comes from a ``metric_aggregate`` call.

    Raises:
        SqlToolError: The database cannot be opened or a tool call is refused.
    """
    shape = question_shape(result)
    if shape is None:
        return []
    longest = max((s[1] - s[0]).days + 1 for s in (shape.baseline, shape.comparison))
    with nullcontext(ctx) if ctx is not None else ToolContext(db) as ctx:
        q = _DayQuery(ctx, result, shape)
        if longest > (MAX_TIMESTAMP_DAYS if q.timestamp else MAX_DAYS):
            return []
        m = result["metric"]
        base = list(m.get("filters") or [])
        wanted: list[tuple[str, dict[str, Any], list[Any]]] = [("Everything", {}, base)]
        for rc in top_root_causes(result, top):
            seg = rc.get("segment") or {}
            wanted.append(
                (segment_label(seg), seg, _segment_filters(seg, rc.get("evidence"), base))
            )
        labels = (result["baseline"]["label"], result["comparison"]["label"])
        return [
            DailySeries(
                label=label,
                segment=seg,
                kind=m.get("kind", "additive"),
                grain=m.get("grain"),
                baseline=q.period(labels[0], shape.baseline, filters),
                comparison=q.period(labels[1], shape.comparison, filters),
                additive=m.get("grain") == "day" or not q.distinct,
            )
            for label, seg, filters in wanted
        ]


# --- drawing -------------------------------------------------------------------------------------


def segment_label(seg: dict[str, Any]) -> str:
    """``platform = ios, app_version = 5.2`` as plain text (``Everything`` for ``{}``)."""
    if not seg:
        return "Everything"
    return ", ".join(f"{plain(k, 40)} = {plain(v, 40)}" for k, v in seg.items())


_DRAWING = threading.Lock()
"""matplotlib's settings and Python's warning filters are the process's, and setting them for a
while is not safe across threads: investigations running at once in one process (the weekly
review's metrics) draw one chart at a time."""


@contextmanager
def _canvas() -> Iterator[Any]:
    """matplotlib settings for our charts: plain text (no mathtext), fixed font, no warnings
    for glyphs the font lacks (data text may hold any character)."""
    import matplotlib

    with _DRAWING, warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"(?s).*[Gg]lyph.*missing from", category=UserWarning
        )
        with matplotlib.rc_context(
            {
                "text.parse_math": False,
                "text.usetex": False,
                "font.family": "DejaVu Sans",
                "font.size": 10,
                "axes.edgecolor": "#9aa3b2",
                "axes.labelcolor": _TEXT,
                "xtick.color": "#555555",
                "ytick.color": "#555555",
                "axes.spines.top": False,
                "axes.spines.right": False,
            }
        ):
            yield matplotlib


def _png(fig: Any) -> bytes:
    """The figure as PNG bytes, with no software/time metadata (same input, same bytes)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata=_PNG_METADATA, facecolor="white")
    return buf.getvalue()


def compact(x: float, step: float) -> str:
    """A tick label short enough not to run into its neighbours: ``495M``, ``1.25K``, ``0.05``;
    as many decimals as the tick ``step`` needs at that scale."""
    if x == 0:
        return "0"
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= size or (step >= size and abs(x) >= size / 10):
            return f"{x / size:.{_places(step / size)}f}{suffix}"
    return f"{x:,.{_places(step, 6)}f}"


def _places(step: float, most: int = 3) -> int:
    """The decimals that show a tick step exactly (2.5 needs one), at most ``most``."""
    for places in range(most):
        scaled = step * 10**places
        if abs(scaled - round(scaled)) < 1e-6 * max(1.0, abs(scaled)):
            return places
    return most


def _number_axis(axis: Any) -> None:
    """Compact tick labels (``495M``, ``12.5K``) with only as many decimals as the ticks need."""
    from matplotlib.ticker import FuncFormatter

    def label(x: float, _pos: int | None) -> str:
        ticks = [t for t in axis.get_majorticklocs() if math.isfinite(t)]
        step = min(
            (abs(b - a) for a, b in zip(ticks, ticks[1:], strict=False) if b != a), default=1
        )
        return compact(x, step)

    axis.set_major_formatter(FuncFormatter(label))


def _wrap(text: str, width: int = 28, lines: int = 2) -> str:
    return "\n".join(textwrap.wrap(text, width, max_lines=lines, placeholder=" …")) or text


@dataclass(frozen=True)
class Bar:
    """One waterfall bar: a period total (drawn from the axis floor) or a step of the change."""

    name: str
    """What the bar is: ``Before``, a segment (``platform = ios``), ``Everything else``,
    ``Change`` or ``After``."""
    start: float
    end: float
    color: str
    note: str
    """The number printed next to the bar."""
    label: str = ""
    """The axis label (the name, wrapped, with the period for totals)."""
    total: bool = False

    @property
    def value(self) -> float:
        """The bar's size: the total, or the step's signed contribution."""
        return self.end - self.start


def waterfall_bars(result: dict[str, Any]) -> list[Bar] | None:
    """The waterfall's bars, top to bottom; None without both period values.

    Before, each root cause's contribution (in the engine's order, at most ``MAX_BARS``),
    everything else (the rest of the change, including an even shift), After.
    Without root causes: Before, Change, After.
    """
    before = (result.get("baseline") or {}).get("value")
    after = (result.get("comparison") or {}).get("value")
    if not finite(before) or not finite(after):
        return None
    change = after - before
    bl = plain(result["baseline"].get("label"), 40)
    cl = plain(result["comparison"].get("label"), 40)
    causes = [rc for rc in result.get("root_causes") or [] if finite(rc.get("contribution"))]
    shown = causes[:MAX_BARS]
    # the report's formats: a figure reads the same in the chart as in the tables
    f = Figures.of(result)
    values, changes = f.values, f.changes
    bars = [Bar("Before", 0.0, before, _TOTAL, values.value(before), f"Before\n{bl}", total=True)]
    running = before
    if not shown:
        note = f"{changes.change(change)} ({percent(_rel(result))})"
        bars.append(Bar("Change", before, after, _DOWN if change < 0 else _UP, note, "Change"))
    for rc in shown:
        c = float(rc["contribution"])
        note = changes.change(c) + _share_note(f, c, rc.get("share"))
        name = segment_label(rc.get("segment") or {})
        bars.append(Bar(name, running, running + c, _DOWN if c < 0 else _UP, note, _wrap(name)))
        running += c
    if shown:
        rest = after - running
        label = "Everything else"
        if result.get("global_shift"):
            label += "\n(incl. an even shift)"
        if len(causes) > len(shown):
            label += f"\n(incl. {len(causes) - len(shown)} more root causes)"
        color = _DOWN_SOFT if rest < 0 else _UP_SOFT
        bars.append(Bar("Everything else", running, after, color, changes.change(rest), label))
    note = f"{values.value(after)} ({percent(_rel(result))})"
    bars.append(Bar("After", 0.0, after, _TOTAL, note, f"After\n{cl}", total=True))
    return bars


def _share_note(f: Figures, contribution: float, share: Any) -> str:
    """A cause's share as its table row says it: of the change, or of all movement when
    opposite moves hide in the net change."""
    if f.gross:
        return f" ({percent(contribution / f.gross)} of all movement)"
    return f" ({percent(share, sign=False)} of the change)" if finite(share) else ""


def _rel(result: dict[str, Any]) -> float | None:
    return (result.get("change") or {}).get("relative")


def _floor(bars: list[Bar], significant: bool) -> tuple[float, bool]:
    """Where the total bars start, and whether that is not zero.

    Zero, unless a significant change would be too thin to see from zero (under a fifth of the
    larger total): then the axis is cut just beyond the smallest value, and says so. A change
    within the noise is always drawn from zero, so it looks as small as it is.
    """
    ends = [v for b in bars for v in (b.start, b.end) if not (b.total and v == 0.0)]
    lo, hi = min(ends), max(ends)
    if not significant or lo <= 0 <= hi:
        return 0.0, False
    near, far = sorted((abs(lo), abs(hi)))
    if (far - near) / far >= 0.2:
        return 0.0, False
    pad = 0.6 * ((far - near) or far)
    return (lo - pad, True) if lo > 0 else (hi + pad, True)


def waterfall_png(result: dict[str, Any]) -> bytes | None:
    """Baseline total, each root cause's contribution, everything else, comparison total.

    None when either period's value is missing (the chart would have nothing to stand on).
    """
    bars = waterfall_bars(result)
    if bars is None:
        return None
    floor, zoomed = _floor(bars, bool((result.get("change") or {}).get("significant")))
    name = plain((result.get("metric") or {}).get("name") or result["metric"]["expression"], 60)
    c = result.get("change") or {}
    moved = f"{Figures.of(result).changes.change(c.get('absolute'))} ({percent(c.get('relative'))})"
    if c.get("significant"):
        headline = f"Why {name} moved: {moved}"
    elif c.get("noise_unjudged"):
        headline = f"{name} moved {moved}: the noise cannot be judged"
    else:
        headline = f"{name} moved {moved}: within the normal noise"
    with _canvas():
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.5, 1.9 + 0.62 * len(bars)), layout="constrained")
        ax = fig.add_subplot()
        ys = list(range(len(bars)))[::-1]
        drawn = [(floor if b.total else b.start, b.end) for b in bars]
        lo = min(floor, *(min(d) for d in drawn))
        hi = max(max(d) for d in drawn)
        for y, b, (start, end) in zip(ys, bars, drawn, strict=True):
            ax.barh(y, end - start, left=start, color=b.color, height=0.6, zorder=3)
            ax.text(
                max(start, end) + (hi - lo) * 0.01,
                y,
                b.note,
                va="center",
                ha="left",
                fontsize=9,
                color=_TEXT,
                fontweight="bold" if b.total else "normal",
            )
        for (y0, b0), y1 in zip(zip(ys, bars, strict=True), ys[1:], strict=False):
            ax.plot(
                [b0.end, b0.end], [y0 - 0.3, y1 + 0.3], color="#9aa3b2", lw=0.8, ls=":", zorder=2
            )
        ax.set_yticks(ys, labels=[b.label for b in bars])
        ax.set_xlim(lo, hi + (hi - lo) * 0.32)
        ax.xaxis.grid(True, color=_GRID, zorder=0)
        if lo < 0 < hi:
            ax.axvline(0, color="#9aa3b2", lw=0.8)
        _number_axis(ax.xaxis)
        ax.set_xlabel(name + (" (axis does not start at zero)" if zoomed else ""))
        fig.suptitle(
            headline,
            x=0.01,
            ha="left",
            fontsize=13,
            fontweight="bold",
        )
        ax.set_title(
            _waterfall_caption(result),
            loc="left",
            fontsize=8.5,
            color="#555555",
        )
        return _png(fig)


def _waterfall_caption(result: dict[str, Any]) -> str:
    if result.get("root_causes"):
        return (
            "Red bars pulled the metric down, green bars pushed it up;\n"
            '"everything else" is the part of the change no named segment explains.'
        )
    if (result.get("change") or {}).get("significant"):
        return "No single segment stands out: the change is spread across the data."
    if (result.get("change") or {}).get("noise_unjudged"):
        return "The noise cannot be judged from these data, so no segment is named."
    return "The change is within the normal noise, so no segment is named."


def _positions(s: DailySeries) -> tuple[list[int], list[int], bool]:
    """x positions: the baseline's days, then the comparison's (one slot apart if not adjacent)."""
    b, c = s.baseline.days, s.comparison.days
    adjacent = b[-1] + timedelta(days=1) == c[0]
    first_c = len(b) + (0 if adjacent else 1)
    return list(range(len(b))), list(range(first_c, first_c + len(c))), adjacent


def _ticks(s: DailySeries) -> tuple[list[int], list[str]]:
    xb, xc, _ = _positions(s)
    pos = [*xb, *xc]
    days = [*s.baseline.days, *s.comparison.days]
    step = max(1, math.ceil(len(days) / 14))
    picked = list(range(0, len(days), step))
    return [pos[i] for i in picked], [f"{days[i]:%b} {days[i].day}" for i in picked]


def timeseries_png(series: list[DailySeries], result: dict[str, Any]) -> bytes | None:
    """One panel per series (everything, then the top root causes): the metric per day, the
    baseline period in grey, the comparison period in the direction's colour, the boundary marked
    and each period's level as a dotted line."""
    if not series:
        return None
    name = plain((result.get("metric") or {}).get("name") or result["metric"]["expression"], 60)
    per_day = "per day" if result["metric"].get("kind") != "ratio" else "by day"
    with _canvas():
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.5, 0.9 + 2.3 * len(series)), layout="constrained")
        axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
        values = Figures.of(result).values
        for ax, s in zip(axes, series, strict=True):
            _panel(ax, s, name, values)
        ticks, labels = _ticks(series[0])
        axes[-1].set_xticks(ticks, labels=labels, rotation=0, fontsize=8)
        fig.suptitle(f"{name} {per_day}: before vs after", x=0.01, ha="left", fontweight="bold")
        level = (
            "period value"
            if series[0].kind == "ratio" or series[0].grain == "day"
            else "average per day"
        )
        handles, texts = axes[0].get_legend_handles_labels()
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=_BEFORE_LINE, ls=":", lw=1.2))
        texts.append(f"dotted: {level}")
        if any(not all(p.present or []) for s in series for p in (s.baseline, s.comparison)):
            hollow = Line2D([], [], color=_BEFORE_LINE, marker="o", ms=5, ls="", mfc="white")
            handles.append(hollow)
            texts.append("hollow: no rows that day")
        ncols = len(handles)
        fig.legend(
            handles, texts, loc="outside lower center", ncols=ncols, fontsize=8, frameon=False
        )
        return _png(fig)


def _panel(ax: Any, s: DailySeries, name: str, values: Quantity) -> None:
    xb, xc, adjacent = _positions(s)
    before, after = s.period_value("baseline"), s.period_value("comparison")
    vb, vc = s.baseline.values, s.comparison.values
    if s.kind == "ratio" or s.grain == "day":
        level_b, level_c = before, after  # the period's own value is its level
    else:
        level_b, level_c = _mean(vb), _mean(vc)  # the average day
    color = _TOTAL
    if level_b is not None and level_c is not None and level_c != level_b:
        color = _DOWN if level_c < level_b else _UP
    b_label, c_label = plain(s.baseline.label, 30), plain(s.comparison.label, 30)
    ax.plot(xb, _nan(vb), color=_BEFORE_LINE, lw=2, marker="o", ms=3, label=f"Before ({b_label})")
    ax.plot(xc, _nan(vc), color=color, lw=2, marker="o", ms=3, label=f"After ({c_label})")
    for xs, p, c in ((xb, s.baseline, _BEFORE_LINE), (xc, s.comparison, color)):
        empty = [
            (x, v) for x, v, here in zip(xs, p.values, p.present or [], strict=False) if not here
        ]
        if empty:
            ex, ey = zip(*empty, strict=True)
            ax.plot(ex, _nan(list(ey)), ls="", marker="o", ms=5, mfc="white", mec=c, zorder=4)
    for xs, level, c in ((xb, level_b, _BEFORE_LINE), (xc, level_c, color)):
        if level is not None:
            ax.hlines(level, xs[0] - 0.3, xs[-1] + 0.3, colors=c, linestyles=":", lw=1.2)
    boundary = (xb[-1] + xc[0]) / 2
    ax.axvspan(boundary, xc[-1] + 0.5, color="#f3f4f7", zorder=0)
    ax.axvline(boundary, color="#6b7280", lw=1, ls="--")
    if not adjacent:
        ax.text(
            boundary,
            0.98,
            "gap",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=7,
            color="#6b7280",
            backgroundcolor="white",
        )
    ax.set_title(panel_title(s.label, before, after, values), loc="left", fontsize=10)
    ax.set_ylabel(name, fontsize=8)
    ax.yaxis.grid(True, color=_GRID)
    _number_axis(ax.yaxis)
    ax.set_xlim(-0.5, xc[-1] + 0.5)
    if min([v for v in (*vb, *vc) if v is not None] or [0.0]) >= 0:
        ax.set_ylim(bottom=0)


def panel_title(label: str, before: float | None, after: float | None, values: Quantity) -> str:
    """A day chart's title: the series and its two period values, printed as the report's
    tables print the metric (``12,761.10 → 10,011.48``, not ``12,761 → 10,011``)."""
    title = _wrap(label, 90, 1)
    if before is not None and after is not None:
        rel = (after - before) / abs(before) if before else None
        title += f":  {values.value(before)} → {values.value(after)} ({percent(rel)})"
    return title


def _nan(values: list[float | None]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _mean(values: list[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return math.fsum(vs) / len(vs) if vs else None
