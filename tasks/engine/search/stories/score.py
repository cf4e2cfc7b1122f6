"""A story's score: the deviance its picks removed, net of the price of choosing them."""

from __future__ import annotations

import numpy as np

from tasks.engine.search.picks import Search


def story_score(found: Search) -> float:
    """How well a search's picks explain the change, net of what choosing them costs: the
    deviance each pick removed less its bound squared (the price of a segment chosen among all
    those searched). A segment that did not move against its baseline (an exception to an even
    shift that stayed flat) pays its price and gains nothing: a flat part is not a cause. A
    value of a column tested as a family of its own moved when it cleared that family's bound,
    and pays the price of every segment searched all the same."""
    crit = found.bounds
    admitted = found.admitted_at if found.admitted_at is not None else crit
    moved = np.abs(found.z) >= admitted  # against "nothing changed"
    return float(sum(p.deviance * moved[p.seg] - float(crit[p.seg]) ** 2 for p in found.picks))
