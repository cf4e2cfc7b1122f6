"""An even shift taken first stays in its story only when what the segments after it leave moved
beyond the noise."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tasks.engine.cube import Cube
from tasks.engine.search.forward import search
from tasks.engine.search.groups import segment_leaves
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions, Telling
from tasks.engine.search.picks import Search
from tasks.engine.search.stories.other_telling import took_even
from tasks.engine.search.stories.story import Story


def without_an_even_shift_first(story: Story) -> Story:
    """The other telling, from an even shift, without it when the rest did not move (a story
    whose forward telling took the even shift is left as it is)."""
    if story.other is None or took_even(story):
        return story
    other = _without(story.cube, story.leaves, story.other, story.options)
    return replace(story, other=other)


def _without(cube: Cube, leaves: Leaves, found: Search, options: SearchOptions) -> Search:
    """The story without its even shift when what the segments after it leave did not move
    beyond the noise.

    An even shift is a cause when the rest moved given the causes; taken first, it is weighed
    before them, and it carries their move (two segments that rose make the whole rise). Once
    the segments are fitted, the leaves none of them holds must have moved beyond the noise
    (the bound the even shift clears), or the story is told again with the segments alone, in
    the forward order (each given the ones before it, as the search weighs them)."""
    segs = [p.seg for p in found.picks]
    if len(segs) < 2 or segs[0] != 0 or found.groups is None:
        return found
    rest = np.ones(len(leaves.f), dtype=bool)
    for s in segs[1:]:
        rest[segment_leaves(found.groups, s)] = False
    w = leaves.phi * leaves.P
    R, W = float((leaves.v - leaves.f)[rest].sum()), float(w[rest].sum())
    if W > 0 and abs(R) / np.sqrt(W) >= found.bounds[0]:
        return found
    only = np.zeros(len(cube.seg_mask), dtype=bool)
    only[segs[1:]] = True
    alone = search(cube, leaves, options, Telling(climb=False, only=only), groups=found.groups)
    if sorted(p.seg for p in alone.picks) != sorted(segs[1:]):
        return found  # a segment does not clear its bound without the even shift
    return alone
