"""The leaf-level model: each leaf's expected and observed comparison value and its noise, for
additive metrics and for ratios (the rate view).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.engine.search.noise import (
    day_dispersion,
    day_variance,
    dispersion,
    noise_tail,
    typical_factor,
    variance_floor,
)


@dataclass
class Leaves:
    """The leaf-level model inputs: expected ``f``, observed ``v``, variance units ``P``."""

    f: np.ndarray
    v: np.ndarray
    P: np.ndarray
    g: float
    phi: np.ndarray
    # how much wider the leaves' noise tail is than a normal law's (1: normal)
    tail: float = 1.0
    # the part of ``P`` that is the expectation's own noise (the baseline's, in the
    # comparison's units): a leaf expected at ``k f`` has variance ``P + (k^2 - 1) Pb``
    Pb: np.ndarray | None = None


def additive_leaves(leaf: dict[str, np.ndarray], days: tuple[float, float] | None = None) -> Leaves:
    """Expected vs observed for additive metrics (sums, counts, per-leaf distinct counts).

    The expectation starts at "nothing changed"; an even move of everything is the search's
    global candidate. The dispersion is measured around the overall factor, so an even move
    does not pass for noise; with date periods, from each leaf's own days instead.
    """
    b, c = leaf["nb"], leaf["nc"]
    overall = c.sum() / b.sum() if b.sum() > 0 else 1.0
    P = variance_floor(leaf["qnc"] + overall**2 * leaf["qnb"])
    Pb = np.minimum(overall**2 * leaf["qnb"], P)
    r = c - b * overall
    V = None
    if days and "vnb" in leaf:
        # the baseline enters the residual scaled by the overall factor
        scaled = {**leaf, "vnb": leaf["vnb"] * overall**2, "nb": b * overall}
        V = day_variance(scaled, days, np.zeros_like(b), np.zeros_like(b))
    phi = dispersion(r, P, b + c)
    if V is not None:
        phi = day_dispersion(V, P, leaf, b + c, phi)
    return Leaves(
        f=b.copy(), v=c.copy(), P=P, g=overall - 1.0, phi=phi, tail=noise_tail(r, P, phi), Pb=Pb
    )


def ratio_leaves(
    leaf: dict[str, np.ndarray], total: dict[str, float], days: tuple[float, float] | None = None
) -> Leaves:
    """Expected vs observed numerator at the comparison denominator (the rate view)."""
    nb, db, nc, dc = leaf["nb"], leaf["db"], leaf["nc"], leaf["dc"]
    overall = total["nb"] / total["db"] if total["db"] else 0.0
    rb = np.where(db > 0, nb / np.where(db > 0, db, 1.0), overall)
    rc = np.where(dc > 0, nc / np.where(dc > 0, dc, 1.0), 0.0)
    f = dc * rb
    overall = nc.sum() / f.sum() if f.sum() > 0 else 1.0
    g = overall - 1.0
    # each row's spread around the leaf's rate over both periods (the rate "nothing changed"
    # expects): a period's own rate fits its few rows too well (a leaf without purchases in one
    # period had no spread there at all); one degree of freedom goes to that rate. A leaf new in
    # the comparison is expected at the baseline's overall rate, and spreads around it
    both = db + dc
    rate = total["nb"] / total["db"] if total["db"] else 0.0
    rp = np.where(db > 0, (nb + nc) / np.where(both > 0, both, 1.0), rate)
    qc = np.maximum(leaf["qnc"] - 2 * rp * leaf["qndc"] + rp**2 * leaf["qdc"], 0.0)
    qb = np.maximum(leaf["qnb"] - 2 * rp * leaf["qndb"] + rp**2 * leaf["qdb"], 0.0)
    scale = np.where(db > 0, dc / np.where(db > 0, db, 1.0), 0.0)
    P = qc + scale**2 * qb
    if "rowsb" in leaf:
        rows = leaf["rowsb"] + leaf["rowsc"]
        P = P * np.where(rows > 1, rows / np.maximum(rows - 1, 1), 1.0)
    # one row per leaf and period (pre-aggregated data): no row-level spread to measure (the
    # spread above is zero but for rounding), so count-like (Poisson) noise on the numerator
    # stands in, the dispersion rescaling it; a count's noise is that of the count expected
    # when that is the larger (a leaf with sessions and no purchase saw 0 of about 1 expected)
    poisson = np.maximum(np.abs(nc), np.abs(f)) + scale**2 * np.abs(nb)
    # in the numerator's units squared, as the row-level spread is (a compound-Poisson sum's
    # variance is its total times the rows' mean square over their mean: 1 for counts), so the
    # metric's units do not change which leaves count
    total = float((np.abs(nb) + np.abs(nc)).sum())
    unit = float((leaf["qnb"] + leaf["qnc"]).sum()) / total if total > 0 else 1.0
    poisson = poisson * max(unit, 1e-300)
    single = (leaf["rowsb"] <= 1) & (leaf["rowsc"] <= 1) if "rowsb" in leaf else P <= 0
    # a leaf's own rows measure its spread badly when it expects few counts: rows without a
    # purchase add (rate x sessions)^2, not the rate x sessions a count's noise is. So a leaf's
    # spread is never below what leaves spread per unit they expect, pooled, at its own
    # expected size
    expected = rp * (dc + scale**2 * db)
    rows_ok = ~single & (P > 0) & (expected > 0)
    per_unit = float(P[rows_ok].sum()) / float(expected[rows_ok].sum()) if rows_ok.any() else 0.0
    P = np.where(single, P, np.maximum(P, per_unit * expected))
    P = variance_floor(np.where(single | (P <= 1e-9 * poisson), poisson, P))
    r = nc - f * typical_factor(nc, f)
    V = None
    if days:
        # the baseline's part enters the model scaled to the comparison's denominator
        scaled = {
            **leaf,
            "nb": nb * scale,
            "db": db * scale,
            "vnb": leaf.get("vnb", 0) * scale**2,
            "vdb": leaf.get("vdb", 0) * scale**2,
            "vndb": leaf.get("vndb", 0) * scale**2,
        }
        V = day_variance(scaled, days, rb, rc)
    phi = dispersion(r, P, f + nc)
    if V is not None:
        phi = day_dispersion(V, P, leaf, f + nc, phi)
    return Leaves(f=f, v=nc.copy(), P=P, g=g, phi=phi, tail=noise_tail(r, P, phi))
