"""The evidence ledger: every tool call of every hypothesis, exactly as it ran.

Written as JSON lines (``evidence.jsonl``, one entry per call) and as a readable log per
hypothesis (``hypotheses/h1.log``). Entries get investigation-wide ids (``q-1``, ``q-2``, ...)
that findings and verdicts cite; an id the ledger does not hold is not evidence.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from pathlib import Path
from typing import Any

from sql_tools.output import dumps
from tasks.agent.models import LedgerEntry
from tasks.agent.untrusted import to_json

_HYPOTHESIS_ID = re.compile(r"h[0-9]+")
"""How a hypothesis's id is written (its log is ``hypotheses/<id>.log``)."""
RESULT_ROWS = 20


def digest(payload: dict[str, Any]) -> str:
    """sha256 of a tool result with its timing left out: equal results, equal digests."""
    body = {k: v for k, v in payload.items() if k != "elapsed_ms"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def capped(payload: dict[str, Any]) -> dict[str, Any]:
    """The result as the ledger keeps it: rows cut to the first ``RESULT_ROWS``."""
    result = dict(payload)
    if isinstance(result.get("rows"), list):
        result["rows"] = result["rows"][:RESULT_ROWS]
    return result


def same_result(a: Any, b: Any, *, rel: float = 1e-9) -> bool:
    """Equal results: the same structure and values, floats equal to ``rel`` (a parallel sum
    can differ in its last bits from run to run); timings are ignored."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = (a.keys() | b.keys()) - {"elapsed_ms"}
        return all(same_result(a.get(k), b.get(k), rel=rel) for k in keys)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            same_result(x, y, rel=rel) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
            return a == b
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)
    return a == b


def summarize(tool: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One or two lines about a result, and the figures it gave (totals, first rows)."""
    if "error" in payload:
        err = payload["error"]
        return f"error {err.get('code')}: {err.get('message')}", {}
    numbers: dict[str, Any] = {}
    parts: list[str] = []
    if isinstance(payload.get("total"), dict):
        numbers["total"] = payload["total"]
    for key in ("baseline", "comparison", "change"):
        if isinstance(payload.get(key), dict):
            numbers[key] = {
                k: v for k, v in payload[key].items() if k in ("label", "value", "relative")
            }
    if isinstance(payload.get("root_causes"), list):
        numbers["root_causes"] = [
            {k: c.get(k) for k in ("segment", "contribution", "share", "effect", "p_value")}
            for c in payload["root_causes"][:5]
        ]
    total = payload.get("total")
    if isinstance(total, dict) and total.get("baseline") is not None:
        parts.append(f"total {_n(total.get('baseline'))} → {_n(total.get('comparison'))}")
    for key in ("change",):
        rel = (payload.get(key) or {}).get("relative")
        if isinstance(rel, int | float):
            parts.append(f"change {rel:+.1%}, p = {payload[key].get('p_value', 0) or 0:.2g}")
    rows = payload.get("rows")
    if isinstance(rows, list):
        parts.append(f"{payload.get('matched_count', len(rows))} rows")
        if payload.get("truncated"):
            parts.append("truncated")
        group = payload.get("group_by") or []
        if rows and group and "delta" in rows[0]:
            top = rows[0]
            seg = ", ".join(f"{g}={top.get(g)}" for g in group)
            share = top.get("share_of_delta")
            parts.append(
                f"largest move {seg}: {_n(top.get('baseline'))} → {_n(top.get('comparison'))}"
                + (f" ({share:.0%} of the delta)" if isinstance(share, int | float) else "")
            )
        numbers["rows"] = rows[:5]
    return "; ".join(parts), numbers


def _n(x: Any) -> str:
    """A number to 6 significant digits, read at 12 first: sums of the same values added in
    another order (another database, another plan) differ in their last bits, and show the
    same digits."""
    if isinstance(x, float) and math.isfinite(x):
        x = float(f"{x:.12g}")
    return f"{x:,.6g}" if isinstance(x, int | float) and not isinstance(x, bool) else str(x)


class Ledger:
    """The investigation's tool calls in order; safe to share between hypotheses' threads."""

    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []
        self._lock = threading.Lock()

    def record(
        self,
        hypothesis_id: str,
        tool: str,
        arguments: Any,
        is_error: bool,
        payload: dict[str, Any],
        elapsed_ms: float,
        tokens: dict[str, int] | None = None,
    ) -> LedgerEntry:
        """Append one call and return its entry (with its new id)."""
        summary, numbers = summarize(tool, payload)
        result = capped(payload)
        with self._lock:
            seq = sum(1 for e in self.entries if e.hypothesis_id == hypothesis_id) + 1
            entry = LedgerEntry(
                id=f"q-{len(self.entries) + 1}",
                hypothesis_id=hypothesis_id,
                seq=seq,
                tool=tool,
                arguments=arguments if isinstance(arguments, dict | str) else repr(arguments),
                is_error=is_error,
                sql=str(payload.get("sql", "")),
                params=payload.get("params") if isinstance(payload.get("params"), dict) else {},
                digest=digest(payload),
                summary=summary,
                numbers=numbers,
                result=result,
                elapsed_ms=round(elapsed_ms, 1),
                tokens=tokens or {},
            )
            self.entries.append(entry)
        return entry

    def get(self, entry_id: Any) -> LedgerEntry | None:
        """The entry with this id, or None (ids are only ever ``q-<n>``)."""
        if not isinstance(entry_id, str) or not entry_id.startswith("q-"):
            return None
        n = entry_id[2:]
        if not n.isdigit() or not 1 <= int(n) <= len(self.entries):
            return None
        return self.entries[int(n) - 1]

    def of(self, hypothesis_id: str) -> list[LedgerEntry]:
        """The calls made for one hypothesis."""
        return [e for e in self.entries if e.hypothesis_id == hypothesis_id]

    def write(self, out: Path, titles: dict[str, str]) -> None:
        """``evidence.jsonl`` and ``hypotheses/<id>.log`` under ``out``; the log of a hypothesis
        this investigation does not have (left by an earlier one in the same folder) is removed,
        so the folder shows one investigation."""
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / "evidence.jsonl.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            for e in self.entries:
                f.write(dumps(e.model_dump(mode="json")) + "\n")
        tmp.replace(out / "evidence.jsonl")
        logs = out / "hypotheses"
        logs.mkdir(exist_ok=True)
        for stale in logs.glob("h*.log"):
            if _HYPOTHESIS_ID.fullmatch(stale.stem) and stale.stem not in titles:
                stale.unlink()
        for hid, title in titles.items():
            lines = [f"hypothesis {hid}: {to_json(title)}", ""]
            for e in self.of(hid):
                lines += [
                    f"[{e.id}] {e.tool} ({e.elapsed_ms:.0f} ms){' ERROR' if e.is_error else ''}",
                    f"  arguments: {to_json(e.arguments)}",
                    f"  summary:   {to_json(e.summary)}",
                ]
                if e.sql:
                    lines.append(f"  sql:       {' '.join(e.sql.split())}")
                    lines.append(f"  params:    {to_json(e.params)}")
                if e.numbers:
                    lines.append(f"  numbers:   {to_json(e.numbers)}")
                lines.append("")
            (logs / f"{hid}.log").write_text("\n".join(lines), encoding="utf-8")
