"""What a search is asked: the options its caller chooses once, and how one telling of a story
limits the picks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from tasks.engine import significance as sig

MAX_CAUSES = 12


@dataclass(frozen=True, eq=False)
class SearchOptions:
    """The search's options, chosen once per question.

    ``eligible`` marks the segments that may be named. ``gain_units`` "noise" weighs each leaf's
    error by its noise (surprise first: sharp local breaks are found even when small);
    "absolute" weighs by magnitude (explanatory power first). ``min_effect`` is the smallest
    share of the total unexplained change a cause must carry when picked."""

    eligible: np.ndarray
    alpha: float = sig.ALPHA
    max_causes: int = MAX_CAUSES
    gain_units: Literal["noise", "absolute"] = "noise"
    min_effect: float = 0.0


@dataclass(frozen=True, eq=False)
class Telling:
    """How one telling of a story limits the forward search.

    ``climb`` moves a pick up to its parent when the parent's rest moved with it;
    ``even_first`` starts the story from an even move of everything, and ``allow_even: False``
    tells it without one. ``only`` limits the picks to a story's own segments (weighed again in
    the forward order; the bound still counts every segment searched). ``crit`` replaces the
    bound each segment must clear, and ``p_adjusted`` its corrected p-value (NaN: over every
    segment searched), where a family narrower than every segment is tested (a column's values,
    once the column is shown to matter)."""

    climb: bool = True
    even_first: bool = False
    allow_even: bool = True
    only: np.ndarray | None = None
    crit: np.ndarray | None = None
    p_adjusted: np.ndarray | None = None


FORWARD = Telling()
"""The forward search's own telling: every segment open, each pick climbed."""
