"""Each pick of a story climbed again given the story's other picks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tasks.engine.cube import Cube
from tasks.engine.search.climb import climb_up
from tasks.engine.search.fit import refit
from tasks.engine.search.forward import search
from tasks.engine.search.groups import descendants, segment_leaves
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions, Telling
from tasks.engine.search.picks import Search
from tasks.engine.search.stories.story import Story


def reclimbed(story: Story) -> Story:
    """The story with each pick climbed again given the others (:func:`climbed_again`)."""
    found = climbed_again(story.cube, story.leaves, story.found, story.options)
    return replace(story, found=found)


def climbed_again(cube: Cube, leaves: Leaves, found: Search, options: SearchOptions) -> Search:
    """The story with each pick climbed again given the story's other picks.

    The forward search climbs a pick to its parent when the parent's rest moved with it
    (:func:`climb_up`), judged against what the picks before it explain. A pick taken before
    another that holds part of its parent's rest was climbed without that one fitted: a rise of
    ``platform = ios`` whose tablets fell with every tablet is first seen as ``ios & phone``,
    the rest of ``ios`` (its tablets) moving unlike it until the tablets' fall is fitted. So
    each pick of a story without an even shift is climbed again against the fit of the others;
    a pick that climbs is replaced by its parent, and the story is weighed again in the forward
    order. The new story stands when every segment of it is picked again; else the old one."""
    segs = [p.seg for p in found.picks]
    groups = found.groups
    if len(segs) < 2 or 0 in segs or groups is None or found.fit is None:
        return found
    n_seg = len(cube.seg_mask)
    depth = cube.seg_mask.sum(axis=1)
    eligible = options.eligible
    alpha = options.alpha
    VS, _, PS = found.fit
    story = list(segs)
    changed = False
    for _ in range(len(story)):
        # the clearest climb first (its parent's rest moved most), then the others given it
        best: tuple[float, int, int] | None = None
        for i, seg in enumerate(story):
            if depth[seg] < 2:
                continue
            others = [t for t in story if t != seg]
            f_others = refit(leaves.f, leaves.v, [segment_leaves(groups, t) for t in others])
            FS = groups.sums(f_others, n_seg)
            open_ = eligible.copy()
            for t in others:
                open_ &= ~descendants(cube, t)
                open_[t] = False
            up = climb_up(cube, seg, VS, FS, PS, open_, alpha)
            if up == seg:
                continue
            rest = VS[up] - VS[seg] - (FS[up] - FS[seg])
            z = abs(rest) / np.sqrt(max(PS[up] - PS[seg], 1e-300))
            if best is None or z > best[0]:
                best = (z, i, up)
        if best is None:
            break
        story[best[1]] = best[2]
        changed = True
    if not changed:
        return found
    only = np.zeros(n_seg, dtype=bool)
    only[story] = True
    again = search(cube, leaves, options, Telling(only=only), groups=groups)
    return again if sorted(p.seg for p in again.picks) == sorted(set(story)) else found
