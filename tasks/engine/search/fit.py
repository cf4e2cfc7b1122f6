"""The picks' factors fitted together, and the noise a further segment is judged by once they are:
their leaves' scatter counted, the noise they share taken out, its rows outside them compared.
"""

from __future__ import annotations

import numpy as np

from tasks.engine.search.groups import Groups


def moves_alike(
    groups: Groups,
    v: np.ndarray,
    f: np.ndarray,
    w: np.ndarray,
    w_fit: np.ndarray,
    explained: np.ndarray,
    R: np.ndarray,
    FS: np.ndarray,
    bound: np.ndarray,
) -> np.ndarray:
    """Per segment, whether its rows outside the picks moved as its rows inside them did: a
    second cause moves all its rows by its factor, overlap or not, while a segment cutting
    across a scattered pick moves only inside it. Its relative move inside (over the fit)
    and outside are compared; it fails when it moved inside beyond what it did outside by
    more than its ``bound`` (the one a cause must clear). A segment with no rows outside the
    picks is one of their slices and fails; one wholly outside them passes."""
    n_seg, rest = len(R), ~explained
    R_rest = groups.sums(v - f, n_seg, where=rest)
    P_rest = groups.sums(w, n_seg, where=rest)
    F_rest = groups.sums(f, n_seg, where=rest)
    F_in = FS - F_rest
    P_in = groups.sums(w_fit, n_seg, where=explained)
    R_in = R - R_rest
    with np.errstate(divide="ignore", invalid="ignore"):
        d_in = R_in / F_in
        d_rest = R_rest / F_rest
        se = np.sqrt(P_in / F_in**2 + P_rest / F_rest**2)
        z_h = (d_in - d_rest) * np.sign(R) / se
    alike = np.where(F_in > 0, np.nan_to_num(z_h, nan=np.inf) < bound, True)
    return alike & (F_rest > 0)


def refit(
    f0: np.ndarray,
    v: np.ndarray,
    margins: list[np.ndarray],
    rounds: int = 50,
    factors: list[float] | None = None,
) -> np.ndarray:
    """The picks' factors fitted together (iterative proportional fitting): every pick's
    expected total equals its observed total, each leaf expected at its baseline times the
    factors of the picks that hold it. Fitted one at a time, a pick that overlaps a later one
    keeps the overlap's move in its own factor; together, each move goes to the pick it
    belongs to. Leaves with nothing before and something now are expected at what they show."""
    f = f0.astype(np.float64).copy()
    fixed = np.zeros(len(f), dtype=bool)
    for m in margins:
        fixed[m] |= f0[m] <= 0
    f[fixed] = v[fixed]
    K = [1.0] * len(margins)
    for _ in range(rounds):
        moved = 0.0
        for j, m in enumerate(margins):
            free = m[~fixed[m]]
            fs = float(f[free].sum())
            if fs <= 0:
                continue
            k = (float(v[m].sum()) - float(f[m[fixed[m]]].sum())) / fs
            if k < 0:
                continue
            f[free] *= k
            K[j] *= k
            moved = max(moved, abs(k - 1.0))
        if moved < 1e-9:
            break
    if factors is not None:
        factors[:] = K
    return f


def with_spread(
    f0: np.ndarray, v: np.ndarray, fitted: np.ndarray, w: np.ndarray, margins: list[np.ndarray]
) -> np.ndarray:
    """The leaves' noise variance with each pick's spread added: a cause rarely moves every
    leaf by one factor, so its leaves scatter around the fitted factor by a share of their move
    (``t^2 (fitted - f0)^2``), the share measured on the pick's own leaves (the scatter beyond
    the noise, over the squared moves; none when they scatter no more than the noise). A
    segment cutting across a cause is then not a cause on that scatter alone, while a cause
    whose leaves moved alike keeps its full weight."""
    out = w.copy()
    for m in margins:
        move2 = (fitted[m] - f0[m]) ** 2
        out[m] += scatter_share(v[m], fitted[m], w[m], move2) * move2
    return out


def scatter_share(v: np.ndarray, fit: np.ndarray, w: np.ndarray, move2: np.ndarray) -> float:
    """How far leaves scatter around their fit beyond the noise ``w``, as a share of their
    squared moves ``move2`` (``t^2``; none when they scatter no more than the noise)."""
    denom = float(move2.sum())
    if denom <= 0:
        return 0.0
    return max(float(((v - fit) ** 2 - w).sum()) / denom, 0.0)


def conditional_variance(
    groups: Groups, w: np.ndarray, PS: np.ndarray, margins: list[np.ndarray], n_seg: int
) -> np.ndarray:
    """Per segment, the noise variance of its residual once the picks' factors are fitted: the
    fitted factors take the part of the noise each pick shares with the segment
    (``P_S - c' A^-1 c`` with ``c`` the noise the segment shares with each pick and ``A`` the
    picks' shared noise), so a slice of a pick, already matched in total, is not judged by the
    full noise it no longer has."""
    n = len(w)
    C = np.empty((len(margins), n_seg))
    for j, m in enumerate(margins):
        x = np.zeros(n)
        x[m] = w[m]
        C[j] = groups.sums(x, n_seg)
    A = np.array(
        [
            [float(w[np.intersect1d(a, b, assume_unique=True)].sum()) for b in margins]
            for a in margins
        ]
    )
    sol = np.linalg.pinv(A) @ C  # the least-squares solution; A is the picks' few by few
    V = PS - np.einsum("js,js->s", C, sol)
    return np.maximum(V, 1e-3 * np.maximum(PS, 1e-300))
