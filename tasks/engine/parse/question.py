"""The question: a metric, its filters, the periods and the dimensions built together into a
:class:`Question`, and the checks that need no data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sql_tools import Filter, Schema, ToolInputError
from tasks.engine.parse.dimensions import _dimensions
from tasks.engine.parse.expression import _parse_expression
from tasks.engine.parse.filters import _checked_filter, _split_filter, parse_filter
from tasks.engine.parse.metric import _check_grain, parse_metric
from tasks.engine.parse.named_metrics import MetricDef, _lookup_metric
from tasks.engine.parse.periods import _periods, detect_time_column, parse_period
from tasks.engine.parse.validation import _validated
from tasks.engine.spec import Question


def check_question_text(
    metric: str,
    baseline: str,
    comparison: str,
    *,
    grain: str | None = None,
    filters: Sequence[str] = (),
    metrics_file: Path | None = None,
) -> None:
    """Refuse what is wrong with a question whatever the data: the metric's syntax (or its name
    in ``metrics_file``), the filters' syntax, the grain and the periods' form. Run before any
    data is loaded, so a question that can never be asked loads nothing; :func:`build_question`
    checks the same again, with the columns.

    Raises:
        ToolInputError: The first problem, as :func:`build_question` words it.
    """
    _, mdef = _lookup_metric(metric, metrics_file)
    _parse_expression(mdef.expression if mdef else metric)
    for f in [*(mdef.filters if mdef else []), *filters]:
        _split_filter(f)
    _check_grain(grain if grain is not None else (mdef.grain if mdef else None))
    parse_period(baseline)
    parse_period(comparison)


def _table_by_period(schema: Schema, expression: str, period_ref: str | None) -> str | None:
    """When a metric fits several tables, the one that has the period column (or a date column)."""
    try:
        parse_metric(expression, schema, None)
        return None
    except ToolInputError as exc:
        fits = exc.details.get("valid_values") if exc.details.get("field") == "table" else None
        if not fits:
            return None
    with_period = []
    for t in fits:
        try:
            if period_ref is not None:
                schema.column(t, period_ref)
            else:
                detect_time_column(schema, t)
            with_period.append(t)
        except ToolInputError:
            continue
    return with_period[0] if len(with_period) == 1 else None


def _pick_table(schema: Schema, table: str | None, mdef: MetricDef | None) -> str | None:
    """Explicit table, else the definition's; both given must agree."""
    if mdef is None or mdef.table is None:
        return table
    if table is not None and schema.table(table) != schema.table(mdef.table):
        raise ToolInputError(
            f"--table {table!r} differs from the metric's table {mdef.table!r}",
            code="invalid_arguments",
            field="table",
        )
    return mdef.table


def build_question(
    schema: Schema,
    *,
    metric: str,
    table: str | None = None,
    time_column: str | None = None,
    period_column: str | None = None,
    baseline: str,
    comparison: str,
    grain: str | None = None,
    dimensions: str | Sequence[str] | None = None,
    filters: Sequence[str] = (),
    metrics_file: Path | None = None,
    structured_filters: Sequence[Filter] = (),
    named_metrics: bool = True,
    **search: int | float | None,
) -> Question:
    """Build a :class:`Question` from command-line style arguments.

    ``metric`` is an expression, or a bare name looked up in ``metrics_file`` (default:
    ``metrics.yaml`` in the current directory, if present). A named metric supplies defaults for
    table, time column, grain and dimensions; explicit arguments win; its filters and ``filters``
    both apply. With ``period_column`` the periods are labels; otherwise both must be dates or
    date ranges on ``time_column`` (or the table's detected date column). ``dimensions`` is
    ``"a,b"`` or a list; None picks :func:`default_dimensions`, leaving out the metric's
    columns, the period column and columns an ``=`` filter pins to one value.
    ``structured_filters`` are already-validated filters (the tools' form), added to the parsed
    ones; ``named_metrics=False`` reads ``metric`` as an expression only (no ``metrics.yaml``).

    ``search`` sets the search's own settings, :class:`Question`'s fields (``max_depth``...);
    None keeps a setting's default.

    Raises:
        ToolInputError: Every problem, as a one-line message (model validation included).
    """
    search = {k: v for k, v in search.items() if v is not None}
    if time_column is not None and period_column is not None:
        raise ToolInputError(
            "give --time-column or --period-column, not both", code="invalid_arguments"
        )
    name, mdef = _lookup_metric(metric, metrics_file) if named_metrics else (None, None)
    expression = mdef.expression if mdef else metric
    picked = _pick_table(schema, table, mdef)
    if picked is None:
        picked = _table_by_period(schema, expression, time_column or period_column)
    grain = grain if grain is not None else (mdef.grain if mdef else None)
    base = parse_metric(expression, schema, picked, grain=grain, name=name)
    all_filters = [*(mdef.filters if mdef else []), *filters]
    parsed = [parse_filter(f, schema, base.table) for f in all_filters]
    parsed += [_checked_filter(f, schema, base.table) for f in structured_filters]
    full = parse_metric(expression, schema, base.table, grain=grain, filters=parsed, name=name)
    if time_column is None and period_column is None and mdef is not None:
        time_column = mdef.time_column
    periods = _periods(
        schema,
        full.table,
        time_column=time_column,
        period_column=period_column,
        baseline=baseline,
        comparison=comparison,
    )
    if dimensions is None and mdef is not None:
        dimensions = mdef.dimensions
    dims = _dimensions(schema, full, periods, dimensions)
    return _validated(
        lambda: Question(metric=full, periods=periods, dimensions=dims, **search),
        what="invalid question",
        code="invalid_arguments",
    )
