"""One cause, named once, at the level that carries it.

Pre-aggregated ratio data (one row per cell and period, like a monitoring export): when every
part of a segment moved the same way, by different amounts, the segment is the cause, not its
largest part; when one part moved alone, that part is the cause.
"""

from __future__ import annotations

import numpy as np

from sql_tools import ToolContext
from tasks.engine.explain import explain_change
from tasks.engine.parse import build_question


def _csv(rates: dict[tuple[str, str], float]) -> str:
    """Cells a x b x c; ``rates`` maps (a, b) to the comparison/baseline factor of its rate."""
    rng = np.random.default_rng(3)
    lines = ["a,b,c,period,stalled,viewers"]
    for a in ("a1", "a2", "a3"):
        for b in ("b1", "b2", "b3", "b4"):
            for c in ("c1", "c2", "c3"):
                viewers = 20_000 if b == "b1" else 2_000
                for period, factor in (("base", 1.0), ("cmp", rates.get((a, b), 1.0))):
                    rate = 0.02 * factor * float(rng.uniform(0.95, 1.05))
                    lines.append(f"{a},{b},{c},{period},{round(viewers * rate)},{viewers}")
    return "\n".join(lines) + "\n"


def _causes(make_db, text: str) -> list[dict]:
    db = make_db(cells=text)
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema,
            metric="sum(stalled) / sum(viewers)",
            period_column="period",
            baseline="base",
            comparison="cmp",
            dimensions="a,b,c",
        )
        return [c.segment for c in explain_change(ctx, q).root_causes]


def test_a_segment_whose_parts_all_moved_is_the_cause_not_its_largest_part(make_db):
    # every b under a1 got worse, by x12 for the big b1 and x3 to x6 for the small ones
    rates = {("a1", "b1"): 12.0, ("a1", "b2"): 3.0, ("a1", "b3"): 4.0, ("a1", "b4"): 6.0}
    assert _causes(make_db, _csv(rates)) == [{"a": "a1"}]


def test_a_part_that_moved_alone_is_the_cause(make_db):
    assert _causes(make_db, _csv({("a1", "b1"): 12.0})) == [{"a": "a1", "b": "b1"}]
