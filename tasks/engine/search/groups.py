"""Which leaves each segment holds, and a leaf array summed over every segment; the segments'
lattice (ancestors, descendants)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.engine.cube import Cube

MATRIX_ENTRIES = 20_000_000
"""Most leaf-in-segment entries (leaves x cuboids) the segments-by-leaves matrix holds (about
12 bytes each); beyond it, segment sums are one pass over the leaves per cuboid."""


class Groups:
    """For each segment: which leaves it holds (as a group id within its cuboid).

    A cuboid's groups are keyed by one integer (the codes of its columns in mixed radix), so
    grouping costs one pass over the leaves per cuboid, not a sort of multi-column rows. The
    same membership, as a sparse segments-by-leaves matrix, sums a leaf array over every
    segment in one product (:meth:`sums`, called a hundred times and more a search).
    """

    def __init__(self, cube: Cube) -> None:
        n_leaves = self.n_leaves = len(cube.leaf_codes)
        self._matrix: Any = None  # :attr:`matrix`, built when first used (False: it cannot be)
        radix = np.array([max(len(v), 1) for v in cube.values], dtype=np.int64)
        n_cols = cube.seg_mask.shape[1]
        if n_cols <= 62:  # each segment's columns as one integer: a unique of integers, not rows
            bit = np.int64(1) << np.arange(n_cols, dtype=np.int64)
            keys, inverse = np.unique(cube.seg_mask.astype(np.int64) @ bit, return_inverse=True)
            masks = (keys[:, None] & bit) > 0
        else:
            masks, inverse = np.unique(cube.seg_mask, axis=0, return_inverse=True)
        self.cuboids: list[tuple[np.ndarray, np.ndarray, int]] = []  # (segment ids, leaf gid, n)
        self.seg_gid = np.zeros(len(cube.seg_mask), dtype=np.int64)
        self.seg_cuboid = inverse.reshape(-1)
        for m_idx, mask in enumerate(masks):
            cols = np.flatnonzero(mask)
            seg_ids = np.flatnonzero(self.seg_cuboid == m_idx)
            if cols.size == 0:  # the whole population
                self.seg_gid[seg_ids] = 0
                self.cuboids.append((seg_ids, np.zeros(n_leaves, dtype=np.int64), 1))
                continue
            leaf_key = _mixed_radix(cube.leaf_codes[:, cols], radix[cols])
            seg_key = _mixed_radix(cube.seg_codes[seg_ids][:, cols], radix[cols])
            space = int(np.prod(radix[cols].astype(float)))
            if space <= max(4 * n_leaves, 1024):
                # small key space: the key is the group id
                self.seg_gid[seg_ids] = seg_key
                self.cuboids.append((seg_ids, leaf_key, space))
            else:
                uniq, leaf_gid = np.unique(leaf_key, return_inverse=True)
                pos = np.searchsorted(uniq, seg_key)
                pos = np.minimum(pos, max(len(uniq) - 1, 0))
                found = uniq[pos] == seg_key if len(uniq) else np.zeros(len(seg_key), bool)
                self.seg_gid[seg_ids] = np.where(found, pos, -1)
                self.cuboids.append((seg_ids, leaf_gid.reshape(-1), len(uniq)))

    def sums(self, x: np.ndarray, n_segments: int, where: np.ndarray | None = None) -> np.ndarray:
        """Per-segment sum of a leaf array (over the leaves ``where`` only, if given: a mask or
        the leaves' indices)."""
        if where is not None:
            kept = np.zeros(len(x))
            kept[where] = x[where]
            x = kept
        if n_segments != len(self.seg_gid):
            raise ValueError(f"{len(self.seg_gid)} segments, asked for {n_segments}")
        x = np.asarray(x, dtype=np.float64)
        matrix = self.matrix if self.n_leaves * len(self.cuboids) <= MATRIX_ENTRIES else None
        if matrix is not None:
            return np.asarray(matrix @ x)
        out = np.zeros(n_segments)  # one pass over the leaves per cuboid, in bounded memory
        for seg_ids, leaf_gid, n in self.cuboids:
            sums = np.bincount(leaf_gid, weights=x, minlength=n)
            got = self.seg_gid[seg_ids]
            out[seg_ids] = np.where(got >= 0, sums[np.maximum(got, 0)], 0.0)
        return out

    @property
    def matrix(self) -> Any:
        """Segments by leaves, 1 where a segment holds a leaf (sparse, by leaf): a segment's
        sum of a leaf array is one product, every cuboid at once. None when it cannot be had:
        in a process whose address space is capped and mostly reserved (DuckDB reserves far
        more than it touches), the sparse library's own code may fail to load, and the sums
        then go cuboid by cuboid, as past :data:`MATRIX_ENTRIES`."""
        if self._matrix is None:
            try:
                self._matrix = self._build_matrix()
            except (ImportError, MemoryError):
                self._matrix = False
        return None if self._matrix is False else self._matrix

    def _build_matrix(self) -> Any:
        from scipy import sparse

        # per leaf (a row) and cuboid (a column), the segment holding it, -1 for none
        seg = np.empty((self.n_leaves, len(self.cuboids)), dtype=np.int32)
        for k, (seg_ids, leaf_gid, n) in enumerate(self.cuboids):
            seg_of = np.full(n, -1, dtype=np.int32)
            gid = self.seg_gid[seg_ids]
            seg_of[gid[gid >= 0]] = seg_ids[gid >= 0]
            seg[:, k] = seg_of[leaf_gid]
        held = seg >= 0
        indptr = np.concatenate([[0], np.cumsum(held.sum(axis=1))])
        shape = (len(self.seg_gid), self.n_leaves)
        return sparse.csc_matrix((np.ones(int(indptr[-1])), seg[held], indptr), shape=shape)


def _mixed_radix(codes: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """One integer per row from per-column codes in ``[0, radix)``."""
    key = np.zeros(len(codes), dtype=np.int64)
    for j in range(codes.shape[1]):
        key = key * radix[j] + codes[:, j]
    return key


def descendants(cube: Cube, seg: int) -> np.ndarray:
    """Segments that constrain every column ``seg`` does, to the same values (``seg`` included;
    none for the whole population)."""
    mask = cube.seg_mask[seg]
    cols = np.flatnonzero(mask)
    if cols.size == 0:
        return np.zeros(len(cube.seg_mask), dtype=bool)
    same = (cube.seg_codes[:, cols] == cube.seg_codes[seg, cols]).all(axis=1)
    return same & cube.seg_mask[:, cols].all(axis=1)


def ancestors(cube: Cube, seg: int) -> np.ndarray:
    """Segments whose every column ``seg`` also constrains, to the same value (``seg`` and the
    whole population included)."""
    mask, codes = cube.seg_mask[seg], cube.seg_codes[seg]
    agree = ((cube.seg_codes == codes) | ~cube.seg_mask).all(axis=1)
    return agree & (cube.seg_mask <= mask).all(axis=1)


def segment_leaves(groups: Groups, seg: int) -> np.ndarray:
    seg_ids, leaf_gid, _ = groups.cuboids[groups.seg_cuboid[seg]]
    return np.flatnonzero(leaf_gid == groups.seg_gid[seg])
