"""Turn what users write into the engine's input models (:mod:`tasks.engine.spec`).

Users write metrics as ``sum(revenue)``, ``sum(purchases) / sum(sessions)`` or
``count(distinct users.plan)``; filters as ``platform=ios`` or ``country in US,GB``; periods as
``2024-03-18:2024-03-24`` or a label. A ``metrics.yaml`` file can name metrics. Everything is
parsed by hand-written scanners and resolved against the live :class:`Schema`: no user text ever
reaches SQL. Every problem raises :class:`ToolInputError` with a one-line message.

- :mod:`.expression`: the metric grammar (syntax only); :mod:`.metric`: a metric resolved
  against the schema (table, columns, types, grain).
- :mod:`.filters`: the filter grammar, resolved and typed against the schema.
- :mod:`.periods`: dates, date ranges, labels and the time column.
- :mod:`.dimensions`: the columns a question searches.
- :mod:`.named_metrics`: ``metrics.yaml``.
- :mod:`.question`: all of them built into a :class:`Question` (:func:`build_question`).
- :mod:`.columns` and :mod:`.validation`: column references and one-line model errors, shared.

Error codes: metric syntax ``invalid_arguments`` (field ``metric``); ``sum``/``avg`` of a
non-numeric column and filter values of the wrong type ``type_mismatch``; filter syntax
``invalid_operator`` (no operator) or ``invalid_value``; periods ``invalid_period``; names
``unknown_table`` / ``unknown_column``. (``invalid_metric`` and ``invalid_filter`` are not in
:data:`sql_tools._errors.CODES`; switch :data:`METRIC_CODE` / :data:`FILTER_CODE` if they are added.)

Why hand-written, not sqlglot (measured in ``benchmarks/grammar.py``, results in
``benchmarks/results/grammar.md``): filters as users type them (``country in US,GB``,
``date>=2024-03-01``, ``app_version=5.2.0``, ``name=O'Brien``) are not SQL, and a sqlglot syntax
layer broke 29 of 105 corpus filters. For metrics, a sqlglot tree plus a node whitelist agreed on
105 of 108 inputs, but took more code, ran 8-13x slower and lost error positions (unterminated
quotes; a RecursionError past ~45 parentheses); the safety comes from the whitelist either way.
"""

from __future__ import annotations

from tasks.engine.parse.columns import _Ref as _Ref
from tasks.engine.parse.dimensions import MAX_DIMENSION_DISTINCT as MAX_DIMENSION_DISTINCT
from tasks.engine.parse.dimensions import default_dimensions
from tasks.engine.parse.expression import _AGG_HINT as _AGG_HINT
from tasks.engine.parse.expression import MAX_METRIC_CHARS as MAX_METRIC_CHARS
from tasks.engine.parse.expression import METRIC_CODE as METRIC_CODE
from tasks.engine.parse.expression import _Agg as _Agg
from tasks.engine.parse.expression import _Expr as _Expr
from tasks.engine.parse.expression import _metric_error as _metric_error
from tasks.engine.parse.expression import _parse_expression as _parse_expression
from tasks.engine.parse.filters import _OPS_HINT as _OPS_HINT
from tasks.engine.parse.filters import FILTER_CODE as FILTER_CODE
from tasks.engine.parse.filters import MAX_FILTER_CHARS as MAX_FILTER_CHARS
from tasks.engine.parse.filters import _check_arity as _check_arity
from tasks.engine.parse.filters import _filter_error as _filter_error
from tasks.engine.parse.filters import _filter_from as _filter_from
from tasks.engine.parse.filters import _FilterSyntax as _FilterSyntax
from tasks.engine.parse.filters import _split_filter as _split_filter
from tasks.engine.parse.filters import parse_filter
from tasks.engine.parse.metric import _metric_from as _metric_from
from tasks.engine.parse.metric import parse_metric
from tasks.engine.parse.named_metrics import METRICS_FILE as METRICS_FILE
from tasks.engine.parse.named_metrics import MetricDef, load_metrics
from tasks.engine.parse.periods import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from tasks.engine.parse.periods import detect_time_column, parse_period
from tasks.engine.parse.question import build_question
from tasks.engine.parse.question import check_question_text as check_question_text

__all__ = [
    "MetricDef",
    "build_question",
    "default_dimensions",
    "detect_time_column",
    "load_metrics",
    "parse_filter",
    "parse_metric",
    "parse_period",
]
