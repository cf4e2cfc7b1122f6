"""Is a move the data's doing? Root causes and the even shift measured again on clean days.

A segment with no rows on a day it normally has (its collection was down), a period the data
covers only partly, or a day loaded twice moves the metric while nothing happened in the business.
The data-quality checks find those defects; :func:`assign_data_quality` decides which of the
engine's moves they explain, and marks those ``data_quality``:

1. **Days set aside**, per period. For the even shift of everything: days without a single row
   (``missing_days``, or outside the data's range: ``partial_period``) and days whose every row
   was loaded k times (``duplicate_rows``). For a root cause inside a segment that
   ``segment_missing_days`` names: those days, plus every day on which the root cause itself has
   no rows.
2. **The move again, on the clean days only.** With periods of equal length, on the day pairs
   (the same position in each period) that are clean in both, so weekdays still line up;
   otherwise on each period's clean days, scaled to the period's length.
3. **The data's doing** when what is left is at most half of the move *and* within the noise:

   - a root cause: its move beyond the rest of the data (``unexpected``), measured on all days
     and on the clean days from its per-day numbers. The noise is the yardstick that named it:
     its z-score shrinks with what is left, and must fall below the search's bound
     (Bonferroni over the segments searched).
   - the even shift: the move of the data outside the root causes (the whole data when root
     causes overlap), whose daily values on the clean days no longer differ by a t-test (paired
     when the periods have equal length).

The root cause or the shift then gets effect ``data_quality``. Each examined one carries a
:class:`~tasks.engine.result.DataQualityNote` either way: the issue, the days set aside, the move
with and without them, and the SQL of the per-day query the numbers come from.

Days without rows in the whole table understate a total by what they held: when they account
for at least half of its change, the even shift is the data's without a test of what is left,
and when the search named none, one is made of them (:func:`_missing_data`). The days are summed
per unit of the data's grain first (months of monthly data).

Distinct counts over a whole period (no daily grain) cannot be rebuilt from days (a user seen on
two days is one user), so they are not measured again: an even shift there keeps the effect
``data_quality`` whenever days are missing, and root causes keep theirs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

from sql_tools import ToolContext
from sql_tools.output import Quantity
from sql_tools.words import share_of
from tasks.engine import significance as sig
from tasks.engine.distributions import ttest_rel, ttest_welch
from tasks.engine.quality.grain import DAY, Grain, by_unit
from tasks.engine.result import (
    DataQualityIssue,
    DataQualityNote,
    Evidence,
    Segment,
    json_params,
)
from tasks.engine.segment_numbers import daily_series, segment_question
from tasks.engine.spec import Question

MAX_LEFT = 0.5
"""A move is the data's only when at most this share of it is left on the clean days."""
TABLE_KINDS = ("missing_days", "partial_period", "duplicate_rows")
"""Issues that set days aside for the whole table (the even shift)."""
GAP_KINDS = ("missing_days", "partial_period")
"""Issues of days without rows in the whole table."""
NOT_MOST = "do not account for most of the change"
"""The words of the note on days without rows that account for less than half of a change."""


def assign_data_quality(
    ctx: ToolContext,
    q: Question,
    causes: list[Segment],
    global_shift: Segment | None,
    quality: list[DataQualityIssue],
    z_crit: float,
    n_tested: int = 1,
    grain: Grain = DAY,
    totals: tuple[float | None, float | None] | None = None,
    notes: list[str] | None = None,
) -> Segment | None:
    """Mark the root causes and the even shift whose move the data's defects explain; return
    the even shift, a new one (effect ``data_quality``) when the search named none and days
    missing from the whole table account for at least half of a total's change
    (:func:`_missing_data`).

    Args:
        ctx: The sandboxed tool context.
        q: The question (only date periods can be measured by day).
        causes: Root causes (``p_value`` corrected for ``n_tested`` segments); updated in place.
        global_shift: The even shift of everything, if any; updated in place.
        quality: The data-quality issues of this question.
        z_crit: The bound a segment's move had to clear to be named.
        n_tested: The segments searched (the causes' p-values are corrected for them).
        grain: The data's grain: its days are summed per unit (months of monthly data) first.
        totals: The metric's value in each period (what a distinct count's change is told
            from: it cannot be rebuilt from days).
        notes: Where what missing days account for goes when it is less than half the change.
    """
    if not q.periods.by_dates or not quality:
        return global_shift
    table_issues = [
        i for i in quality if i.kind in TABLE_KINDS and (i.kind != "duplicate_rows" or _repeats(i))
    ]
    gaps = [i for i in table_issues if i.kind in GAP_KINDS]
    shift = global_shift if table_issues else None
    missing = shift is None and bool(gaps) and q.metric.kind != "ratio"
    if not _by_day(q):
        if shift is not None and gaps:
            shift.effect = "data_quality"
        elif missing:
            present = _Series.of(ctx, q, {}, grain)
            return _missing_data(q, gaps, present, set(), totals, notes)
        return global_shift
    touched = [(c, _segment_issues(c, quality)) for c in causes]
    touched = [(c, issues) for c, issues in touched if issues]
    if not touched and shift is None and not missing:
        return global_shift
    total = _Series.of(ctx, q, {}, grain)
    repeated = {d for i in table_issues for d in _repeats(i)}
    own: dict[int, _Series] = {}
    for cause, issues in touched:
        own[id(cause)] = _Series.of(ctx, q, cause.segment, grain)
        _judge_cause(q, cause, issues, own[id(cause)], total, repeated, z_crit, n_tested)
    if shift is not None:
        # the even shift is the move of what the root causes leave; overlapping causes cannot
        # be taken out one by one, and then the whole data stands in
        rest = total
        if causes and _disjoint([c.segment for c in causes]):
            for c in causes:
                rest = rest.minus(own.get(id(c)) or _Series.of(ctx, q, c.segment, grain))
        _judge_shift(q, shift, table_issues, rest, repeated, outside=rest is not total)
    elif missing:
        return _missing_data(q, gaps, total, repeated, notes=notes)
    return global_shift


def _by_day(q: Question) -> bool:
    """Whether the metric can be rebuilt from per-day numbers (not a distinct count over a whole
    period: a user seen on two days is one user)."""
    aggs = (q.metric.numerator, q.metric.denominator)
    distinct = any(a is not None and a.fn == "count_distinct" for a in aggs)
    return q.metric.grain == "day" or not distinct


def _segment_issues(cause: Segment, quality: list[DataQualityIssue]) -> list[DataQualityIssue]:
    """The ``segment_missing_days`` issues of segments the root cause lies inside."""
    return [
        i
        for i in quality
        if i.kind == "segment_missing_days" and i.segment and _within(cause.segment, i.segment)
    ]


def _disjoint(segments: list[dict[str, Any]]) -> bool:
    """No two segments share a row: each pair fixes some column to different values."""
    for i, a in enumerate(segments):
        for b in segments[i + 1 :]:
            if not any(k in b and str(b[k]) != str(v) for k, v in a.items()):
                return False
    return True


# --- per-day numbers ----------------------------------------------------------------------------


@dataclass
class _Series:
    """Per-day numerator, denominator and presence of rows, per period (from ``daily_series``)."""

    n: dict[str, np.ndarray]
    d: dict[str, np.ndarray]
    present: dict[str, np.ndarray]
    days: dict[str, list[date]]
    evidence: Evidence
    unit: str = "day"
    """The unit of the data's grain the numbers are summed in (a day, a month ...)."""

    @classmethod
    def of(
        cls,
        ctx: ToolContext,
        q: Question,
        segment: dict[str, Any],
        grain: Grain = DAY,
    ) -> _Series:
        """The per-day numbers of ``segment`` ({} for everything), from the question's stored
        cells when they hold it, else from its query on the source; summed per unit of
        ``grain`` (a day's numbers are its own for daily data)."""
        series, sql, params = daily_series(ctx, segment_question(q, segment), segment)
        which = ("baseline", "comparison")
        units = {
            w: by_unit(grain, s["days"], (s["n"], s["d"]), s["present"])
            for w, s in ((w, series[w]) for w in which)
        }
        return cls(
            n={w: units[w][1][0] for w in which},
            d={w: units[w][1][1] for w in which},
            present={w: units[w][2] for w in which},
            days={w: units[w][0] for w in which},
            evidence=Evidence(
                tool="sql",
                arguments={"check": "per_day", "segment": segment},
                sql=sql,
                params=json_params(params),
            ),
            unit=grain.unit,
        )

    def minus(self, other: _Series) -> _Series:
        """What is left of this series once ``other`` (a part of it) is taken out."""
        w = ("baseline", "comparison")
        return _Series(
            n={k: self.n[k] - other.n[k] for k in w},
            d={k: self.d[k] - other.d[k] for k in w},
            present=self.present,
            days=self.days,
            evidence=self.evidence,
            unit=self.unit,
        )


def _kept(clean: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], bool]:
    """The days to measure on, and whether they pair up: the day pairs (same position in each
    period) clean in both when the periods have equal length, else each period's clean days."""
    b, c = clean["baseline"], clean["comparison"]
    if len(b) == len(c):
        return {"baseline": b & c, "comparison": b & c}, True
    return dict(clean), False


def _every(s: _Series) -> dict[str, np.ndarray]:
    """Every day of each period."""
    return {w: np.ones(len(days), dtype=bool) for w, days in s.days.items()}


def _totals(s: _Series, kept: dict[str, np.ndarray], which: str) -> tuple[float, float]:
    """Numerator and denominator of a period on its kept days, scaled to the period's length."""
    k = kept[which]
    if not k.any():
        return math.nan, math.nan
    scale = len(k) / int(k.sum())
    return float(s.n[which][k].sum()) * scale, float(s.d[which][k].sum()) * scale


def _value(q: Question, n: float, d: float, days: int) -> float:
    """The metric from a period's numerator and denominator."""
    if q.metric.kind == "ratio":
        return n / d if d else math.nan
    return n / days if q.metric.grain == "day" else n


# --- the even shift ------------------------------------------------------------------------------


def _repeats(issue: DataQualityIssue) -> dict[str, int]:
    """Days a ``duplicate_rows`` issue found loaded k times: {day: k}."""
    return dict(issue.details.get("repeated_days") or {})


def _judge_shift(
    q: Question,
    shift: Segment,
    issues: list[DataQualityIssue],
    series: _Series,
    repeated: set[str],
    outside: bool,
) -> None:
    """The even shift: ``series`` (the data outside the root causes when ``outside``) measured
    again on the days with rows in both periods and not loaded k times."""
    clean = {
        w: series.present[w] & ~np.isin([d.isoformat() for d in series.days[w]], list(repeated))
        for w in series.present
    }
    kept, paired = _kept(clean)
    move, left = _relative(q, series, _every(series)), _relative(q, series, kept)
    p = _daily_test(q, series, kept, paired)
    # days without rows understate a total by what they held: when that is most of the move,
    # the move is the data's first even if a smaller move is left beyond the noise
    gaps = any(i.kind in GAP_KINDS for i in issues)
    explained = _explains(move, left) and (gaps or not sig.significant(p))
    shift.effect = "data_quality" if explained else "rate"
    if explained and 0 < left / move:
        # a move left on the clean days is the business's: the shift carries the data's part
        shift.contribution *= 1 - left / move
        shift.share = None if shift.share is None else shift.share * (1 - left / move)
    aside = _aside(series, clean)
    what = "the data outside the root causes" if outside else "the total"
    on = f"the {series.unit} pairs clean in both periods" if paired else "the clean days"
    message = _shift_message(what, aside, repeated, move, left, p, explained, on)
    shift.data_quality = _table_note(issues, message, aside, (move, left, p), explained, series)


def _table_note(
    issues: list[DataQualityIssue],
    message: str,
    aside: dict[str, list[str]],
    moves: tuple[float, float, float | None],
    explained: bool,
    series: _Series,
) -> DataQualityNote:
    """The note of an even move judged on the clean days: ``moves`` is the move in all, on the
    clean days, and the p-value there."""
    move, left, p = moves
    return DataQualityNote(
        kinds=sorted({i.kind for i in issues}),
        message=message,
        days_set_aside=aside,
        move=move,
        move_on_clean_days=left,
        p_value_on_clean_days=p,
        explained=explained,
        evidence=series.evidence,
    )


def _relative(q: Question, s: _Series, kept: dict[str, np.ndarray]) -> float:
    """The metric's relative move on the kept days."""
    vals = []
    for w in ("baseline", "comparison"):
        n, d = _totals(s, kept, w)
        vals.append(_value(q, n, d, len(kept[w])))
    b, c = vals
    return c / b - 1 if b and math.isfinite(b) and math.isfinite(c) else math.nan


def _daily_test(q: Question, s: _Series, kept: dict[str, np.ndarray], paired: bool) -> float | None:
    """p-value of the move of daily values on the kept days (paired when they pair up)."""
    x = {}
    for w in ("baseline", "comparison"):
        k = kept[w]
        n, d = s.n[w][k], s.d[w][k]
        x[w] = n / np.where(d > 0, d, np.nan) if q.metric.kind == "ratio" else n
    b, c = x["baseline"], x["comparison"]
    if paired and len(b) >= 3:
        res = ttest_rel(c, b, omit_nan=True)
    elif len(b) >= 2 and len(c) >= 2:
        res = ttest_welch(c, b, omit_nan=True)
    else:
        return None
    p = float(res.pvalue)
    return p if math.isfinite(p) else None


def _shift_message(
    what: str,
    aside: dict[str, list[str]],
    repeated: set[str],
    move: float,
    left: float,
    p: float | None,
    explained: bool,
    on: str,
) -> str:
    parts = []
    gaps = sorted(d for days in aside.values() for d in days if d not in repeated)
    if gaps:
        parts.append(f"no rows on {_days(gaps)}")
    if repeated:
        parts.append(f"every row loaded more than once on {_days(sorted(repeated))}")
    noise = "" if p is None else f" (p = {p:.2g})"
    if explained and left * move < 0:
        verdict = "the other way: the move is a data problem, not the business"
    elif explained and sig.significant(p):
        verdict = (
            f"still beyond the noise, but the data problem accounts for "
            f"{_pct(1 - left / move, sign=False)} of the move: it is a data problem first"
        )
    elif explained:
        verdict = "within the noise: the move is a data problem, not the business"
    elif sig.significant(p):
        verdict = "still beyond the noise: the move is not only the data problem"
    else:
        verdict = "more than half of it: the data problem does not explain the move"
    return (
        f"The data has {' and '.join(parts)}; {what} moved {_pct(move)} in all and "
        f"{_pct(left)} on {on}{noise}, {verdict}."
    )


# --- days missing from the whole table -----------------------------------------------------------


def _missing_data(
    q: Question,
    issues: list[DataQualityIssue],
    series: _Series,
    repeated: set[str],
    totals: tuple[float | None, float | None] | None = None,
    notes: list[str] | None = None,
) -> Segment | None:
    """The days (units of the data's grain) without rows in the whole table, as the move they
    make in a total: every segment loses them alike, so they are an even move of everything.

    The move is measured again on the days with rows (the day pairs with rows in both periods
    when the periods have equal length, scaled to the period's length); what the missing days
    account for is the move less that. When that is at least half of the move
    (:func:`_explains`; all of it when the move turns the other way), the change is the missing
    data's: an even shift with effect ``data_quality`` is returned, its contribution that part.
    A distinct count (``totals`` given) cannot be rebuilt from days: each period is scaled by
    the share of its days with rows, the most the missing days can move it (every day counting
    alike), and a change that missing data of that size could make cannot be told from it.
    Otherwise None, and ``notes`` gets what the missing days account for.
    """
    which = ("baseline", "comparison")
    clean = {
        w: series.present[w] & ~np.isin([d.isoformat() for d in series.days[w]], list(repeated))
        for w in which
    }
    kept, paired = _kept(clean)
    p = None
    if totals is None:
        b, c = (_value(q, *_totals(series, _every(series), w), len(series.days[w])) for w in which)
        bk, ck = (_value(q, *_totals(series, kept, w), len(kept[w])) for w in which)
        p = _daily_test(q, series, kept, paired)
    else:
        b, c = (math.nan if t is None else float(t) for t in totals)
        bk, ck = (
            v / float(clean[w].mean()) if clean[w].any() else math.nan
            for v, w in ((b, "baseline"), (c, "comparison"))
        )
    if not (b and bk and math.isfinite(b) and math.isfinite(bk) and math.isfinite(c)):
        return None
    move, left = c / b - 1, ck / bk - 1
    # a distinct count's bound says how far the missing days can move it, either way
    bounded = totals is not None and abs(move - left) >= MAX_LEFT * abs(move)
    explained = bounded or _explains(move, left)
    delta = c - b
    part = delta - (ck - bk)
    aside = _aside(series, clean)
    units = {"day": "days"}.get(series.unit, series.unit + "s")
    gone = "; ".join(
        f"the {w} period has no rows on {len(days)} of its {len(series.days[w])} {units} "
        f"({_days(days)})"
        for w, days in aside.items()
        if days
    )
    what = (
        "the distinct count"
        if totals is not None
        else "the mean per day"
        if q.metric.grain == "day"
        else "the total"
    )
    on = f"the {units} with rows"
    if paired:
        on = f"the {series.unit} pairs with rows in both periods"
    noise = "" if p is None else f" (p = {p:.2g})"
    if not explained:
        if notes is not None:
            alike = f"if every {series.unit} counted alike" if totals is not None else f"on {on}"
            notes.append(
                f"{gone[0].upper()}{gone[1:]}; {what} moved {_pct(move)} in all and "
                f"{_pct(left)} {alike}{noise}: the missing {units} {NOT_MOST}, which is not "
                "put down to them."
            )
        return None
    if totals is not None:
        measured = (
            f"{_pct(left)} if every {series.unit} counted alike: the missing {units} can "
            "move it that far, so the change cannot be told from the missing data"
        )
    else:
        changes = Quantity.of([part, delta])
        measured = (
            f"{_pct(left)} on {on}{noise}: the missing {units} account for "
            f"{share_of(part, delta, changes, units=True)}, a data problem, not the business"
        )
    return Segment(
        segment={},
        contribution=part,
        share=part / delta if delta else None,
        unexpected=0.0,
        effect="data_quality",
        p_value=None,
        significant=False,
        data_quality=_table_note(
            issues,
            f"{gone[0].upper()}{gone[1:]}; {what} moved {_pct(move)} in all and {measured}.",
            aside,
            (move, left, p),
            True,
            series,
        ),
    )


# --- root causes ---------------------------------------------------------------------------------


def _within(segment: dict[str, Any], outer: dict[str, Any]) -> bool:
    """``segment`` lies inside ``outer``: it fixes every column ``outer`` fixes, to one value."""
    seg = {k: str(v) for k, v in segment.items()}
    return all(seg.get(k) == str(v) for k, v in outer.items())


def _judge_cause(
    q: Question,
    cause: Segment,
    issues: list[DataQualityIssue],
    seg: _Series,
    total: _Series,
    repeated: set[str],
    z_crit: float,
    n_tested: int = 1,
) -> None:
    """A root cause inside a segment with missing days: its move beyond the rest of the data,
    measured again on the days it has rows in both periods."""
    clean = {
        w: total.present[w]
        & seg.present[w]
        & ~np.isin([d.isoformat() for d in total.days[w]], list(repeated))
        for w in total.present
    }
    kept, _ = _kept(clean)
    every = _every(total)
    rest = total.minus(seg)
    beyond, beyond_clean = _unexpected(q, seg, rest, every), _unexpected(q, seg, rest, kept)
    aside = _aside(total, {w: clean[w] | ~total.present[w] for w in clean})
    if not (aside["baseline"] or aside["comparison"]) or not math.isfinite(beyond) or not beyond:
        return
    share_left = beyond_clean / beyond if math.isfinite(beyond_clean) else math.nan
    z = sig.z_of_adjusted(cause.p_value or 0.0, n_tested)
    z_left = z * abs(share_left) if math.isfinite(share_left) else math.inf
    explained = _explains(beyond, beyond_clean) and z_left < z_crit
    if explained:
        cause.effect = "data_quality"
    move, left = _relative(q, seg, every), _relative(q, seg, kept)
    cause.data_quality = DataQualityNote(
        kinds=sorted({i.kind for i in issues}),
        issues=[i.message for i in issues],
        message=_cause_message(cause, aside, move, left, share_left, explained, z_left >= z_crit),
        days_set_aside=aside,
        move=move,
        move_on_clean_days=left,
        unexpected=beyond,
        unexpected_on_clean_days=beyond_clean,
        z_on_clean_days=z_left if math.isfinite(z_left) else None,
        explained=explained,
        evidence=seg.evidence,
    )


def _unexpected(q: Question, seg: _Series, rest: _Series, kept: dict[str, np.ndarray]) -> float:
    """The segment's move beyond what the rest of the data did, on the kept days (the engine's
    ``unexpected``: for a ratio, the excess of its own ratio's move plus its mix part)."""
    (sb, sdb), (sc, sdc) = _totals(seg, kept, "baseline"), _totals(seg, kept, "comparison")
    (rb, rdb), (rc, rdc) = _totals(rest, kept, "baseline"), _totals(rest, kept, "comparison")
    if q.metric.kind != "ratio":
        return (sc - sb) - sb * (rc / rb - 1) if rb else math.nan
    if not (sdb and sdc and rdb and rdc):
        return math.nan
    tb, tc = (sb + rb) / (sdb + rdb), (sc + rc) / (sdc + rdc)
    shb, shc = sdb / (sdb + rdb), sdc / (sdc + rdc)
    own_b, own_c = sb / sdb, sc / sdc
    rest_move = rc / rdc - rb / rdb
    mix = (shc - shb) * ((own_b + own_c) / 2 - (tb + tc) / 2)
    return (own_c - own_b - rest_move) * (shb + shc) / 2 + mix


def _aside(total: _Series, clean: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """The days not clean in each period, as ISO dates."""
    return {
        w: [d.isoformat() for d, ok in zip(total.days[w], clean[w], strict=True) if not ok]
        for w in clean
    }


def _cause_message(
    cause: Segment,
    aside: dict[str, list[str]],
    move: float,
    left: float,
    share_left: float,
    explained: bool,
    beyond_noise: bool,
) -> str:
    name = ", ".join(f"{k} = {v}" for k, v in cause.segment.items())
    gaps = "; ".join(f"no rows on {_days(days)} ({which})" for which, days in aside.items() if days)
    gone = 1 - share_left
    part = (
        f"the missing data is {_pct(gone, sign=False)} of its move beyond the rest of the data"
        if math.isfinite(gone) and gone >= 0.05
        else "the missing data explains almost none of its move beyond the rest of the data"
    )
    if explained:
        tail = "within the noise: its move is a data problem, not the business"
    elif beyond_noise:
        tail = "still beyond the noise: its move is not only the missing data"
    else:
        tail = "more than half of its move is left: it is not put down to the missing data"
    return (
        f"{name} has {gaps}; it moved {_pct(move)} in all and {_pct(left)} on the days it has "
        f"in both periods ({part}), {tail}."
    )


def _explains(move: float, left: float) -> bool:
    """Whether at most :data:`MAX_LEFT` of ``move`` is left, in its direction: what the data
    problem accounts for (``move - left``) is at least the rest of it. A move that turns the
    other way on the clean days is all the data's."""
    return math.isfinite(move) and move != 0 and math.isfinite(left) and left / move <= MAX_LEFT


def _days(days: list[str]) -> str:
    shown = ", ".join(days[:10])
    return shown + (f" and {len(days) - 10} more" if len(days) > 10 else "")


def _pct(x: float, sign: bool = True) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{100 * x:+.1f}%" if sign else f"{100 * x:.0f}%"
