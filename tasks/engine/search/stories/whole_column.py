"""Whether a story names every value of a column: the even shift told value by value."""

from __future__ import annotations

import numpy as np

from tasks.engine.cube import Cube
from tasks.engine.search.picks import Search


def names_a_whole_column(cube: Cube, found: Search) -> bool:
    """The picks name every value of one column, each alone: no part of the data is left flat."""
    named: dict[int, set[int]] = {}
    for p in found.picks:
        cols = np.flatnonzero(cube.seg_mask[p.seg])
        if cols.size == 1:
            named.setdefault(int(cols[0]), set()).add(int(cube.seg_codes[p.seg, cols[0]]))
    alone = cube.seg_mask.sum(axis=1) == 1  # the one-column segments: every value of each column
    return any(len(v) >= int((alone & cube.seg_mask[:, j]).sum()) for j, v in named.items())
