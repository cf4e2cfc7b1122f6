"""What the search's picks become in the answer: each segment's contribution to the change
(Shapley rate and mix parts for a ratio), its effect and its reported figures; the mix causes of
a ratio; one name for segments that cover the same rows; the drivers and offsetting segments;
and the even shift the named segments leave over."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sql_tools.output import Quantity, percent
from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.result import Segment
from tasks.engine.search import (
    Search,
    SearchOptions,
    additive_leaves,
    ancestors,
    descendants,
    search,
)
from tasks.engine.select import choose
from tasks.engine.spec import Question

MAX_DRIVERS = 15
MAX_MOVERS = 5
"""Largest moves listed when the noise cannot be judged (``Explanation.movers``)."""


def _finite(t: dict[str, float | None]) -> bool:
    return all(v is not None and math.isfinite(v) for v in (t["baseline"], t["comparison"]))


def _contributions(cube: Cube, kind: str) -> dict[str, np.ndarray]:
    """Each segment's contribution to the total change (Shapley rate/mix for ratios)."""
    s = cube.seg
    t = cube.total
    if kind != "ratio":
        delta = s["nc"] - s["nb"]
        rest_b = t["nb"] - s["nb"]
        rest_c = t["nc"] - s["nc"]
        rest_rate = np.where(rest_b > 0, rest_c / np.where(rest_b > 0, rest_b, 1.0) - 1.0, 0.0)
        return {
            "contribution": delta,
            "unexpected": delta - s["nb"] * rest_rate,
            "baseline": s["nb"],
            "comparison": s["nc"],
            "rate": delta,
            "mix": np.zeros_like(delta),
        }
    Rb = t["nb"] / t["db"] if t["db"] else 0.0
    Rc = t["nc"] / t["dc"] if t["dc"] else 0.0
    sb = s["db"] / t["db"] if t["db"] else np.zeros_like(s["db"])
    sc = s["dc"] / t["dc"] if t["dc"] else np.zeros_like(s["dc"])
    rb = np.where(s["db"] > 0, s["nb"] / np.where(s["db"] > 0, s["db"], 1.0), np.nan)
    rc = np.where(s["dc"] > 0, s["nc"] / np.where(s["dc"] > 0, s["dc"], 1.0), np.nan)
    # a segment absent in one period has no own ratio there: its rate part is zero
    rb_f = np.where(np.isnan(rb), rc, rb)
    rc_f = np.where(np.isnan(rc), rb, rc)
    rb_f, rc_f = np.nan_to_num(rb_f), np.nan_to_num(rc_f)
    rate = (rc_f - rb_f) * (sb + sc) / 2
    mix = (sc - sb) * ((rb_f + rc_f) / 2 - (Rb + Rc) / 2)
    # rest-of-population ratio change, to say how much a segment's own ratio moved beyond it
    rest_nb, rest_db = t["nb"] - s["nb"], t["db"] - s["db"]
    rest_nc, rest_dc = t["nc"] - s["nc"], t["dc"] - s["dc"]
    with np.errstate(divide="ignore", invalid="ignore"):
        rest_change = np.where(
            (rest_db > 0) & (rest_dc > 0), rest_nc / rest_dc - rest_nb / rest_db, 0.0
        )
    unexpected = (rc_f - rb_f - rest_change) * (sb + sc) / 2 + mix
    return {
        "contribution": rate + mix,
        "unexpected": unexpected,
        "baseline": rb,
        "comparison": rc,
        "rate": rate,
        "mix": mix,
    }


def _effect(cube: Cube, i: int, contrib: dict[str, np.ndarray], kind: str) -> str:
    s = cube.seg
    if s["rowsb"][i] == 0 and s["rowsc"][i] > 0:
        return "new"
    if s["rowsc"][i] == 0 and s["rowsb"][i] > 0:
        return "gone"
    if kind == "ratio" and abs(contrib["mix"][i]) > abs(contrib["rate"][i]):
        return "mix"
    return "rate"


def _segment(cube: Cube, contrib: dict[str, np.ndarray], i: int, p: float) -> Segment:
    kind = "ratio" if np.any(contrib["mix"]) else "additive"
    return Segment(
        segment=cube.segment_dict(i),
        baseline=_num(contrib["baseline"][i]),
        comparison=_num(contrib["comparison"][i]),
        contribution=float(contrib["contribution"][i]),
        unexpected=_num(contrib["unexpected"][i]),
        rate=_num(contrib["rate"][i]) if kind == "ratio" else None,
        mix=_num(contrib["mix"][i]) if kind == "ratio" else None,
        effect=_effect(cube, i, contrib, kind),  # type: ignore[arg-type]
        p_value=p,
        significant=sig.significant(p),
        baseline_volume=float(cube.seg["rowsb"][i]),
        comparison_volume=float(cube.seg["rowsc"][i]),
    )


def _num(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _with_mix(
    cube: Cube,
    q: Question,
    contrib: dict[str, np.ndarray],
    causes: list[Segment],
    eligible: np.ndarray,
    totals: dict[str, float | None],
    days: tuple[float, float] | None = None,
) -> list[Segment]:
    """Ratio metrics: add the segments whose share of the denominator moved and carried the
    change (mix causes).

    Which segments' volume moved is itself a story, chosen by weighing whole explanations
    (:func:`tasks.engine.select.choose` over the denominator's leaves, an even growth of
    everything allowed): a channel whose sessions tripled is one segment of that story, not its
    slices by plan or platform. A segment of the volume story is a mix cause when the mix part
    of its contribution carries at least :data:`MIX_SHARE` of the change and outweighs its rate
    part; one already named for its rate, or inside or above one, is not named again.
    """
    if not _finite(totals):
        return causes
    delta = totals["comparison"] - totals["baseline"]  # type: ignore[operator]
    if delta == 0:
        return causes
    leaf = cube.leaf
    den = {k: leaf[k.replace("n", "d", 1)] for k in ("nb", "nc", "qnb", "qnc")}
    for k in ("rowsb", "rowsc", "cellsb", "cellsc"):
        if k in leaf:
            den[k] = leaf[k]
    if days is not None and "vdb" in leaf:
        den.update(vnb=leaf["vdb"], vnc=leaf["vdc"])
    volume = additive_leaves(den, days)
    found = choose(cube, search(cube, volume, SearchOptions(eligible=eligible)), eligible)
    mix, rate = contrib["mix"], contrib["rate"]
    blocked = np.zeros(len(mix), dtype=bool)
    for c in causes:  # a segment already named for its rate is not named again for its mix
        blocked |= _related(cube, _index_of(cube, c.segment))
    for pick in sorted(found.picks, key=lambda p: -abs(float(mix[p.seg]))):
        i = pick.seg
        if i == 0 or blocked[i]:
            continue
        if abs(mix[i]) < MIX_SHARE * abs(delta) or abs(mix[i]) <= abs(rate[i]):
            continue
        causes.append(_segment(cube, contrib, i, sig.adjusted(pick.p_value, found.tests)))
        blocked |= _related(cube, i)
    return causes


MIX_SHARE = 0.1
"""The least share of the change a mix cause carries through its mix part."""


SAME_ROWS = 0.99


def one_name_each(
    cube: Cube, contrib: dict[str, np.ndarray], *groups: list[Segment]
) -> tuple[list[Segment], ...]:
    """Segments that cover the same rows are one segment, named once.

    Tied columns (every ``platform = web`` row has ``app_version = web``) and a joined copy of a
    column (``country`` and ``users.country``) give one set of rows several names. Two segments
    are the same rows when, in each period, the rows, the denominator and the absolute numerator
    they share are at least ``SAME_ROWS`` of each one's own: counted on the leaves, which
    partition the rows exactly, so a tie broken by a handful of stray rows still holds and a
    segment that differs by more than a percent of its volume or of its metric stays apart.
    Each segment takes the name with the fewest columns (base-table columns before joined ones,
    then the columns' order), and its numbers; the other names become its ``aliases``. A list
    that names the same rows twice keeps the first.
    """
    out = []
    for group in groups:
        kept: list[Segment] = []
        seen: set[int] = set()
        for s in group:
            names = _same_rows(cube, _index_of(cube, s.segment))
            if names[0] in seen:
                continue
            seen.add(names[0])
            if cube.segment_dict(names[0]) != s.segment:
                follows = s.explained_by_root_causes  # the same rows: the same fit
                s = _segment(cube, contrib, names[0], s.p_value)  # type: ignore[arg-type]
                s.explained_by_root_causes = follows
            s.aliases = [cube.segment_dict(k) for k in names[1:]]
            kept.append(s)
        out.append(kept)
    return tuple(out)


def _same_rows(cube: Cube, i: int) -> list[int]:
    """Segment ``i`` and every segment covering the same rows, best name first."""
    s = cube.seg
    leaf = cube.leaf
    # a necessary condition on the segments' own sums (of statistics no leaf has negative)
    # narrows the leaf-level check
    near = cube.seg_mask.any(axis=1)
    for k in _MASS:
        if (leaf[k] >= 0).all():
            near &= np.minimum(s[k], s[k][i]) >= SAME_ROWS * np.maximum(s[k], s[k][i])
    near[i] = True
    mass = [np.abs(leaf[k]) for k in _MASS]
    own = _leaf_members(cube, i)
    same = []
    for k in np.flatnonzero(near):
        other = own if k == i else _leaf_members(cube, int(k))
        shared = own & other
        if all(m[shared].sum() >= SAME_ROWS * max(m[own].sum(), m[other].sum()) for m in mass):
            same.append(int(k))

    def rank(k: int) -> tuple[int, int, tuple[int, ...]]:
        cols = tuple(int(j) for j in np.flatnonzero(cube.seg_mask[k]))
        return len(cols), sum("." in cube.dims[j] for j in cols), cols

    return sorted(same, key=rank)


_MASS = ("rowsb", "rowsc", "db", "dc", "nb", "nc")


def _leaf_members(cube: Cube, i: int) -> np.ndarray:
    """Which leaves make up segment ``i``."""
    cols = np.flatnonzero(cube.seg_mask[i])
    return (cube.leaf_codes[:, cols] == cube.seg_codes[i, cols]).all(axis=1)


def _overlap_notes(causes: list[Segment], delta: float | None = None) -> list[str]:
    """Say so when root causes' shares add to more than the whole change (``delta``) because
    some of them hold the same rows (two segments overlap unless they set one column to
    different values)."""
    shares = [c.share for c in causes if c.share is not None and c.share > 0]
    if sum(shares) <= 1.05:
        return []
    pairs = [
        (a, b)
        for i, a in enumerate(causes)
        for b in causes[i + 1 :]
        if all(str(b.segment[k]) == str(v) for k, v in a.segment.items() if k in b.segment)
    ]
    if not pairs:
        return []
    named = "; ".join(
        " and ".join(", ".join(f"{k} = {v}" for k, v in s.segment.items()) for s in pair)
        for pair in pairs[:3]
    )
    changes = Quantity.of([delta, *(c.contribution for c in causes)])
    return [
        f"root causes overlap (they share rows: {named}), so their shares add to "
        f"{percent(sum(shares), sign=False)} of the total change of {changes.change(delta)}"
    ]


def _adjusted(p: float, found: Search, own: float | None = None) -> float:
    """A segment's p-value corrected for every segment searched (Bonferroni), as reported, or
    its ``own`` corrected p-value when its family was narrower."""
    return own if own is not None else sig.adjusted(p, found.tests)


def _index_of(cube: Cube, segment: dict[str, Any]) -> int:
    """The row of ``segment`` among the cube's segments."""
    if len(segment) > len(cube.dims):
        raise ValueError("more columns than the cube has")
    want = {cube.dims.index(k): v for k, v in segment.items()}
    cols = np.array(sorted(want), dtype=np.int64)
    match = cube.seg_mask.sum(axis=1) == len(cols)
    for j in cols:
        code = cube.values[j].index(want[j])
        match &= cube.seg_codes[:, j] == code
    return int(np.flatnonzero(match)[0])


def _related(cube: Cube, i: int) -> np.ndarray:
    """Segment ``i``, its descendants and its ancestors."""
    return descendants(cube, i) | ancestors(cube, i)


def _global_shift(
    cube: Cube,
    found: Search,
    kind: str,
    delta: float | None,
    significant: bool,
) -> Segment | None:
    """The even move of everything: what remains once the named segments are taken out.

    Reported when the search chose it (the rest moved beyond the noise), or when the change is
    significant, no segment stood out at all, at least half of the change is left over and the
    total moved beyond the leaves' noise too (one planned test): it hit everything alike.
    Beside named causes, what they leave over is not a shift of its own unless it cleared the
    same bound they did (a small net change between offsetting movers leaves a remainder as
    large as itself by chance). Whether it is the data's doing (missing or repeated days) is
    decided by ``assign_data_quality``.
    """
    if not significant or not delta:
        return None
    pick = next((p for p in found.picks if p.seg == 0), None)
    if pick is None and found.picks:
        return None
    part = float(found.remainder) + (pick.observed - pick.expected if pick else 0.0)
    if kind == "ratio":
        part /= max(cube.total["dc"], 1e-300)
    if pick is None and (part * delta <= 0 or abs(part) < 0.5 * abs(delta)):
        return None
    if pick is None and abs(float(found.z[0])) < sig.bonferroni_z(1):
        # the days said the total moved, the leaves did not: an even move of everything is a
        # claim about every leaf, and it must stand beyond their noise too (one planned test)
        return None
    return Segment(
        segment={},
        contribution=part,
        share=part / delta,
        unexpected=0.0,
        effect="rate",
        p_value=None,
        significant=True,
    )


def _drivers(
    cube: Cube,
    contrib: dict[str, np.ndarray],
    found: Search,
    eligible: np.ndarray,
    direction: float,
) -> tuple[list[Segment], list[Segment]]:
    """Segments significant after correcting for every segment searched (the same bound the
    causes meet), ranked by contribution, with and against the change."""
    crit = found.bounds
    sig = eligible & (np.abs(found.z) >= crit)
    sig[0] = False  # the whole population is not a driver
    idx = np.flatnonzero(sig)
    c = contrib["contribution"][idx] * direction
    depth = cube.seg_mask[idx].sum(axis=1)
    order = np.lexsort((depth, -np.abs(c)))
    with_: list[Segment] = []
    against: list[Segment] = []
    for j in order:
        side = with_ if c[j] > 0 else against
        if len(side) >= MAX_DRIVERS:
            continue  # that side is full: only the other's segments are still made
        i = int(idx[j])
        seg = _segment(cube, contrib, i, _adjusted(float(found.p[i]), found))
        seg.explained_by_root_causes = _follows_from_causes(found, i)
        side.append(seg)
        if len(with_) >= MAX_DRIVERS and len(against) >= MAX_DRIVERS:
            break
    return with_, against


def _largest_moves(
    cube: Cube, contrib: dict[str, np.ndarray], eligible: np.ndarray, limit: int = MAX_MOVERS
) -> list[Segment]:
    """The segments that moved the most, as facts: ranked by the size of their contribution
    (the broader segment first on a tie), one per family of segments inside or above one
    another, so no move is listed twice under two names. Untested: no p-value, not significant."""
    c = np.abs(contrib["contribution"])
    depth = cube.seg_mask.sum(axis=1)
    taken = np.zeros(len(c), dtype=bool)
    out: list[Segment] = []
    for i in np.lexsort((depth, -c)):
        i = int(i)
        if i == 0 or taken[i] or not eligible[i] or not c[i] > 0:
            continue
        seg = _segment(cube, contrib, i, 1.0)
        seg.p_value, seg.significant = None, False
        out.append(seg)
        taken |= _related(cube, i)
        if len(out) >= limit:
            break
    return out


def _follows_from_causes(found: Search, i: int) -> bool:
    """Segment ``i``'s move is within the noise once the picked causes are fitted."""
    return any(p.seg != 0 for p in found.picks) and _within_fit(found, i)


def _within_fit(found: Search, i: int, scale: float = 1.0) -> bool:
    """Segment ``i`` is within its bound once the picks are fitted (the fit scaled by ``scale``,
    for an even shift on top of them)."""
    if found.fit is None:
        return False
    vs, fs, ps = found.fit
    crit = float(found.bounds[i])
    return bool(abs(vs[i] - fs[i] * scale) / math.sqrt(max(float(ps[i]), 1e-300)) < crit)
