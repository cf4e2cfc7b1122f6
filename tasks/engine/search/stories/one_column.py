"""An even shift refuted by one column: the story told by the values of that column."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.search.forward import search
from tasks.engine.search.groups import segment_leaves
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions, Telling
from tasks.engine.search.picks import Search
from tasks.engine.search.stories.family import family_p
from tasks.engine.search.stories.score import story_score
from tasks.engine.search.stories.story import Story
from tasks.engine.search.stories.whole_column import names_a_whole_column


def one_column_told(story: Story) -> Story:
    """The chosen story told by a column's values when the column refutes its even shift; else,
    the story passed over so told, when it outscores the chosen one."""
    if not story.even_moved:
        return story
    chosen, passed = story.found, story.passed
    told = told_by_one_column(story.cube, story.leaves, chosen, story.options)
    if told is chosen and passed is not None and passed.picks:
        # the story passed over, its even shift refuted by a column, may outscore the chosen one
        by_column = told_by_one_column(story.cube, story.leaves, passed, story.options)
        if by_column is not passed and story_score(by_column) > story_score(chosen):
            return replace(story, found=by_column)
    return replace(story, found=told)


def told_by_one_column(cube: Cube, leaves: Leaves, found: Search, options: SearchOptions) -> Search:
    """The story told by the values of one column, when its even shift taken first is refuted
    by that column: its values did not move by one factor.

    An even shift is a claim about every leaf, so every column's values must share its factor.
    Each column with two or more values searched is one test of that claim (chi-squared over
    its values' moves from the even shift, :func:`significance.unlike_values_p`), corrected
    over the columns. When the clearest column refutes the even shift, its values are a family
    of their own: a value is named when its move against its baseline clears the bound among
    the one-column segments, and its p-value is corrected over them, never below the column's
    (a value clear of the bound among every segment keeps its p-value over them all).

    The values that moved replace the even shift. The story's other segments (exceptions to the
    even shift, which need not have moved at all) are weighed again beside them, unless a value
    that moved holds all their rows. The story must leave a value of the column out (naming
    every value is the even shift told value by value), and the rows none of its segments hold
    must have moved by a factor nearer flat than the even shift's, on the log scale: a rest
    that moved with the others is the even shift, with exceptions."""
    segs = [p.seg for p in found.picks]
    if not segs or segs[0] != 0 or found.groups is None:
        return found
    groups = found.groups
    n_seg = len(cube.seg_mask)
    alpha = options.alpha
    w = leaves.phi * leaves.P
    VS, FS, PS = (groups.sums(x, n_seg) for x in (leaves.v, leaves.f, w))
    alone = (cube.seg_mask.sum(axis=1) == 1) & options.eligible
    alone[0] = False
    columns = [np.flatnonzero(alone & cube.seg_mask[:, j]) for j in range(len(cube.dims))]
    columns = [c for c in columns if c.size >= 2 and FS[c].sum() > 0]
    if not columns:
        return found
    refuted = [
        (sig.adjusted(sig.unlike_values_p(VS[c], FS[c], PS[c]), len(columns)), i)
        for i, c in enumerate(columns)
    ]
    p_column, i = min(refuted)
    if not sig.significant(p_column, alpha):
        return found
    values = columns[i]
    n_alone = float(sum(c.size for c in columns))
    crit = found.bounds.copy()  # the bound among the one-column segments, tails kept
    crit[values] *= sig.bonferroni_z(n_alone, alpha) / found.z_crit
    moved = values[np.abs(found.z[values]) >= crit[values]]
    if moved.size == 0 or moved.size == values.size:
        return found  # nothing moved beyond the noise, or every value did: the even shift
    inside = np.zeros(len(leaves.f), dtype=bool)
    for s in moved:
        inside[segment_leaves(groups, s)] = True
    only = np.zeros(n_seg, dtype=bool)
    only[moved] = True
    # the story's other segments are weighed again without the even shift (an exception to it
    # may not have moved at all), unless a value that moved holds all their rows
    only[[s for s in segs[1:] if not inside[segment_leaves(groups, s)].all()]] = True
    p_adjusted = family_p(found, {int(s): p_column for s in values}, n_alone, alpha)
    telling = Telling(climb=False, only=only, crit=crit, p_adjusted=p_adjusted)
    told = search(cube, leaves, options, telling, groups=groups)
    if not set(moved.tolist()) <= {p.seg for p in told.picks}:
        return found  # a value does not clear its bound given the others
    if names_a_whole_column(cube, told):
        return found  # the even shift again, told value by value
    rest = np.ones(len(leaves.f), dtype=bool)
    for p in told.picks:
        rest[segment_leaves(groups, p.seg)] = False
    # the rest's factor nearer the even shift's than flat, on the log scale (a rise and the same
    # fall told the other way round are as near): the even shift, with its exceptions
    k = float(leaves.v.sum() / leaves.f.sum())
    v, f = float(leaves.v[rest].sum()), float(leaves.f[rest].sum())
    if f <= 0 or k <= 0:
        return told
    log_r = math.log(v / f) if v > 0 else -math.inf
    return found if abs(log_r - math.log(k)) < abs(log_r) else told
