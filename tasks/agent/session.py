"""One hypothesis's tool calls: the SQL tools, ``write_finding`` and ``conclude``.

The Claude loop and the offline planner both call tools through a ``Session``, so both share the
ledger, the gate, the repeat guard and the tool-call budget. Nothing here talks to a model.
"""

from __future__ import annotations

import inspect
import json
import time
from typing import Any

from pydantic import BaseModel, ValidationError

from sql_tools import SqlToolError, ToolContext, ToolInputError
from sql_tools.registry import model_schema, validation_error
from tasks import tools as registry
from tasks.agent.gate import ConcludeInput, Gate, WriteFindingInput
from tasks.agent.ledger import Ledger
from tasks.agent.models import Budget, Hypothesis, LedgerEntry, Outcome, Usage
from tasks.agent.names import Names
from tasks.agent.untrusted import clean

VERDICT_TOOLS = {"write_finding": WriteFindingInput, "conclude": ConcludeInput}


def tool_definitions(names: Names) -> list[dict[str, Any]]:
    """Tools for ``messages.create``: the registry's plus the verdict tools, their table and
    column fields enums of ``names``' handles (no name from the data in a definition)."""
    live = names.live()
    tools = registry.anthropic_tools(live=live)
    for name, model in VERDICT_TOOLS.items():
        tools.append(
            {
                "name": name,
                "description": inspect.cleandoc(model.__doc__ or ""),
                "input_schema": model_schema(model, live),
            }
        )
    return tools


def input_model(name: str) -> type[BaseModel] | None:
    """The input model of the tool called ``name`` (a registry tool or a verdict tool)."""
    spec = registry.spec_for(name)
    return spec.input_model if spec is not None else VERDICT_TOOLS.get(name)


class Session:
    """Runs the tool calls of one hypothesis and remembers its verdict."""

    def __init__(
        self,
        ctx: ToolContext,
        hypothesis: Hypothesis,
        ledger: Ledger,
        gate: Gate,
        budget: Budget,
    ) -> None:
        self.ctx, self.h, self.ledger, self.gate, self.budget = (
            ctx,
            hypothesis,
            ledger,
            gate,
            budget,
        )
        self.calls = 0
        self.verdict: ConcludeInput | None = None
        self.verdict_note = ""
        self.findings: list[str] = []
        self._seen: dict[str, int] = {}

    @property
    def exhausted(self) -> bool:
        """True once the tool-call budget is spent."""
        return self.calls >= self.budget.max_tool_calls

    def call(
        self,
        name: str,
        arguments: Any,
        tokens: dict[str, int] | None = None,
        names: Names | None = None,
    ) -> tuple[bool, dict[str, Any], LedgerEntry]:
        """Run one call; return ``(is_error, payload, ledger entry)``. Never raises for input
        a model could get wrong: those come back as error payloads it can correct.

        With ``names`` the call speaks in handles: its arguments' handles become names before
        it runs (the ledger keeps the names) and the payload returned has handles again."""
        t0 = time.perf_counter()
        self.calls += 1
        try:
            if names is not None:
                arguments = names.to_real(input_model(str(name)), arguments)
            payload = self._run(name, arguments)
            is_error = False
        except SqlToolError as exc:
            payload, is_error = exc.to_dict(), True
        elapsed = (time.perf_counter() - t0) * 1000
        entry = self.ledger.record(
            self.h.id, str(name), arguments, is_error, payload, elapsed, tokens
        )
        if names is not None:
            payload = names.to_handles(str(name), payload)
        return is_error, payload, entry

    def _run(self, name: str, arguments: Any) -> dict[str, Any]:
        if self.calls > self.budget.max_tool_calls:
            raise ToolInputError(
                f"tool-call budget of {self.budget.max_tool_calls} spent; call conclude",
                code="budget_exceeded",
            )
        key = json.dumps([name, arguments], sort_keys=True, default=str)
        self._seen[key] = self._seen.get(key, 0) + 1
        if self._seen[key] > self.budget.max_repeats:
            raise ToolInputError(
                "repeated call: the same tool with the same arguments was already answered; "
                "use its result (or conclude)",
                code="repeated_call",
            )
        if name in VERDICT_TOOLS:
            return self._verdict_tool(name, arguments)
        return registry.call(self.ctx, name, arguments).model_dump(mode="json")

    def _verdict_tool(self, name: str, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ToolInputError("arguments must be a JSON object")
        try:
            inp = VERDICT_TOOLS[name].model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc) from None
        if isinstance(inp, WriteFindingInput):
            f = self.gate.submit(self.h.id, inp)
            if f.key not in self.findings:
                self.findings.append(f.key)
            out = {"finding": f.key, "status": f.status, "critique": f.critique}
            if f.measured:
                out["measured"] = f.measured
            if f.share is not None:
                out["share_of_change"] = round(f.share, 4)
            return out
        assert isinstance(inp, ConcludeInput)
        unknown = [e for e in inp.evidence if self.ledger.get(e) is None]
        if unknown:
            raise ToolInputError(
                f"unknown evidence id(s): {', '.join(map(repr, unknown[:5]))}",
                code="unverified_evidence",
            )
        if inp.status == "confirmed" and not self.gate.accepted(self.h.id):
            inp = inp.model_copy(update={"status": "inconclusive", "confidence": "low"})
            self.verdict_note = "confirmed without an accepted finding: recorded as inconclusive"
        failed = [e for e in inp.evidence if self.ledger.get(e).is_error]  # type: ignore[union-attr]
        if inp.status != "inconclusive" and inp.evidence and len(failed) == len(inp.evidence):
            inp = inp.model_copy(update={"status": "inconclusive", "confidence": "low"})
            self.verdict_note = "its only evidence returned errors: recorded as inconclusive"
        if inp.status == "ruled_out" and not inp.evidence:
            inp = inp.model_copy(update={"status": "inconclusive", "confidence": "low"})
            self.verdict_note = "ruled out without evidence: recorded as inconclusive"
        self.verdict = inp
        return {"status": inp.status, "confidence": inp.confidence, "note": self.verdict_note}

    def outcome(
        self, stop_reason: str, usage: Usage | None = None, elapsed_ms: float = 0.0
    ) -> Outcome:
        """The hypothesis's outcome: its verdict, or inconclusive when it ended without one."""
        v = self.verdict
        if v is None:
            status, confidence, summary, evidence = "inconclusive", "low", "", []
        else:
            status, confidence = v.status, v.confidence
            summary, evidence = clean(v.summary, 2000), list(v.evidence)
        note = self.verdict_note or (
            f"ended without a verdict ({stop_reason})" if v is None else ""
        )
        return Outcome(
            hypothesis=self.h,
            status=status,
            confidence=confidence,
            summary=" ".join(x for x in (summary, note) if x),
            evidence=evidence,
            findings=list(self.findings),
            stop_reason=stop_reason,
            tool_calls=self.calls,
            usage=usage or Usage(),
            elapsed_ms=round(elapsed_ms, 1),
        )
