"""Root-cause search: the smallest set of segments that explains a change beyond the noise.

The model, per leaf ``i`` (one combination of all searched dimensions):

* expected comparison value ``f_i``: the baseline scaled by a *global* factor ``1 + g`` (the move
  that hit everything evenly, a weighted median so a few segments cannot drag it). For ratio
  metrics the leaf keeps its comparison denominator and its own baseline ratio: ``f_i = d_ci *
  r_bi * (1 + g)`` against the observed numerator ``v_i = n_ci`` (the *rate* view).
* noise: quasi-Poisson. ``P_i`` is the compound-Poisson variance of ``v_i - f_i`` from row-level
  sums of squares; a dispersion ``phi`` scales it and is estimated from the leaves themselves
  (the mean of ``r_i^2 / P_i`` per size bin, leaves beyond the noise left out), so
  pre-aggregated and event-level data both get a fitting noise level.

A segment ``S`` is a candidate when its residual ``V_S - F_S`` is significant after a Bonferroni
correction over every segment searched. The step takes the candidate whose *ripple* fit (every
leaf of ``S`` moved by the segment's own factor ``V_S / F_S``) removes the most absolute leaf
error in noise units, read in the direction of the fall so a rise and the same fall weigh alike
(:func:`~tasks.engine.search.gains.leaf_gain`); all picks' factors are then fitted together
(:func:`~tasks.engine.search.fit.refit`), and the search repeats. A parent whose change sits in
one child loses to the child (the fit spreads the change over siblings that did not move); a
child that merely follows its parent loses to the parent (it explains only part); so each cause
is reported once, at the most specific level that carries it. When the ripple fit prefers the
largest piece of a segment whose other pieces moved the same way (beyond the noise, by at least
three tenths as much in log factor), the pick moves up to that segment
(:func:`~tasks.engine.search.climb.climb_up`).

Whether an even move of everything is an even shift or its largest pieces is decided by weighing
both tellings as whole stories (:func:`~tasks.engine.search.stories.search_stories`); an even
shift taken first stays in its story only when the rest moved given the segments after it, and
when every column's values moved by its factor (else the values of the column that refutes it
tell the story).

A further cause must be significant given the picks so far, their factors fitted together and
their leaves' own scatter around those factors counted as noise
(:func:`~tasks.engine.search.fit.conditional_variance`,
:func:`~tasks.engine.search.fit.with_spread`); its rows outside the picks must have moved as its
rows inside them did (:func:`~tasks.engine.search.fit.moves_alike`); and a segment of few leaves
is judged by the leaves' own noise tail (:func:`~tasks.engine.search.noise.noise_tail`). With
date periods the dispersion comes from each leaf's day-to-day spread
(:func:`~tasks.engine.search.noise.day_dispersion`), so few cells and many movers neither hide a
cause nor pass for an even shift.

Ratio leaves measure their noise around the typical leaf's move (a weighted median), so a cause
that moved a large part of the data does not pass for noise; additive leaves keep the overall
factor, which measured better on the labelled cases (heavy-tailed sums: a smaller dispersion let
single noisy cells through).

The modules: :mod:`.noise` (dispersion, day variance, tails, floors), :mod:`.leaves` (additive
and ratio leaves), :mod:`.groups` (which leaves each segment holds, their sums, the lattice),
:mod:`.options` (what a search is asked), :mod:`.forward` (the forward search, with
:mod:`.gains`, :mod:`.climb` and :mod:`.fit`), :mod:`.picks` (what it found) and
:mod:`.stories` (the story rules, in the order they apply).
"""

from __future__ import annotations

from tasks.engine.search.climb import CLIMB_SHARE, climb_up
from tasks.engine.search.fit import refit
from tasks.engine.search.forward import search
from tasks.engine.search.groups import Groups, ancestors, descendants, segment_leaves
from tasks.engine.search.leaves import Leaves, additive_leaves, ratio_leaves
from tasks.engine.search.noise import MIN_DAYS, weighted_median
from tasks.engine.search.options import MAX_CAUSES, SearchOptions, Telling
from tasks.engine.search.picks import Pick, Search
from tasks.engine.search.stories import RULES, search_stories, story_score, told_by_a_column

__all__ = [
    "CLIMB_SHARE",
    "MAX_CAUSES",
    "MIN_DAYS",
    "RULES",
    "Groups",
    "Leaves",
    "Pick",
    "Search",
    "SearchOptions",
    "Telling",
    "additive_leaves",
    "ancestors",
    "climb_up",
    "descendants",
    "ratio_leaves",
    "refit",
    "search",
    "search_stories",
    "segment_leaves",
    "story_score",
    "told_by_a_column",
    "weighted_median",
]
