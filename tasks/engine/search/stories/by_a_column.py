"""A change told as an even move of everything, told instead by a column that refutes it."""

from __future__ import annotations

import math
from dataclasses import replace

from tasks.engine.cube import Cube
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions
from tasks.engine.search.picks import Pick, Search
from tasks.engine.search.stories.one_column import told_by_one_column
from tasks.engine.search.stories.parts import told_by_parts


def told_by_a_column(cube: Cube, leaves: Leaves, found: Search, options: SearchOptions) -> Search:
    """A story without picks, whose change is told as an even move of everything, told instead
    by the values of a column that refutes that move (:func:`told_by_one_column`, for an even
    shift the search took); ``found`` itself when no column does."""
    if found.picks or found.groups is None:
        return found
    expected, observed = float(leaves.f.sum()), float(leaves.v.sum())
    even = Pick(
        seg=0,
        z=float(found.z[0]),
        p_value=float(found.p[0]),
        gain=0.0,
        factor=observed / expected if expected > 0 else math.inf,
        expected=expected,
        observed=observed,
        deviance=float(found.z[0]) ** 2,
    )
    told = told_by_one_column(cube, leaves, replace(found, picks=[even]), options)
    if not told.picks or told.picks[0].seg == 0:
        return found
    return told_by_parts(cube, leaves, told, options)
