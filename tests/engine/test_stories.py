"""Whole stories: how the forward search's picks are weighed and revised.

- An even shift taken first carries the move of the segments found after it; once they are
  fitted, what they leave must have moved beyond the noise, or the story is told without it.
- The picks' joint fit fits a pick whose rows all went to zero.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.families import draw
from tasks.engine.search import _refit
from tests.support.invariants import ask, missed


def test_the_joint_fit_takes_a_pick_whose_rows_all_went_to_zero() -> None:
    f0 = np.array([10.0, 10.0, 10.0, 10.0])
    v = np.array([0.0, 0.0, 13.0, 10.0])
    # the first pick's rows (0 and 1) all went to zero; the second (1 and 2) holds one of them
    fitted = _refit(f0, v, [np.array([0, 1]), np.array([1, 2])])
    assert fitted[[0, 1]].sum() == pytest.approx(0.0)
    assert fitted[[1, 2]].sum() == pytest.approx(13.0)
    assert fitted[3] == 10.0


def test_an_even_shift_taken_first_is_told_without_it_when_the_segments_explain_the_move(
    tmp_path: Path,
) -> None:
    # two overlapping segments rose (plan=free & channel=paid_search, plan=free & country=US),
    # enough to move the whole; the forward search names their parent and slices of it, and the
    # story from an even shift first names the two with an even shift the rest did not make
    d = draw("overlapping", 27)
    got = ask(d, "same", tmp_path)
    assert missed(d, got) == [], got.text()
    assert len(got.causes) == 2, got.text()
    assert not got.global_shift

