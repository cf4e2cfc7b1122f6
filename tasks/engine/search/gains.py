"""The leaf error a segment's ripple fit removes: how the forward search weighs its candidates."""

from __future__ import annotations

import numpy as np

from tasks.engine.search.groups import Groups


def ripple_gain(
    groups: Groups,
    f: np.ndarray,
    v: np.ndarray,
    s: np.ndarray,
    FS: np.ndarray,
    VS: np.ndarray,
    cand: np.ndarray,
) -> np.ndarray:
    """Leaf error removed (in noise units) if every leaf of a segment moved by its factor.

    Computed for the candidate segments only (``-inf`` elsewhere), over their own leaves.
    """
    out = np.full(len(cand), -np.inf)
    for seg_ids, leaf_gid, n in groups.cuboids:
        picked = seg_ids[cand[seg_ids]]
        if picked.size == 0:
            continue
        gid = groups.seg_gid[picked]
        factor = np.full(n, np.nan)
        fs = FS[picked]
        factor[gid] = np.where(fs > 0, VS[picked] / np.where(fs > 0, fs, 1.0), np.nan)
        is_cand = np.zeros(n, dtype=bool)
        is_cand[gid] = True
        idx = np.flatnonzero(is_cand[leaf_gid])
        lg, fi, vi, si = leaf_gid[idx], f[idx], v[idx], s[idx]
        gain = np.bincount(lg, weights=leaf_gain(fi, vi, factor[lg]) / si, minlength=n)
        out[picked] = gain[gid]
    return out


def leaf_gain(f: np.ndarray, v: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per leaf, the absolute error a factor ``k`` removes, read in the direction of the fall:
    ``|v - f| - |v - k f|`` for a fall, and for a rise the same read from the comparison back
    to the baseline (``|f - v / k|``, which is ``|v - k f| / k``). Read forward only, a rise
    costs more than the same fall (absolute error is least at the median, and sparse leaves
    are skewed: a leaf with nothing observed only loses when its expectation is raised), so a
    cause that rose lost to noise that fell, and the same data asked the other way round told
    another story; read as a fall either way, a leaf pair scores the same whichever period is
    the baseline. A leaf with nothing before (``k`` infinite) is fitted to what it shows."""
    base = np.abs(v - f)
    finite = np.isfinite(k)
    kk = np.where(finite, k, 1.0)
    after = np.abs(v - f * kk) / np.maximum(kk, 1.0)
    return np.where(finite, base - after, base)
