"""What to investigate: one :class:`Request`, built once where a question enters (the
``drilldown investigate`` command, the ``investigate`` flow's one parameter, the weekly review's
metrics) and handed down whole, or the part a layer needs: :meth:`Request.question`, the
question's arguments as the engine's parser (``build_question``) takes them.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class QuestionArgs(BaseModel):
    """The question, as asked: the engine's parser's arguments (see ``build_question``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    table: str | None = None
    time_column: str | None = None
    period_column: str | None = None
    baseline: str
    comparison: str
    grain: str | None = None
    dimensions: list[str] | None = None
    filters: list[str] | None = None
    max_depth: int | None = None
    min_support: float | None = None
    metrics_file: str | None = None

    @field_validator("dimensions", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        """``a,b`` (as the command line takes it) is the list of its names."""
        if isinstance(value, str):
            return [d.strip() for d in value.split(",")] if value else None
        return value

    @field_validator("metrics_file", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return _text(value)


class Request(QuestionArgs):
    """What to investigate: the question and where its data is, where the outputs go, how the
    hypotheses are investigated and whether the investigation is remembered. The
    ``investigate`` flow's one parameter (see :func:`flows.investigate.investigate`)."""

    data: list[str]
    out: str = "drilldown-out"
    db: str | None = None
    offline: bool = False
    model: str | None = None
    remember: bool = True
    source: str | None = None
    load_options: dict[str, Any] | None = None
    """How the files are read (``LoadOptions``' fields: encoding, delimiter, decimal_comma,
    date_format, max_rows, max_bytes); None: detected."""

    @field_validator("data", "out", "db", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        return [_text(v) for v in value] if isinstance(value, list | tuple) else _text(value)

    def question(self) -> dict[str, Any]:
        """The question's arguments, as the engine's parser takes them."""
        args = self.model_dump(include=set(QuestionArgs.model_fields))
        return {**args, "filters": list(self.filters or [])}


def _text(value: Any) -> Any:
    """A path as its text (the command line gives paths); anything else as it is."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value
