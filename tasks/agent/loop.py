"""The Claude tool-use loop for one hypothesis (plain module: no Prefect inside).

The model sees the system prompt and the tool definitions (both cached), the question and the
hypothesis, with tables and columns as handles (:mod:`tasks.agent.names`); it calls tools until
it calls ``conclude`` or stops calling tools. Tool errors go back as ``is_error`` results it can
correct. Every result goes back inside an untrusted-data block;
older results are replaced by their ledger summaries (working memory), so a long investigation
does not replay raw rows. Budgets end the loop cleanly with an inconclusive verdict.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tasks.agent.config import AgentConfig
from tasks.agent.models import LedgerEntry, Outcome, Usage
from tasks.agent.names import Names
from tasks.agent.session import Session, tool_definitions
from tasks.agent.untrusted import data_block, to_json

if TYPE_CHECKING:  # the SDK loads only when a client is used (not offline)
    import anthropic


def run_hypothesis(
    client: anthropic.Anthropic, session: Session, system: str, prompt: str, config: AgentConfig
) -> Outcome:
    """Investigate ``session.h`` with Claude; always returns an outcome, never raises for API
    trouble (it is the outcome's ``stop_reason``)."""
    import anthropic  # loaded with the client; offline runs never import it

    b = config.budget
    names = Names(session.ctx.schema)
    tools = tool_definitions(names)
    tools[-1] = {**tools[-1], "cache_control": {"type": "ephemeral"}}
    system_blocks = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    entries: dict[str, LedgerEntry] = {}
    usage, t0, turns, stop = Usage(), time.monotonic(), 0, ""
    while not stop:
        stop = _budget_stop(session, usage, turns, time.monotonic() - t0, config)
        if stop:
            break
        try:
            resp = client.messages.create(
                model=config.model,
                max_tokens=min(config.max_tokens, b.max_output_tokens - usage.output_tokens),
                system=system_blocks,
                tools=tools,
                tool_choice={"type": "auto", "disable_parallel_tool_use": False},
                messages=_working_memory(messages, entries, config.memory_chars),
            )
        except anthropic.APIError as exc:
            stop = f"error: {_api_error(exc)}"
            break
        turns += 1
        usage = usage.add(_usage(resp.usage))
        tokens = {"input": resp.usage.input_tokens, "output": resp.usage.output_tokens}
        messages.append(
            {
                "role": "assistant",
                "content": [c.model_dump(exclude_none=True) for c in resp.content],
            }
        )
        uses = [c for c in resp.content if c.type == "tool_use"]
        if not uses:
            stop = "end_turn" if resp.stop_reason != "max_tokens" else "budget: response length"
            break
        results = []
        for use in uses:
            is_error, payload, entry = session.call(use.name, use.input, tokens, names)
            entries[use.id] = entry
            content = data_block({"evidence_id": entry.id, **payload}, f"{use.name} {entry.id}")
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": content,
                    "is_error": is_error,
                }
            )
        messages.append({"role": "user", "content": results})
        if session.verdict is not None:
            stop = "concluded"
    usage = usage.model_copy(update={"cost_usd": round(config.cost(usage), 6)})
    return session.outcome(stop, usage, (time.monotonic() - t0) * 1000)


def _budget_stop(s: Session, u: Usage, turns: int, elapsed: float, c: AgentConfig) -> str:
    b = c.budget
    if turns >= b.max_turns:
        return f"budget: {b.max_turns} model turns"
    if s.exhausted:
        return f"budget: {b.max_tool_calls} tool calls"
    if (
        u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
        >= b.max_input_tokens
    ):
        return f"budget: {b.max_input_tokens} input tokens"
    if u.output_tokens >= b.max_output_tokens - 64:
        return f"budget: {b.max_output_tokens} output tokens"
    if elapsed >= b.wall_s:
        return f"budget: {b.wall_s:.0f} s"
    return ""


def _working_memory(
    messages: list[dict[str, Any]], entries: dict[str, LedgerEntry], cap: int
) -> list[dict[str, Any]]:
    """The conversation with every tool result but the latest turn's replaced by its ledger
    summary (figures kept, rows dropped, capped at ``cap`` characters)."""
    out = []
    last = len(messages) - 1
    for i, m in enumerate(messages):
        if i == last or m["role"] != "user" or isinstance(m["content"], str):
            out.append(m)
            continue
        content = []
        for block in m["content"]:
            entry = entries.get(block.get("tool_use_id", ""))
            if block.get("type") != "tool_result" or entry is None:
                content.append(block)
                continue
            brief = to_json({"summary": entry.summary, "numbers": entry.numbers})
            if len(brief) > cap:
                brief = brief[: cap - 1] + "…"
            memo = {"evidence_id": entry.id, "earlier_result_summarized": brief}
            content.append({**block, "content": data_block(memo, f"{entry.tool} {entry.id}")})
        out.append({"role": "user", "content": content})
    return out


def _usage(u: Any) -> Usage:
    return Usage(
        requests=1,
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_read_input_tokens=getattr(u, "cache_read_input_tokens", None) or 0,
        cache_creation_input_tokens=getattr(u, "cache_creation_input_tokens", None) or 0,
    )


def _api_error(exc: anthropic.APIError) -> str:
    """What went wrong, without headers or key material."""
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    if status == 529:
        return f"Anthropic API overloaded (529) after retries ({kind})"
    if status == 429:
        return f"rate limited (429) after retries ({kind})"
    if status is not None:
        return f"Anthropic API error {status} ({kind})"
    return f"could not reach the Anthropic API ({kind})"
