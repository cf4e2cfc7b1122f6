"""The tool registry: an ordered tuple of tools, their Anthropic definitions, and dispatch.

:data:`SQL_TOOLS` holds this package's SQL tools. Layers above extend it with tools of their
own (the engine's ``metric_explain_change``, see :mod:`tasks.tools`); that registry serves the
CLI (``drilldown tool``), the agent loop and the MCP server. Definitions are generated from each
tool's pydantic input model; table and column parameters become enums of the names that exist
in the open database.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from sql_tools._context import ToolContext
from sql_tools._errors import SqlToolError, ToolInputError, one_line, short
from sql_tools.aggregate import AggregateInput, aggregate
from sql_tools.compare_periods import ComparePeriodsInput, compare_periods
from sql_tools.describe import DescribeInput, describe
from sql_tools.output import shallow
from sql_tools.sample import SampleInput, sample


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its public name, input model (docstring = description) and function."""

    name: str
    input_model: type[BaseModel]
    fn: Callable[[ToolContext, Any], BaseModel]

    @property
    def description(self) -> str:
        """The tool description given to a model: the input model's docstring."""
        return inspect.cleandoc(self.input_model.__doc__ or "")

    @property
    def summary(self) -> str:
        """The first sentence of the description."""
        return " ".join(self.description.split()).split(". ")[0].rstrip(".") + "."


def input_schema(
    spec: ToolSpec, ctx: ToolContext | None = None, live: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """JSON schema of a tool's input; with ``ctx``, table/column fields list the live names,
    or ``live``'s lists when given (the agent's handles, see ``tasks.agent.names``)."""
    if live is None and ctx is not None:
        live = {"table": ctx.schema.table_names, "column": ctx.schema.all_refs()}
    return model_schema(spec.input_model, live or {})


def model_schema(model: type[BaseModel], live: dict[str, list[str]]) -> dict[str, Any]:
    """JSON schema of an input model with its ``x-live`` fields as enums of ``live[kind]``
    (a kind without a list: no enum) and no ``x-live`` marker left."""
    schema = copy.deepcopy(model.model_json_schema())
    _apply_live(schema, live)
    return schema


def _apply_live(node: Any, live: dict[str, list[str]]) -> None:
    """Replace every ``x-live`` marker with an enum of live names (or drop it); drop the
    ``x-live-keys`` markers (names as a dict's keys), which only callers translating names
    read."""
    if isinstance(node, dict):
        node.pop("x-live-keys", None)
        kind = node.pop("x-live", None)
        if kind is not None and live.get(kind):
            _set_enum(node, live[kind])
        for v in node.values():
            _apply_live(v, live)
    elif isinstance(node, list):
        for v in node:
            _apply_live(v, live)


def _set_enum(node: dict[str, Any], names: list[str]) -> None:
    if node.get("type") == "string":
        node["enum"] = list(names)
    elif node.get("type") == "array":
        node["items"] = {"type": "string", "enum": list(names)}
    for key in ("anyOf", "oneOf"):
        for option in node.get(key, []):
            if option.get("type") in ("string", "array"):
                _set_enum(option, names)


_CODE_BY_PYDANTIC = {
    "extra_forbidden": "invalid_arguments",
    "literal_error": "invalid_operator",
    "enum": "invalid_operator",
    "greater_than_equal": "invalid_value",
    "greater_than": "invalid_value",
    "less_than_equal": "limit_exceeded",
    "less_than": "limit_exceeded",
    "too_long": "limit_exceeded",
    "string_too_long": "limit_exceeded",
}


def validation_error(exc: ValidationError) -> ToolInputError:
    """A pydantic validation failure as one correctable, one-line tool error."""
    errors = exc.errors(include_url=False)
    extra = [".".join(map(str, e["loc"])) for e in errors if e["type"] == "extra_forbidden"]
    if extra:
        return ToolInputError(f"unexpected field(s): {', '.join(extra)}", code="invalid_arguments")
    first = errors[0]
    where = ".".join(map(str, first["loc"])) or "arguments"
    code = _CODE_BY_PYDANTIC.get(first["type"], "invalid_arguments")
    msg = f"{where}: {first['msg']}"
    if first["type"] not in ("missing", "model_type", "dict_type"):
        msg += f" (got {short(first.get('input'))})"
    if len(errors) > 1:
        msg += f"; and {len(errors) - 1} more problem(s)"
    return ToolInputError(msg, code=code, field=where)


class Registry:
    """An ordered set of tools: their definitions for a model, and validated calls."""

    def __init__(self, tools: tuple[ToolSpec, ...]) -> None:
        self.tools = tools
        self._by_name = {t.name: t for t in tools}
        if len(self._by_name) != len(tools):
            raise ValueError("tool names must be unique")

    def extended(self, *more: ToolSpec) -> Registry:
        """This registry's tools followed by ``more``."""
        return Registry(self.tools + more)

    def anthropic_tools(
        self, ctx: ToolContext | None = None, live: dict[str, list[str]] | None = None
    ) -> list[dict[str, Any]]:
        """The ``tools=[...]`` parameter for ``client.messages.create`` (enums of ``live``'s
        names when given, else of ``ctx``'s)."""
        return [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": input_schema(t, ctx, live),
            }
            for t in self.tools
        ]

    def spec_for(self, name: Any) -> ToolSpec | None:
        """The tool called ``name``; the short form without the ``metric_`` namespace also
        resolves."""
        if not isinstance(name, str):
            return None
        return self._by_name.get(name) or self._by_name.get(f"metric_{name}")

    def call(self, ctx: ToolContext, name: str, arguments: Any) -> BaseModel:
        """Validate ``arguments`` and run tool ``name``; raises ``SqlToolError`` on bad input."""
        spec = self.spec_for(name)
        if spec is None:
            raise ToolInputError(
                f"unknown tool {short(name)}", code="unknown_tool", valid_values=list(self._by_name)
            )
        return run_tool(ctx, spec, arguments)

    def dispatch(self, ctx: ToolContext, name: str, arguments: Any) -> tuple[bool, dict[str, Any]]:
        """Run a tool call and return ``(is_error, payload)``, never raising for bad input.

        ``payload`` is the result as JSON-safe data, or ``{"error": {"code", "message"}}``.
        """
        try:
            return False, self.call(ctx, name, arguments).model_dump(mode="json")
        except SqlToolError as exc:
            return True, exc.to_dict()


def run_tool(ctx: ToolContext, spec: ToolSpec, arguments: Any) -> BaseModel:
    """Validate ``arguments`` (size, nesting, JSON, the input model), then run ``spec``."""
    if isinstance(arguments, str | bytes):
        text = arguments.decode("utf-8", "replace") if isinstance(arguments, bytes) else arguments
    else:
        try:
            text = json.dumps(arguments, default=str)
        except RecursionError:
            raise _too_deep(ctx, None) from None
    if len(text) > ctx.limits.max_input_bytes:
        raise ToolInputError(
            f"arguments are larger than {ctx.limits.max_input_bytes} bytes", code="limit_exceeded"
        )
    _, depth = shallow(text, ctx.limits.max_nesting)
    if depth > ctx.limits.max_nesting:
        raise _too_deep(ctx, depth)
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ToolInputError(f"arguments are not valid JSON: {one_line(exc, 120)}") from None
    if not isinstance(arguments, dict):
        raise ToolInputError("arguments must be a JSON object")
    try:
        inp = spec.input_model.model_validate(arguments)
    except ValidationError as exc:
        raise validation_error(exc) from None
    return spec.fn(ctx, inp)


def _too_deep(ctx: ToolContext, depth: int | None) -> ToolInputError:
    found = f" ({depth:,} levels)" if depth else ""
    return ToolInputError(
        f"arguments are nested too deeply{found}; at most {ctx.limits.max_nesting} levels allowed"
    )


SQL_TOOLS = Registry(
    (
        ToolSpec("metric_describe", DescribeInput, describe),
        ToolSpec("metric_sample", SampleInput, sample),
        ToolSpec("metric_aggregate", AggregateInput, aggregate),
        ToolSpec("metric_compare_periods", ComparePeriodsInput, compare_periods),
    )
)
"""The SQL tools: describe, sample, aggregate, compare periods."""
