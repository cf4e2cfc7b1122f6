"""The agent's units: plan the hypotheses, investigate one, combine the runs into one result.

With a client (Claude), hypotheses are proposed by the model and each is investigated by the
tool-use loop; without one, the offline planner derives and investigates them. Each hypothesis
has its own ledger and gate. A hypothesis that fails for any reason ends inconclusive with the
reason. Composing them (several at once, progress, retries) is the composition's job:
:func:`tasks.investigation.investigation`.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel

from prompts import render
from sql_tools import ToolContext, one_line
from sql_tools.output import Figures
from tasks.agent.config import AgentConfig
from tasks.agent.gate import Gate
from tasks.agent.hypotheses import engine_summary, propose
from tasks.agent.ledger import Ledger
from tasks.agent.loop import run_hypothesis
from tasks.agent.models import Finding, Hypothesis, LedgerEntry, Outcome, Usage
from tasks.agent.names import Names
from tasks.agent.planner import offline_hypotheses, plan_hypothesis
from tasks.agent.session import Session
from tasks.agent.untrusted import data_block
from tasks.engine.explain import Analysis, compare_arguments
from tasks.engine.spec import Question


class AgentResult(BaseModel):
    """Every hypothesis's outcome, every finding (accepted and dismissed), and the cost."""

    mode: Literal["claude", "offline"]
    model: str | None = None
    outcomes: list[Outcome]
    findings: list[Finding]
    usage: Usage
    notes: list[str] = []
    elapsed_ms: float = 0.0


def question_summary(q: Question) -> dict[str, Any]:
    """The question as the user asked it (column names and values are data)."""
    return {
        "metric": q.metric.expression,
        "name": q.metric.name,
        "table": q.metric.table,
        "grain": q.metric.grain,
        "baseline": q.periods.label("baseline"),
        "comparison": q.periods.label("comparison"),
        "filters": [f.model_dump() for f in q.metric.filters],
        "dimensions": list(q.dimensions) if q.dimensions else None,
    }


class HypothesisRun(BaseModel):
    """One hypothesis investigated: its outcome, its ledger entries, its findings."""

    outcome: Outcome
    entries: list[LedgerEntry]
    findings: list[Finding]


def plan(
    ctx: ToolContext,
    question: Question,
    analysis: Analysis,
    *,
    client: Any = None,
    config: AgentConfig | None = None,
    history: dict[str, Any] | None = None,
) -> tuple[list[tuple[Hypothesis, dict[str, Any]]], Usage, list[str]]:
    """The hypotheses to investigate (each with its offline plan), the usage and notes."""
    config = config or AgentConfig()
    e = analysis.explanation
    if client is None:
        return offline_hypotheses(e, config.max_hypotheses, history), Usage(), []
    return propose(client, ctx, question_summary(question), e, config, history)


def investigate_one(
    ctx: ToolContext,
    question: Question,
    analysis: Analysis,
    h: Hypothesis,
    plan: dict[str, Any],
    *,
    client: Any = None,
    config: AgentConfig | None = None,
) -> HypothesisRun:
    """Investigate one hypothesis with its own ledger (ids q-1, q-2, ...) and gate. Never
    raises: whatever goes wrong ends it inconclusive with the reason."""
    config = config or AgentConfig()
    figures = Figures.of(analysis.explanation.model_dump(mode="json"))
    ledger = Ledger(figures, question.metric.expression)
    gate = Gate(ctx, question, analysis, ledger)
    session = Session(ctx, h, ledger, gate, config.budget)
    t = time.perf_counter()
    try:
        if client is None:
            stop = plan_hypothesis(session, question, analysis.explanation, plan)
            outcome = session.outcome(stop, Usage(), (time.perf_counter() - t) * 1000)
        else:
            prompt = _prompt(Names(ctx.schema), question, analysis, h, gate)
            system = render("system", max_tool_calls=str(config.budget.max_tool_calls))
            outcome = run_hypothesis(client, session, system, prompt, config)
    except Exception as exc:  # one failed hypothesis never loses the others
        stop = f"error: {type(exc).__name__}: {one_line(exc, 200)}"
        outcome = session.outcome(stop, Usage(), (time.perf_counter() - t) * 1000)
    return HypothesisRun(
        outcome=outcome, entries=list(ledger.entries), findings=list(gate.findings.values())
    )


def combine(
    runs: list[HypothesisRun],
    *,
    client_used: bool,
    config: AgentConfig,
    usage: Usage,
    notes: list[str],
    elapsed_ms: float,
) -> tuple[AgentResult, Ledger]:
    """One result and one ledger from the hypotheses' runs. Findings are merged by key (the
    same segment and category from two hypotheses): an accepted one wins, else the latest."""
    ledger = Ledger()
    findings: dict[str, Finding] = {}
    for r in runs:
        ledger.entries.extend(r.entries)
        usage = usage.add(r.outcome.usage)
        for f in r.findings:
            old = findings.get(f.key)
            if old is None or f.status == "accepted" or old.status != "accepted":
                findings[f.key] = f
    usage = usage.model_copy(update={"cost_usd": round(config.cost(usage), 6)})
    return (
        AgentResult(
            mode="claude" if client_used else "offline",
            model=config.model if client_used else None,
            outcomes=[r.outcome for r in runs],
            findings=list(findings.values()),
            usage=usage if client_used else Usage(),
            notes=notes,
            elapsed_ms=round(elapsed_ms, 1),
        ),
        ledger,
    )


def _prompt(names: Names, q: Question, analysis: Analysis, h: Hypothesis, gate: Gate) -> str:
    """The investigation prompt: every part from the data in a data block, tables and columns
    written as ``names``' handles, and the handle -> name table as one more data block."""
    findings = [
        {"key": f.key, "segment": f.segment, "status": f.status, "critique": f.critique}
        for f in gate.findings.values()
    ]
    handled = names.structure
    return render(
        "investigate",
        names=data_block(names.block(), "names"),
        question=data_block(handled(question_summary(q)), "question"),
        engine=data_block(handled(engine_summary(analysis.explanation)), "engine"),
        hypothesis_id=h.id,
        hypothesis=data_block(handled(h.model_dump(exclude={"id"})), f"hypothesis {h.id}"),
        compare_args=data_block(handled(compare_arguments(q)), "arguments"),
        findings=data_block(handled(findings), "findings"),
    )


def result_sections(result: AgentResult, ledger: Ledger) -> dict[str, Any]:
    """``hypotheses`` and ``findings`` for result.json, and the ``agent`` stats."""
    hypotheses = []
    for o in result.outcomes:
        own = {e.id: e for e in ledger.of(o.hypothesis.id)}
        cited = o.evidence or list(own)
        evidence = []
        for eid in cited:
            entry = own.get(eid)
            if entry is None:
                continue
            evidence.append(
                {
                    "id": entry.id,
                    "tool": entry.tool,
                    "arguments": entry.arguments,
                    "sql": entry.sql,
                    "params": entry.params,
                    "result": {"summary": entry.summary, **entry.numbers},
                }
            )
        hypotheses.append(
            {
                **o.hypothesis.model_dump(),
                "status": o.status,
                "confidence": o.confidence,
                "summary": o.summary,
                "stop_reason": o.stop_reason,
                "interrupted": o.interrupted,
                "tool_calls": o.tool_calls,
                "findings": o.findings,
                "evidence": evidence,
            }
        )
    findings = [f.model_dump(mode="json") for f in result.findings]
    findings.sort(key=lambda f: (f["status"] != "accepted", -abs(f.get("share") or 0.0)))
    agent = {
        "mode": result.mode,
        "model": result.model,
        "usage": result.usage.model_dump(),
        "notes": result.notes,
        "elapsed_ms": result.elapsed_ms,
        "ledger_entries": len(ledger.entries),
    }
    return {"hypotheses": hypotheses, "findings": findings, "agent": agent}
