"""What a search found: its picks, and every segment's evidence against "nothing changed"."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tasks.engine.search.groups import Groups
from tasks.engine.search.leaves import Leaves


@dataclass
class Pick:
    """One selected segment and the numbers at the moment it was selected."""

    seg: int
    z: float
    p_value: float
    gain: float
    factor: float
    expected: float
    observed: float
    # the deviance its fit removed: ``z^2`` of its evidence given the earlier picks (for a pick
    # the climb moved up to its parent, at least the evidence of the piece that admitted it)
    deviance: float = 0.0
    # its p-value corrected for multiple testing, when its family is narrower than every segment
    # searched (a column's values, once the column is shown to matter); None: over every segment
    p_adjusted: float | None = None


@dataclass
class Search:
    picks: list[Pick]
    z: np.ndarray
    p: np.ndarray
    residual: np.ndarray
    leaves: Leaves
    z_crit: float
    n_tested: int
    seg_crit: np.ndarray | None = None  # per segment: the |z| it must reach (tails included)
    remainder: float = 0.0
    notes: list[str] = field(default_factory=list)
    # per segment once the picks are fitted: observed, fitted and noise variance
    fit: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    # which leaves each segment holds (built by the search; reused by whatever weighs its picks)
    groups: Groups | None = None
    # per segment, the |z| a pick had to reach, where a family narrower than every segment set
    # it (a column's values, once the column is shown to matter); None: the bounds
    admitted_at: np.ndarray | None = None

    @property
    def tests(self) -> float:
        """What the multiple-testing correction counts: the segments searched."""
        return float(self.n_tested)

    @property
    def bounds(self) -> np.ndarray:
        """Per segment, the ``|z|`` it must reach (the Bonferroni bound where no tail widened
        it)."""
        return self.seg_crit if self.seg_crit is not None else np.full(len(self.z), self.z_crit)
