"""Named metrics: a ``metrics.yaml`` file read and syntax-checked, and a bare metric name looked
up in it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from sql_tools import ToolInputError, short
from tasks.engine.parse.expression import _metric_error, _parse_expression
from tasks.engine.parse.filters import _split_filter
from tasks.engine.parse.validation import _first_error

METRICS_FILE = "metrics.yaml"
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class MetricDef(BaseModel):
    """One named metric in ``metrics.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expression: str
    table: str | None = None
    time_column: str | None = None
    grain: Literal["day"] | None = None
    filters: list[str] = []
    dimensions: list[str] | None = None
    description: str | None = None


def _file_error(path: Path, problem: str) -> ToolInputError:
    return ToolInputError(f"{path}: {problem}", code="invalid_arguments", field="metrics_file")


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _file_error(path, "metrics file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _file_error(path, f"cannot read metrics file: {exc.__class__.__name__}") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise _file_error(path, f"invalid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise _file_error(path, f"invalid YAML: {exc}") from None


def _metric_def(path: Path, name: object, body: object) -> MetricDef:
    if not isinstance(name, str) or not _BARE.fullmatch(name):
        raise _file_error(path, f"metric name {short(name)} must match [A-Za-z_][A-Za-z0-9_]*")
    if not isinstance(body, dict):
        raise _file_error(path, f"metric {name!r} must be a mapping with an 'expression' key")
    try:
        mdef = MetricDef.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(MetricDef.model_fields)
            problem = f"unknown key {key!r} (allowed: {allowed})"
        elif err["type"] == "missing":
            problem = f"missing key {key!r}"
        else:
            problem = _first_error(exc)
        raise _file_error(path, f"metric {name!r}: {problem}") from None
    _check_def_syntax(path, name, mdef)
    return mdef


def _check_def_syntax(path: Path, name: str, mdef: MetricDef) -> None:
    """Syntax-check a definition's expression and filters (columns are checked later)."""
    try:
        _parse_expression(mdef.expression)
        for f in mdef.filters:
            _split_filter(f)
    except ToolInputError as exc:
        raise _file_error(path, f"metric {name!r}: {exc.message}") from None


def load_metrics(path: Path) -> dict[str, MetricDef]:
    """Read named metrics from a YAML file with a top-level ``metrics:`` mapping.

    Expressions and filters are syntax-checked here; column names are checked when a metric is
    used (:func:`build_question`), against that database's schema.

    Raises:
        ToolInputError: Missing or unreadable file, bad YAML, wrong shape, unknown keys (naming
            the metric and key), malformed expressions or filters. Messages start with the path.
    """
    path = Path(path)
    doc = _read_yaml(path)
    if not isinstance(doc, dict) or "metrics" not in doc or set(doc) - {"metrics", "review"}:
        # 'review' is the weekly review's section of the same file
        raise _file_error(path, "expected a mapping with a 'metrics' key (and optionally 'review')")
    metrics = doc["metrics"]
    if not isinstance(metrics, dict) or not metrics:
        raise _file_error(path, "'metrics' must be a non-empty mapping of name -> definition")
    return {name: _metric_def(path, name, body) for name, body in metrics.items()}


def _lookup_metric(text: str, metrics_file: Path | None) -> tuple[str | None, MetricDef | None]:
    """(name, definition) when ``text`` is a bare metric name, else (None, None)."""
    name = text.strip() if isinstance(text, str) else ""
    if not _BARE.fullmatch(name):
        return None, None
    path = metrics_file if metrics_file is not None else Path.cwd() / METRICS_FILE
    if metrics_file is None and not path.is_file():
        raise _metric_error(
            text, f"not an expression like sum({name}), and there is no {METRICS_FILE} here"
        )
    defs = load_metrics(path)
    if name not in defs:
        raise ToolInputError(
            f"unknown metric {name!r} in {path}",
            code="invalid_arguments",
            valid_values=list(defs),
            field="metric",
        )
    return name, defs[name]
