"""The product's tools: the SQL tools of :mod:`sql_tools` and the engine as a tool
(``metric_explain_change``, :mod:`tasks.engine.tool`), in one registry.

This registry serves every caller that offers tools: the agent (Claude's tool definitions and
dispatch, the offline planner), the gate re-running evidence, ``drilldown tool`` / ``tools`` and
the MCP server.
"""

from __future__ import annotations

from sql_tools.registry import SQL_TOOLS, ToolSpec
from tasks.engine.tool import ExplainChangeInput, explain

REGISTRY = SQL_TOOLS.extended(ToolSpec("metric_explain_change", ExplainChangeInput, explain))
TOOLS = REGISTRY.tools
anthropic_tools = REGISTRY.anthropic_tools
call = REGISTRY.call
dispatch = REGISTRY.dispatch
spec_for = REGISTRY.spec_for

__all__ = ["REGISTRY", "TOOLS", "anthropic_tools", "call", "dispatch", "spec_for"]
