"""The last gate before the report: every accepted finding's recorded query is run once more.

Each hypothesis's gate already re-ran its evidence when the finding was written; this pass checks
the combined findings against the database the report will cite, so a number in the report is
one its SQL gives back. A finding whose numbers do not come back is dismissed with that critique.
"""

from __future__ import annotations

from typing import Any

from sql_tools import SqlToolError
from tasks.agent.ledger import same_value
from tasks.engine import cube as cube_mod
from tasks.run import Run


def verify_findings(run: Run, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings, accepted ones re-checked against their recorded SQL (accepted first)."""
    ctx, q, _ = run.ctx, run.question, run.analysis  # its stored cells answer the re-checks
    out = []
    for f in findings:
        f = dict(f)
        if f.get("status") == "accepted":
            problem = _recheck(ctx, q, f)
            if problem:
                f["status"], f["critique"] = "dismissed", problem
        out.append(f)
    out.sort(key=lambda f: (f["status"] != "accepted", -abs(f.get("share") or 0.0)))
    return out


def _recheck(ctx: Any, q: Any, f: dict[str, Any]) -> str | None:
    """What is wrong with finding ``f``'s numbers now; its sums are read from the question's
    stored cells when they hold its segment (else its SQL runs on the source)."""
    sq = cube_mod.SegmentQuery(sql=f.get("sql", ""), params=f.get("params", {}), formula="")
    try:
        cube_mod.run_segment_query(ctx, q, sq, f.get("segment"))
    except SqlToolError as exc:
        return f"its query no longer runs: {exc.message}"
    for which in ("baseline", "comparison"):
        got, want = getattr(sq, which), (f.get("measured") or {}).get(which)
        if not same_value(got, want):
            return f"its query now gives {which} {got}, not {want}"
    return None
