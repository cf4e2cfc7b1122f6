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

from sql_tools.output import (
    GROSS_FACTOR,
    Figures,
    Quantity,
    dumps,
    finite,
    gross_movement,
    mask_secrets,
    percent,
)
from sql_tools.words import share_of, share_of_gross
from tasks.agent.models import LedgerEntry
from tasks.agent.untrusted import to_json
from tasks.outdir import file_names, remove_file, write_file

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
    """Equal results: the same structure and values (:func:`same_value`); timings are
    ignored."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = (a.keys() | b.keys()) - {"elapsed_ms"}
        return all(same_result(a.get(k), b.get(k), rel=rel) for k in keys)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            same_result(x, y, rel=rel) for x, y in zip(a, b, strict=True)
        )
    return same_value(a, b, rel=rel)


def same_value(a: Any, b: Any, *, rel: float = 1e-9) -> bool:
    """Equal as the data's values, which is how a re-run is compared with what it gave before:
    a NaN equals a NaN (the data held one then and holds one now), ``-0.0`` equals ``0.0``,
    None equals None and nothing else, a float equals a number to ``rel`` (a parallel sum can
    differ in its last bits from run to run), and all else (counts, text) is equal exactly."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        try:
            fa, fb = float(a), float(b)
        except OverflowError:  # an integer past any float
            return False
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=rel, abs_tol=1e-12)
    return bool(a == b)


def summarize(
    tool: str,
    payload: dict[str, Any],
    arguments: Any = None,
    figures: Figures | None = None,
    metric: str = "",
) -> tuple[str, dict[str, Any]]:
    """One or two lines about a result, and the figures it gave (totals, first rows).

    A call that computed the investigated ``metric`` prints it in the investigation's
    ``figures`` (the report's formats); another quantity (a count of rows, a ratio's
    numerator) gets one format from its own figures. A move hidden in a small net change is
    said in units and as a share of the gross movement, never as ``-1747% of the delta``."""
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
    values, changes = formats(payload, arguments, figures, metric)
    total = payload.get("total")
    if isinstance(total, dict) and total.get("baseline") is not None:
        before, after = (values.value(total.get(k)) for k in ("baseline", "comparison"))
        parts.append(f"total {before} → {after}")
    for key in ("change",):
        rel = (payload.get(key) or {}).get("relative")
        if isinstance(rel, int | float):
            parts.append(f"change {percent(rel)}, p = {payload[key].get('p_value', 0) or 0:.2g}")
    rows = payload.get("rows")
    if isinstance(rows, list):
        n = payload.get("matched_count", len(rows))
        parts.append(f"{n} row" if n == 1 else f"{n} rows")
        if payload.get("truncated"):
            parts.append("truncated")
        group = payload.get("group_by") or []
        if rows and group and "delta" in rows[0]:
            top = rows[0]
            seg = ", ".join(f"{g}={top.get(g)}" for g in group)
            move = f"{values.value(top.get('baseline'))} → {values.value(top.get('comparison'))}"
            share = _share(payload, changes)
            parts.append(f"largest move {seg}: {move}" + (f" ({share})" if share else ""))
        numbers["rows"] = rows[:5]
    return "; ".join(parts), numbers


def formats(
    payload: dict[str, Any], arguments: Any, figures: Figures | None, metric: str
) -> tuple[Quantity, Quantity]:
    """How a result's values and changes print: as the investigation prints ``metric`` when
    the call computed it, else one format each from the result's own figures."""
    if figures is not None and metric and aggregate_text(arguments) == flat_expression(metric):
        return figures.values, figures.changes
    return _own_formats(payload)


def aggregate_text(arguments: Any) -> str | None:
    """The one aggregate a tool call computed, written flat (``sum(revenue)``), or None."""
    metric = arguments.get("metric") if isinstance(arguments, dict) else None
    if not isinstance(metric, dict) or "agg" not in metric:
        return None
    return flat_expression(f"{metric.get('agg')}({metric.get('column') or '*'})")


def flat_expression(expression: str) -> str:
    """An aggregate written one way: ``SUM( revenue )`` and ``sum(revenue)`` compare equal."""
    return "".join(str(expression).split()).lower()


def _own_formats(payload: dict[str, Any]) -> tuple[Quantity, Quantity]:
    """One format for a result's values and one for its changes, from its own figures."""
    total = payload.get("total") if isinstance(payload.get("total"), dict) else {}
    rows = [r for r in payload.get("rows") or [] if isinstance(r, dict)]
    values = [total.get("baseline"), total.get("comparison")]
    values += [r.get(k) for r in rows for k in ("baseline", "comparison")]
    return Quantity.of(values), Quantity.of([total.get("delta"), *(r.get("delta") for r in rows)])


def _share(payload: dict[str, Any], changes: Quantity) -> str:
    """The largest move's part of the result's net change (see the docstring of
    :func:`summarize`); empty when the net change is none."""
    rows = payload["rows"]
    delta = rows[0].get("delta")
    total = payload.get("total") if isinstance(payload.get("total"), dict) else {}
    net = total.get("delta")
    if not finite(net) and finite(total.get("baseline")) and finite(total.get("comparison")):
        net = total["comparison"] - total["baseline"]
    if not finite(delta) or not finite(net) or not net:
        return ""
    if payload.get("truncated"):
        # the rows left out hold part of the gross movement: a share of it would overstate
        if abs(delta) > GROSS_FACTOR * abs(net):
            return f"{changes.change(delta)} against a net change of {changes.change(net)}"
        return share_of(delta, net, changes, QUERY_TOTAL)
    gross = gross_movement(net, [r.get("delta") for r in rows])
    if gross:
        return share_of_gross(delta, gross, net, changes)
    return share_of(delta, net, changes, QUERY_TOTAL)


QUERY_TOTAL = "the query's total change"
"""What a tool call's largest move is a share of: the change of every row the call matched (a
filtered call's total is its filter's change, not the metric's)."""


class Ledger:
    """The investigation's tool calls in order; safe to share between hypotheses' threads."""

    def __init__(self, figures: Figures | None = None, metric: str = "") -> None:
        """``figures``: how the investigation prints ``metric`` (its expression), so a call
        that computed it is summarized in the report's formats."""
        self.entries: list[LedgerEntry] = []
        self.figures, self.metric = figures, metric
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
        summary, numbers = summarize(tool, payload, arguments, self.figures, self.metric)
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
        so the folder shows one investigation. No file is written through a link
        (:func:`tasks.outdir.write_file`)."""
        evidence = "".join(dumps(e.model_dump(mode="json")) + "\n" for e in self.entries)
        write_file(out, "evidence.jsonl", evidence)
        for stale in file_names(out, "hypotheses"):
            hid = stale.removesuffix(".log")
            if stale.endswith(".log") and _HYPOTHESIS_ID.fullmatch(hid) and hid not in titles:
                remove_file(out, f"hypotheses/{stale}")
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
            write_file(out, f"hypotheses/{hid}.log", mask_secrets("\n".join(lines)))
