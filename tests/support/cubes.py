"""Cubes built in memory from a list of leaves, for the search's unit tests (no database).

A leaf is ``{column: value, ..., "baseline": x, "comparison": y}``: its metric's sum in each
period, made of rows of ``row_value`` each (a count by default), so its row-level noise is that
of a compound-Poisson sum. The segments are every combination of up to ``depth`` columns' values
that holds a leaf, the whole population first, as the engine's cube query returns them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np

from tasks.engine.cube import Cube

PERIODS = ("baseline", "comparison")


def cube_of(
    leaves: Sequence[dict[str, Any]], *, depth: int | None = None, row_value: float = 1.0
) -> Cube:
    """The cube of ``leaves`` (columns in the order the first leaf names them), segments up to
    ``depth`` columns (every column by default)."""
    dims = [k for k in leaves[0] if k not in PERIODS]
    k = len(dims)
    depth = k if depth is None else depth
    values = [sorted({leaf[d] for leaf in leaves}, key=str) for d in dims]
    leaf_codes = np.array(
        [[values[j].index(leaf[d]) for j, d in enumerate(dims)] for leaf in leaves],
        dtype=np.int64,
    ).reshape(len(leaves), k)
    stats: dict[str, np.ndarray] = {}
    for period, suffix in zip(PERIODS, "bc", strict=True):
        n = np.array([float(leaf[period]) for leaf in leaves])
        rows = np.abs(n) / row_value
        stats |= {
            f"n{suffix}": n,
            f"qn{suffix}": np.abs(n) * row_value,
            f"rows{suffix}": rows,
            # a denominator of 1 per row, as the engine completes a sum's statistics
            f"d{suffix}": rows,
            f"qd{suffix}": rows,
            f"qnd{suffix}": n,
        }
    masks, codes = [], []
    for size in range(depth + 1):
        for cols in combinations(range(k), size):
            held = np.unique(leaf_codes[:, list(cols)], axis=0) if cols else np.zeros((1, 0))
            for combo in held:
                mask = np.zeros(k, dtype=bool)
                mask[list(cols)] = True
                code = np.full(k, -1, dtype=np.int64)
                code[list(cols)] = combo
                masks.append(mask)
                codes.append(code)
    seg_mask, seg_codes = np.array(masks), np.array(codes, dtype=np.int64)
    inside = ((leaf_codes[None, :, :] == seg_codes[:, None, :]) | ~seg_mask[:, None, :]).all(axis=2)
    return Cube(
        dims=dims,
        values=values,
        leaf_codes=leaf_codes,
        leaf=stats,
        seg_mask=seg_mask,
        seg_codes=seg_codes,
        seg={key: inside.astype(float) @ arr for key, arr in stats.items()},
        total={key: float(arr.sum()) for key, arr in stats.items()},
        sql="",
        params={},
        elapsed_ms=0.0,
    )
