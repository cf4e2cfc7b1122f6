"""Hypotheses from Claude: one forced ``propose_hypotheses`` call over the question, the data
profile, the engine's answer and similar past investigations (all inside data blocks).

Tables and columns are handles to the model (:mod:`tasks.agent.names`); the proposal's handles
become names. Proposals are validated: segment columns must exist, text is flattened and capped.
An engine root cause the model left out is added from the offline planner, so no measured cause
goes uninvestigated; when the call fails the offline hypotheses are used and the reason is noted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from prompts import render
from sql_tools import MAX_SEGMENT_COLUMNS, ToolContext
from sql_tools.registry import model_schema
from tasks.agent.config import AgentConfig
from tasks.agent.loop import _api_error, _usage
from tasks.agent.models import Category, Hypothesis, Usage
from tasks.agent.names import Names
from tasks.agent.planner import offline_hypotheses
from tasks.agent.untrusted import clean, data_block
from tasks.engine.result import Explanation

Value = str | int | float | bool | None

if TYPE_CHECKING:  # the SDK loads only when a client is used (not offline)
    import anthropic


class ProposedHypothesis(BaseModel):
    """One candidate cause."""

    title: str = Field(max_length=200)
    story: str = Field(max_length=2000, description="The causal story.")
    expected: str = Field(max_length=1000, description="What the data shows if it is true.")
    dimensions: list[str] = Field(
        default=[],
        max_length=6,
        description="Columns to check.",
        json_schema_extra={"x-live": "column"},
    )
    segment: dict[str, Value] = Field(
        default={},
        max_length=MAX_SEGMENT_COLUMNS,
        description="column -> value.",
        json_schema_extra={"x-live-keys": "column"},
    )
    category: Category = "rate"
    prior: float = Field(ge=0.0, le=1.0)


class ProposeHypothesesInput(BaseModel):
    """Propose the hypotheses to investigate, most likely first."""

    hypotheses: list[ProposedHypothesis] = Field(min_length=1, max_length=12)


def engine_summary(e: Explanation, limit: int = 8) -> dict[str, Any]:
    """The engine's answer, small: change, root causes, top drivers, the largest moves where the
    noise cannot be judged, shift, data quality."""

    def seg(s: Any) -> dict[str, Any]:
        keys = (
            "segment",
            "aliases",
            "baseline",
            "comparison",
            "contribution",
            "share",
            "effect",
            "p_value",
        )
        return {k: getattr(s, k) for k in keys}

    return {
        "metric": e.metric.model_dump(),
        "baseline": e.baseline.model_dump(),
        "comparison": e.comparison.model_dump(),
        "change": e.change.model_dump(),
        "root_causes": [seg(s) for s in e.root_causes],
        "drivers": [seg(s) for s in e.drivers[:limit]],
        "offsetting": [seg(s) for s in e.offsetting[: limit // 2]],
        # the largest moves, as facts, where the noise cannot be judged (change.noise_unjudged)
        "movers": [seg(s) for s in e.movers],
        "global_shift": seg(e.global_shift) if e.global_shift else None,
        "data_quality": [d.message for d in e.data_quality],
        "dimensions": e.dimensions,
    }


def propose(
    client: anthropic.Anthropic,
    ctx: ToolContext,
    question: dict[str, Any],
    e: Explanation,
    config: AgentConfig,
    history: dict[str, Any] | None = None,
) -> tuple[list[tuple[Hypothesis, dict[str, Any]]], Usage, list[str]]:
    """Hypotheses (each with the offline plan for the ones taken from the engine), usage, notes."""
    import anthropic  # loaded with the client; offline runs never import it

    fallback = offline_hypotheses(e, config.max_hypotheses, history)
    names = Names(ctx.schema)
    prompt = render(
        "hypothesize",
        question=data_block(names.structure(question), "question"),
        names=data_block(names.block(), "names"),
        engine=data_block(names.structure(engine_summary(e)), "engine"),
        history=data_block(history or {}, "history"),
        max_hypotheses=str(config.max_hypotheses),
    )
    tool = {
        "name": "propose_hypotheses",
        "description": ProposeHypothesesInput.__doc__,
        "input_schema": model_schema(ProposeHypothesesInput, names.live()),
    }
    try:
        resp = client.messages.create(
            model=config.model,
            max_tokens=config.max_tokens * 2,
            system=[
                {
                    "type": "text",
                    "text": render("system", max_tool_calls=str(config.budget.max_tool_calls)),
                }
            ],
            tools=[tool],
            tool_choice={"type": "tool", "name": "propose_hypotheses"},
            messages=[{"role": "user", "content": prompt}],
        )
    except anthropic.APIError as exc:
        return fallback, Usage(), [f"hypotheses from the engine: {_api_error(exc)}"]
    usage = _usage(resp.usage)
    use = next((c for c in resp.content if c.type == "tool_use"), None)
    raw = names.to_real(ProposeHypothesesInput, use.input, strict=False) if use else None
    try:
        proposed = ProposeHypothesesInput.model_validate(raw)
    except ValidationError as exc:
        note = f"hypotheses from the engine: the model's proposal was invalid ({exc.error_count()} errors)"
        return fallback, usage, [note]
    columns = set(ctx.schema.all_refs())
    hyps: list[tuple[Hypothesis, dict[str, Any]]] = []
    for p in proposed.hypotheses[: config.max_hypotheses]:
        segment = {k: v for k, v in p.segment.items() if k in columns}
        h = Hypothesis(
            id=f"h{len(hyps) + 1}",
            title=clean(p.title, 200),
            story=clean(p.story, 2000),
            expected=clean(p.expected, 1000),
            dimensions=[d for d in p.dimensions if d in columns],
            segment=segment,
            category=p.category,
            prior=p.prior,
            source="model",
        )
        hyps.append((h, {"kind": "model"}))
    covered = [h.segment for h, _ in hyps]
    for h, plan in fallback:
        if plan.get("kind") == "cause" and not _same_in(h.segment, covered):
            hyps.append((h.model_copy(update={"id": f"h{len(hyps) + 1}"}), plan))
    return hyps, usage, []


def _same_in(seg: dict[str, Any], segs: list[dict[str, Any]]) -> bool:
    want = {k: str(v) for k, v in seg.items()}
    return any({k: str(v) for k, v in s.items()} == want for s in segs)
