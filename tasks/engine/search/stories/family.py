"""The p-values of a family of segments narrower than every segment searched."""

from __future__ import annotations

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.search.picks import Search


def family_p(found: Search, gates: dict[int, float], n_family: float, alpha: float) -> np.ndarray:
    """Per segment, the p-value of a member of a family narrower than every segment searched
    (NaN elsewhere): corrected over the family, and never below ``gates[s]``, the p-value of
    the test that opened the family to it; a member clear of the bound among every segment
    keeps its p-value over them all."""
    out = np.full(len(found.p), np.nan)
    for s, gate in gates.items():
        everywhere = sig.adjusted(float(found.p[s]), found.tests)
        among = max(sig.adjusted(float(found.p[s]), n_family), gate)
        out[s] = everywhere if sig.significant(everywhere, alpha) else among
    return out
