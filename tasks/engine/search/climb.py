"""A pick moved up to its parent when the parent's rest moved the same way."""

from __future__ import annotations

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.search.groups import ancestors

# a pick moves up to its parent when the parent's other part moved the same way, beyond the
# noise, by at least this share of the pick's own log factor
CLIMB_SHARE = 0.3


def climb_up(
    cube: Cube,
    best: int,
    VS: np.ndarray,
    FS: np.ndarray,
    PS: np.ndarray,
    open_: np.ndarray,
    alpha: float,
) -> int:
    """Move a pick up to its parent while the rest of the parent moved the same way.

    ``best`` fits its own leaves best, but when the parent's other part (parent minus ``best``)
    also moved beyond the noise (a one-sided test at ``alpha``, in the pick's direction) and by
    at least :data:`CLIMB_SHARE` of its log factor, the change is not confined to ``best``: the
    parent is the cause and ``best`` only its largest piece. The parent whose rest moved most
    clearly wins.
    """
    depth = cube.seg_mask.sum(axis=1)
    while depth[best] > 1:
        parents = np.flatnonzero(ancestors(cube, best) & (depth == depth[best] - 1) & open_)
        if parents.size == 0 or VS[best] <= 0:
            return best
        with np.errstate(divide="ignore", invalid="ignore"):
            if FS[best] > 0:
                log_best = np.full(parents.size, np.log(VS[best] / FS[best]))
            else:
                # a pick with nothing before has no finite factor of its own: the rest is
                # measured against the factor its parent as a whole would be fitted with
                log_best = np.log(np.where(FS[parents] > 0, VS[parents] / FS[parents], np.nan))
        V, F = VS[parents] - VS[best], FS[parents] - FS[best]
        P = np.maximum(PS[parents] - PS[best], 1e-300)
        z = (V - F) / np.sqrt(P)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rest = np.log(np.where((F > 0) & (V > 0), V / F, np.nan))
            share = np.where(log_best != 0, log_rest / log_best, np.nan)
        # a planned, one-sided test (the direction is the pick's), not a search over segments
        ok = z * np.sign(np.nan_to_num(log_best)) >= sig.one_sided_z(alpha)
        ok &= np.nan_to_num(share) >= CLIMB_SHARE
        if not ok.any():
            return best
        best = int(parents[ok][np.argmax(np.abs(z[ok]))])
    return best
