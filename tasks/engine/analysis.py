"""An analysis: the explanation and the segment statistics behind it, which judge other claims
about the same question (the gate's, the agent's) by the engine's own numbers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.leaf_days import LeafDays
from tasks.engine.result import Explanation
from tasks.engine.search import Search
from tasks.engine.segments import _effect, _index_of, _same_rows, _within_fit


@dataclass(frozen=True)
class SegmentTest:
    """What the engine measured for one segment: its part of the change and its significance."""

    segment: dict[str, Any]
    contribution: float
    share: float | None
    p_value: float = field(
        metadata={
            "doc": "a root cause's as reported; else Bonferroni-adjusted over the segments searched"
        }
    )
    significant: bool
    explained: bool = field(
        metadata={"doc": "within the noise once the root causes are fitted (and not one)"}
    )
    effect: str
    baseline_volume: float
    comparison_volume: float
    support: float = field(metadata={"doc": "larger of its volume shares in the two periods"})


@dataclass
class Analysis:
    """An explanation and the segment statistics behind it."""

    explanation: Explanation
    cube: Cube
    contrib: dict[str, np.ndarray]
    found: Search
    delta: float | None
    # root causes' p-values as reported, by segment key (each of their names): the gate judges
    # a root cause by the figure its row shows
    cause_p: dict[str, float] = field(default_factory=dict)
    # the source read once (None for a distinct count), which the context's reader answers
    # sums of cells from until the analysis is closed
    cells: LeafDays | None = None

    def close(self) -> None:
        """Let go of the stored cells (the analysis's numbers stay)."""
        if self.cells is not None:
            self.cells.close()

    def answer_tools(self) -> None:
        """From now on the tools' calls (the hypotheses', the gate's re-runs, the report's
        per-day numbers) are answered from the stored cells when they can, with no pass over
        the source (:mod:`tasks.engine.cell_answers`); the metric's columns the data-quality
        check found NaN or infinity in are read from the source."""
        if self.cells is None:
            return
        found = {
            i.column
            for i in self.explanation.data_quality
            if i.kind == "non_finite_values" and i.column
        }
        self.cells.answer_tools(found)

    def test(self, segment: dict[str, Any]) -> SegmentTest | None:
        """The engine's statistics for ``segment``; None when it was not among those searched
        (a column outside the search, more columns than the depth, or a value not present)."""
        cube = self.cube
        i = self._find(segment)
        if i is None:
            return None
        kind = self.explanation.metric.kind
        c = float(self.contrib["contribution"][i])
        s, t = self.cube.seg, self.cube.total
        support = max(s["db"][i] / max(t["db"], 1e-300), s["dc"][i] / max(t["dc"], 1e-300))
        found = self.found
        key = json.dumps(cube.segment_dict(i), sort_keys=True, default=str)
        # a root cause's p-value is the one its row in the report shows (a mix cause is judged
        # by the test of its share, a cause in a narrower family by that family's correction);
        # any other segment's is its rate test corrected for every segment searched
        p = self.cause_p.get(key)
        if p is None:
            p = sig.adjusted(float(found.p[i]), found.tests)
        named = {  # a root cause under any of its names
            json.dumps(name, sort_keys=True, default=str)
            for rc in self.explanation.root_causes
            for name in (rc.segment, *rc.aliases)
        }
        explained = False
        if key not in named and found.fit is not None:
            explained = _within_fit(found, i)
            vs, fs, _ = found.fit
            if self.explanation.global_shift is not None and fs[0] > 0:
                # an even shift reported from what the causes left: scale the fit by it
                explained |= _within_fit(found, i, float(vs[0] / fs[0]))
        return SegmentTest(
            segment=self.cube.segment_dict(i),
            contribution=c,
            share=c / self.delta if self.delta else None,
            p_value=p,
            significant=sig.significant(p),
            explained=bool(explained),
            effect=_effect(self.cube, i, self.contrib, kind),
            baseline_volume=float(s["rowsb"][i]),
            comparison_volume=float(s["rowsc"][i]),
            support=float(support),
        )

    def name_of(self, segment: dict[str, Any]) -> dict[str, Any] | None:
        """The engine's name for the rows of ``segment`` (see :func:`one_name_each`): the
        segment itself unless a tied column names them with fewer columns; None when it was
        not among those searched."""
        i = self._find(segment)
        return None if i is None else self.cube.segment_dict(_same_rows(self.cube, i)[0])

    def _find(self, segment: dict[str, Any]) -> int | None:
        cube = self.cube
        try:
            exact = {}
            for k, v in segment.items():  # "5.2" from a model names the value 5.2
                vals = cube.values[cube.dims.index(k)]
                exact[k] = v if v in vals else next(x for x in vals if str(x) == str(v))
            return _index_of(cube, exact)
        except (ValueError, IndexError, StopIteration):
            return None
