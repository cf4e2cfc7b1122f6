"""Turn what users write into the engine's input models (:mod:`tasks.engine.spec`).

Users write metrics as ``sum(revenue)``, ``sum(purchases) / sum(sessions)`` or
``count(distinct users.plan)``; filters as ``platform=ios`` or ``country in US,GB``; periods as
``2024-03-18:2024-03-24`` or a label. A ``metrics.yaml`` file can name metrics. Everything is
parsed by hand-written scanners and resolved against the live :class:`Schema`: no user text ever
reaches SQL. Every problem raises :class:`ToolInputError` with a one-line message.

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

Why one module of this size: the metric grammar, the filter grammar, periods, named metrics and
:func:`build_question` resolve names against one live :class:`Schema` with one set of error codes;
a question is built by all of them together.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from sql_tools import Column, Filter, FilterOp, Schema, ToolInputError, short
from tasks.engine.spec import AggFn, Aggregate, DateRange, Metric, Periods, Question

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

METRIC_CODE = "invalid_arguments"
"""Code for metric syntax errors (``invalid_metric`` is not a registered code)."""
FILTER_CODE = "invalid_value"
"""Code for malformed filter values (``invalid_filter`` is not a registered code)."""
MAX_METRIC_CHARS = 1_000
MAX_FILTER_CHARS = 64 * 1024
MAX_LABEL_CHARS = 200
MAX_DIMENSION_DISTINCT = 1_000
METRICS_FILE = "metrics.yaml"

_T = TypeVar("_T")
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _validated(build: Callable[[], _T], *, what: str, code: str, field: str | None = None) -> _T:
    """Run a model constructor; turn a pydantic ``ValidationError`` into a one-line error."""
    try:
        return build()
    except ValidationError as exc:
        raise ToolInputError(f"{what}: {_first_error(exc)}", code=code, field=field) from None


def _first_error(exc: ValidationError) -> str:
    """``loc: message`` of the first validation error (plus how many more there were)."""
    errors = exc.errors()
    err = errors[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    loc = ".".join(str(p) for p in err["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"


# --------------------------------------------------------------------------------------------
# Metric expressions: tokenizer and parser (syntax only, no schema)
# --------------------------------------------------------------------------------------------

_TokenKind = Literal["name", "quoted", "(", ")", "*", "/", ".", "number", "other", "end"]
_TOKEN_RE = re.compile(
    r"""(?P<ws>\s+)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<quoted>"(?:[^"]|"")*")
      | (?P<number>\d+(?:\.\d+)?)
      | (?P<punct>[()*/.])""",
    re.X,
)


@dataclass(frozen=True)
class _Token:
    kind: _TokenKind
    text: str
    pos: int
    """0-based offset in the text."""

    def describe(self) -> str:
        """How the token is named in an error message."""
        if self.kind == "end":
            return "the end of the text"
        if self.kind == "number":
            return f"number {self.text}"
        return repr(self.text)


def _unquote(quoted: str) -> str:
    """Strip the surrounding double quotes and undo ``""`` escapes."""
    return quoted[1:-1].replace('""', '"')


def _tokenize(text: str) -> list[_Token]:
    """Split a metric into tokens; unknown characters become ``other`` tokens for the parser."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            if text[pos] == '"':
                raise _metric_error(text, "unterminated quoted name", pos)
            tokens.append(_Token("other", text[pos], pos))
            pos += 1
            continue
        group = m.lastgroup
        if group == "name":
            tokens.append(_Token("name", m.group(), pos))
        elif group == "quoted":
            tokens.append(_Token("quoted", _unquote(m.group()), pos))
        elif group == "number":
            tokens.append(_Token("number", m.group(), pos))
        elif group == "punct":
            tokens.append(_Token(m.group(), m.group(), pos))  # type: ignore[arg-type]
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _metric_error(text: str, problem: str, pos: int | None = None) -> ToolInputError:
    """``invalid metric 'text' at character N: problem`` (N is 1-based)."""
    where = f" at character {pos + 1}" if pos is not None else ""
    return ToolInputError(
        f"invalid metric {short(text, 100)}{where}: {problem}", code=METRIC_CODE, field="metric"
    )


@dataclass(frozen=True)
class _Ref:
    """A column as written: ``name`` or ``table.name``."""

    table: str | None
    name: str

    @property
    def text(self) -> str:
        return f"{self.table}.{self.name}" if self.table else self.name

    def key_for(self, base: str) -> str:
        """The reference to resolve with ``base`` as the base table (``base.x`` -> ``x``)."""
        if self.table is not None and self.table.lower() == base.lower():
            return self.name
        return self.text


@dataclass(frozen=True)
class _Agg:
    fn: AggFn
    ref: _Ref | None


@dataclass(frozen=True)
class _Expr:
    numerator: _Agg
    denominator: _Agg | None

    @property
    def refs(self) -> list[_Ref]:
        aggs = [self.numerator] + ([self.denominator] if self.denominator else [])
        return [a.ref for a in aggs if a.ref is not None]


_AGG_HINT = "an aggregate: sum(x), avg(x), count(*), count(x) or count(distinct x)"


class _Parser:
    """Recursive-descent parser for ``AGG`` or ``AGG / AGG``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    def peek(self) -> _Token:
        return self.tokens[min(self.i, len(self.tokens) - 1)]

    def take(self) -> _Token:
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, tok: _Token, expected: str) -> ToolInputError:
        found = tok.describe()
        return _metric_error(self.text, f"expected {expected}, found {found}", tok.pos)

    def expect(self, kind: _TokenKind, expected: str) -> _Token:
        tok = self.take()
        if tok.kind != kind:
            raise self.fail(tok, expected)
        return tok

    def metric(self) -> _Expr:
        numerator = self.aggregate()
        denominator = None
        if self.peek().kind == "/":
            self.take()
            denominator = self.aggregate()
        tok = self.peek()
        if tok.kind != "end":
            expected = "'/' or the end" if denominator is None else "the end (one '/' at most)"
            raise self.fail(tok, expected)
        return _Expr(numerator, denominator)

    def aggregate(self) -> _Agg:
        tok = self.take()
        fn = tok.text.lower() if tok.kind == "name" else ""
        if fn not in ("sum", "avg", "count"):
            if tok.kind == "name" and self.peek().kind == "(":
                raise _metric_error(
                    self.text,
                    f"unknown function {tok.text!r}; expected sum, avg or count",
                    tok.pos,
                )
            raise self.fail(tok, _AGG_HINT)
        self.expect("(", f"'(' after {tok.text}")
        agg = self.count_args() if fn == "count" else _Agg(fn, self.column())  # type: ignore[arg-type]
        self.expect(")", "')'")
        return agg

    def count_args(self) -> _Agg:
        tok = self.peek()
        if tok.kind == "*":
            self.take()
            return _Agg("count", None)
        if tok.kind == "name" and tok.text.lower() == "distinct":
            self.take()
            if self.peek().kind == "*":
                raise self.fail(self.peek(), "a column after distinct")
            return _Agg("count_distinct", self.column())
        return _Agg("count", self.column())

    def column(self) -> _Ref:
        first = self.name("a column name")
        if self.peek().kind != ".":
            return _Ref(None, first)
        self.take()
        return _Ref(first, self.name("a column name after '.'"))

    def name(self, expected: str) -> str:
        tok = self.take()
        if tok.kind not in ("name", "quoted"):
            raise self.fail(tok, expected)
        if tok.kind == "name" and self.peek().kind == "(":
            raise _metric_error(
                self.text,
                f"nested function {tok.text!r}; expected a column name",
                tok.pos,
            )
        if not tok.text:
            raise _metric_error(self.text, "empty column name", tok.pos)
        return tok.text


def _parse_expression(text: str) -> _Expr:
    """Parse metric text into a syntax tree (no schema lookups)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError(
            f"metric is empty; expected {_AGG_HINT}", code=METRIC_CODE, field="metric"
        )
    if len(text) > MAX_METRIC_CHARS:
        raise _metric_error(text, f"longer than {MAX_METRIC_CHARS} characters")
    return _Parser(text).metric()


# --------------------------------------------------------------------------------------------
# Metrics: resolution against the schema
# --------------------------------------------------------------------------------------------


def _resolve(schema: Schema, table: str, ref: _Ref, field_name: str = "metric") -> Column:
    return _column(schema, table, ref.key_for(table), field_name)


def _column(schema: Schema, table: str, ref: str, field_name: str) -> Column:
    """``schema.column``, whose refusal of a misspelled name also names the closest column:
    a list of every column does not show that ``revenu`` was meant to be ``revenue``."""
    try:
        return schema.column(table, ref, field_name=field_name)
    except ToolInputError as exc:
        if exc.code != "unknown_column" or not isinstance(ref, str):
            raise
        names = [c.ref for c in schema.columns_for(table)]
        close = _closest_name(ref, names)
        hint = f"; closest: {close!r}" if close else ""
        raise ToolInputError(
            f"unknown column {short(ref)} in {field_name} for table {table!r}{hint}",
            code="unknown_column",
            valid_values=names,
            field=field_name,
        ) from None


def _closest_name(name: str, names: Sequence[str]) -> str | None:
    """The name in ``names`` most like ``name`` (case ignored), if any is close."""
    folded = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None


def _resolves(schema: Schema, table: str, ref: _Ref) -> bool:
    try:
        _resolve(schema, table, ref)
    except ToolInputError:
        return False
    return True


def _infer_table(schema: Schema, expr: _Expr, text: str) -> str:
    """The single table on which every column of ``expr`` resolves."""
    refs = expr.refs
    tables = schema.table_names
    if not tables:
        raise ToolInputError("the database has no tables", code="unknown_table", field="table")
    fits = [t for t in tables if all(_resolves(schema, t, r) for r in refs)]
    if len(fits) == 1:
        return fits[0]
    if fits:
        raise ToolInputError(
            f"metric {short(text)} fits more than one table; pass --table",
            code="invalid_arguments",
            valid_values=fits,
            field="table",
        )
    missing = [r.text for r in refs if not any(_resolves(schema, t, r) for t in tables)]
    if missing:
        _refuse_misspelled(schema, missing[0])
    problem = (
        f"no table has column(s) {', '.join(map(repr, missing))}"
        if missing
        else f"no single table has every column of metric {short(text)}"
    )
    raise ToolInputError(
        f"{problem}; pass --table to see its columns",
        code="unknown_column",
        valid_values=tables,
        field="table",
    )


def _refuse_misspelled(schema: Schema, name: str) -> None:
    """Refuse a column no table has by the closest column of any table, when one is close."""
    tables = schema.table_names
    candidates = {c.ref: t for t in tables for c in schema.columns_for(t)}
    close = _closest_name(name.rpartition(".")[2], list(candidates))
    if close is None:
        return
    table = candidates[close]
    raise ToolInputError(
        f"no table has column {short(name)}; closest: {close!r} in table {table!r}",
        code="unknown_column",
        valid_values=[c.ref for c in schema.columns_for(table)],
        field="metric",
    )


def _aggregate(schema: Schema, table: str, agg: _Agg) -> Aggregate:
    """Resolve an aggregate's column and check its type."""
    if agg.ref is None:
        return Aggregate(fn=agg.fn)
    col = _resolve(schema, table, agg.ref)
    if agg.fn in ("sum", "avg") and col.kind != "number":
        raise ToolInputError(
            f"type mismatch: {agg.fn} needs a numeric column; {col.ref!r} is {col.kind} "
            f"({col.type})",
            code="type_mismatch",
            field="metric",
        )
    return Aggregate(fn=agg.fn, column=col.ref)


def _check_grain(grain: str | None) -> Literal["day"] | None:
    if grain is None:
        return None
    if isinstance(grain, str) and grain.strip().lower() == "day":
        return "day"
    raise ToolInputError(
        f"unknown grain {short(grain)}",
        code="invalid_arguments",
        valid_values=["day"],
        field="grain",
    )


def _canonical_filter(schema: Schema, table: str, f: Filter) -> Filter:
    """``f`` with its column resolved against ``table`` (canonical reference)."""
    col = _column(schema, table, f.column, "filters.column")
    return f if col.ref == f.column else f.model_copy(update={"column": col.ref})


def parse_metric(
    text: str,
    schema: Schema,
    table: str | None = None,
    *,
    grain: str | None = None,
    filters: Sequence[Filter] = (),
    name: str | None = None,
) -> Metric:
    """Parse ``sum(x)``, ``avg(x)``, ``count(*)``, ``count(x)``, ``count(distinct x)`` or ``A / B``.

    Keywords are case-insensitive and whitespace may appear anywhere. A column is a bare name,
    ``table.column`` (a joined table's column, or the base table's own) or a double-quoted name
    (``""`` escapes a quote).

    Args:
        text: The metric as the user wrote it.
        schema: The live schema.
        table: Base table; None infers the single table where every column resolves.
        grain: None or ``"day"``.
        filters: Conditions restricting the metric's rows (columns resolved against the table).
        name: The metric's name in ``metrics.yaml``, if any.

    Returns:
        The metric, with canonical column references.

    Raises:
        ToolInputError: Syntax errors (with the character position and what was expected),
            unknown or ambiguous tables, unknown columns, ``sum``/``avg`` of a non-number.
    """
    return _metric_from(
        _parse_expression(text), text, schema, table, grain=grain, filters=filters, name=name
    )


def _metric_from(
    expr: _Expr,
    text: str,
    schema: Schema,
    table: str | None,
    *,
    grain: str | None = None,
    filters: Sequence[Filter] = (),
    name: str | None = None,
) -> Metric:
    """The metric whose syntax ``expr`` was parsed from ``text``, resolved against the schema."""
    day = _check_grain(grain)
    base = schema.table(table) if table is not None else _infer_table(schema, expr, text)
    numerator = _aggregate(schema, base, expr.numerator)
    denominator = _aggregate(schema, base, expr.denominator) if expr.denominator else None
    checked = tuple(_canonical_filter(schema, base, f) for f in filters)
    return _validated(
        lambda: Metric(
            table=base,
            numerator=numerator,
            denominator=denominator,
            grain=day,
            filters=checked,
            name=name,
        ),
        what=f"invalid metric {short(text)}",
        code=METRIC_CODE,
        field="metric",
    )


# --------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------

_NAME_PART = r'(?:"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_]*)'
_FILTER_COL_RE = re.compile(rf"\s*(?P<a>{_NAME_PART})(?:\s*\.\s*(?P<b>{_NAME_PART}))?")
_FILTER_OP_RE = re.compile(
    r"""\s*(?:
        (?P<sym>!=|<>|<=|>=|==|=|<|>)
      | (?P<word>is\s+not\s+null|is\s+null|not\s+null|not\s+in|in|between|contains)
        (?![A-Za-z0-9_])
    )""",
    re.X | re.I,
)
_OP_ALIASES: dict[str, FilterOp] = {
    "<>": "!=",
    "==": "=",
    "is not null": "not_null",
    "is null": "is_null",
    "not null": "not_null",
    "not in": "not_in",
}
_OPS_HINT = "=, !=, <, <=, >, >=, in, not in, between, is null, not null, contains"
_QUOTED_RE = re.compile(r'"(?:[^"]|"")*"')
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class _FilterSyntax:
    """A filter split into its parts, before any schema lookup."""

    column: _Ref
    op: FilterOp
    values: list[str]


def _filter_error(text: str, problem: str, code: str = FILTER_CODE) -> ToolInputError:
    return ToolInputError(f"invalid filter {short(text)}: {problem}", code=code, field="filters")


def _split_values(text: str, rest: str) -> list[str]:
    """Comma-separated values; a value in double quotes may hold commas and spaces."""
    values: list[str] = []
    i, n = 0, len(rest)
    while True:
        while i < n and rest[i].isspace():
            i += 1
        if i < n and rest[i] == '"':
            m = _QUOTED_RE.match(rest, i)
            if m is None:
                raise _filter_error(text, "unterminated quoted value")
            values.append(_unquote(m.group()))
            i = m.end()
            while i < n and rest[i].isspace():
                i += 1
            if i < n and rest[i] != ",":
                raise _filter_error(text, "text after a quoted value; separate values with ','")
        else:
            j = rest.find(",", i)
            item = rest[i : n if j < 0 else j].strip()
            if not item:
                raise _filter_error(text, "empty value")
            if '"' in item:
                raise _filter_error(text, f"stray quote in {short(item)}; quote the whole value")
            values.append(_sql_unquoted(item))
            i = n if j < 0 else j
        if i >= n:
            return values
        i += 1  # the comma


def _sql_unquoted(item: str) -> str:
    """``'ios'`` -> ``ios``: SQL habit quotes text values, and a kept quote would match no row.
    One matching pair is stripped; a quote inside a value (``O'Brien``) stays."""
    if len(item) >= 2 and item[0] == item[-1] == "'":
        return item[1:-1]
    return item


def _check_arity(text: str, op: FilterOp, values: list[str]) -> None:
    shown = op.replace("_", " ")
    if op in ("is_null", "not_null"):
        if values:
            raise _filter_error(text, f"'{shown}' takes no value")
    elif op == "between":
        if len(values) != 2:
            raise _filter_error(text, "between takes two values: low,high")
    elif op not in ("in", "not_in") and len(values) != 1:
        raise _filter_error(text, f"'{shown}' takes one value; use 'in' for a list")


def _split_filter(text: str) -> _FilterSyntax:
    """Split ``col op value`` (syntax only)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("filter is empty", code=FILTER_CODE, field="filters")
    if len(text) > MAX_FILTER_CHARS:
        raise _filter_error(text, f"longer than {MAX_FILTER_CHARS} characters")
    m = _FILTER_COL_RE.match(text)
    if m is None:
        raise _filter_error(text, "expected a column name at the start")
    a, b = (_unquote(p) if p and p.startswith('"') else p for p in (m["a"], m["b"]))
    ref = _Ref(a, b) if b is not None else _Ref(None, a)
    op_m = _FILTER_OP_RE.match(text, m.end())
    if op_m is None:
        raise _filter_error(
            text, f"expected an operator after {ref.text!r} ({_OPS_HINT})", code="invalid_operator"
        )
    raw = op_m["sym"] or " ".join(op_m["word"].lower().split())
    op: FilterOp = _OP_ALIASES.get(raw, raw)  # type: ignore[assignment]
    rest = text[op_m.end() :]
    values = _split_values(text, rest) if rest.strip() else []
    if not values and op not in ("is_null", "not_null"):
        raise _filter_error(text, f"'{op.replace('_', ' ')}' needs a value")
    _check_arity(text, op, values)
    return _FilterSyntax(ref, op, values)


def _number(text: str, col: Column, raw: str) -> int | float:
    s = raw.strip()
    if not _NUMBER_RE.fullmatch(s):
        raise _type_mismatch(text, col, raw, "a number")
    if re.fullmatch(r"[+-]?\d+", s):
        return int(s)
    value = float(s)
    if not math.isfinite(value):
        raise _filter_error(text, f"{short(raw)} is not a finite number")
    return value


def _when(text: str, col: Column, raw: str) -> str:
    s = raw.strip()
    try:
        if col.kind == "timestamp" and ("T" in s or " " in s):
            datetime.fromisoformat(s)
        else:
            date.fromisoformat(s)
    except ValueError:
        raise _type_mismatch(text, col, raw, "an ISO date (YYYY-MM-DD)") from None
    return s


def _type_mismatch(text: str, col: Column, raw: str, expected: str) -> ToolInputError:
    return _filter_error(
        text,
        f"column {col.ref!r} is {col.kind} ({col.type}); {short(raw)} is not {expected}",
        code="type_mismatch",
    )


def _typed(text: str, col: Column, raw: str) -> str | int | float | bool:
    """Convert one value by the column kind (dates stay ISO strings; the tools parse them)."""
    if col.kind == "number":
        return _number(text, col, raw)
    if col.kind == "text":
        return raw
    if col.kind == "boolean":
        word = raw.strip().lower()
        if word not in ("true", "false"):
            raise _type_mismatch(text, col, raw, "true or false")
        return word == "true"
    if col.kind in ("date", "timestamp"):
        return _when(text, col, raw)
    raise _filter_error(
        text,
        f"column {col.ref!r} has type {col.type}; only 'is null' / 'not null' apply",
        code="type_mismatch",
    )


def parse_filter(text: str, schema: Schema, table: str) -> Filter:
    """Parse one filter: ``col=v``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``col in a,b``,
    ``col not in a,b``, ``col between lo,hi``, ``col is null``, ``col not null``,
    ``col contains text``.

    Spaces around symbol operators are optional. Values may be double-quoted (``""`` escapes a
    quote) to hold commas or surrounding spaces. Values are converted by the column's kind:
    numbers to int/float, ``true``/``false`` to bool, dates and timestamps checked and kept as ISO
    strings.

    Raises:
        ToolInputError: ``invalid_operator`` (no operator), ``invalid_value`` (malformed value or
            wrong number of values), ``type_mismatch``, ``unknown_table``, ``unknown_column``.
    """
    return _filter_from(_split_filter(text), text, schema, table)


def _filter_from(syntax: _FilterSyntax, text: str, schema: Schema, table: str) -> Filter:
    """The filter whose syntax was split from ``text``, resolved and typed against the schema."""
    base = schema.table(table)
    col = _resolve(schema, base, syntax.column, "filters.column")
    if syntax.op == "contains" and col.kind != "text":
        raise _filter_error(
            text, f"contains needs a text column; {col.ref!r} is {col.kind}", code="type_mismatch"
        )
    typed = [_typed(text, col, v) for v in syntax.values]
    value: object = None
    if syntax.op in ("in", "not_in", "between"):
        value = typed
    elif typed:
        value = typed[0]
    return _validated(
        lambda: Filter(column=col.ref, op=syntax.op, value=value),
        what=f"invalid filter {short(text)}",
        code=FILTER_CODE,
        field="filters",
    )


def _checked_filter(f: Filter, schema: Schema, table: str) -> Filter:
    """A filter in the tools' form, its column resolved (values are type-checked when bound)."""
    col = _column(schema, schema.table(table), f.column, "filters.column")
    if f.op == "contains" and col.kind != "text":
        raise ToolInputError(
            f"contains needs a text column; {col.ref!r} is {col.kind}", code="type_mismatch"
        )
    return f.model_copy(update={"column": col.ref})


# --------------------------------------------------------------------------------------------
# Periods and the time column
# --------------------------------------------------------------------------------------------

_DATEISH = re.compile(r"[\d\s:.\-]*\d{4}-\d{1,2}-\d{1,2}[\d\s:.\-]*")
_ISO_DAY = r"(\d{4}-\d{2}-\d{2})"
_RANGE_RE = re.compile(rf"{_ISO_DAY}\s*(?::|\.\.)\s*{_ISO_DAY}")
_DAY_RE = re.compile(_ISO_DAY)


def _period_error(text: str, problem: str) -> ToolInputError:
    return ToolInputError(f"invalid period {short(text)}: {problem}", code="invalid_period")


def _iso_day(text: str, part: str) -> date:
    try:
        return date.fromisoformat(part)
    except ValueError:
        raise _period_error(text, f"{part!r} is not a valid date") from None


def parse_period(text: str) -> DateRange | str:
    """Parse a period: ``YYYY-MM-DD:YYYY-MM-DD`` or ``YYYY-MM-DD..YYYY-MM-DD`` (inclusive), a
    single ``YYYY-MM-DD`` (one day), or else a label (stripped, 1-200 characters).

    Text made only of digits, ``-``, ``:``, ``.`` and spaces that contains a date-like part
    (``2024-13-01:2024-13-07``, ``2024-03-01 2024-03-07``) must be a valid range; it is never
    taken as a label.
    """
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("period is empty", code="invalid_period")
    s = text.strip()
    if len(s) > MAX_LABEL_CHARS:
        raise _period_error(s, f"labels are at most {MAX_LABEL_CHARS} characters")
    return _date_range(s) if _DATEISH.fullmatch(s) else s


def _date_range(s: str) -> DateRange:
    if m := _DAY_RE.fullmatch(s):
        day = _iso_day(s, m[1])
        return DateRange(start=day, end=day)
    m = _RANGE_RE.fullmatch(s)
    if m is None:
        raise _period_error(
            s, "expected YYYY-MM-DD, YYYY-MM-DD:YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD"
        )
    start, end = _iso_day(s, m[1]), _iso_day(s, m[2])
    if end < start:
        raise _period_error(s, f"ends ({end}) before it starts ({start})")
    return DateRange(start=start, end=end)


def _label(text: str) -> str:
    """A period label for a period column (never parsed as dates)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("period label is empty", code="invalid_period")
    s = text.strip()
    if len(s) > MAX_LABEL_CHARS:
        raise _period_error(s, f"labels are at most {MAX_LABEL_CHARS} characters")
    return s


def _role(schema: Schema, col: Column) -> str | None:
    prof = schema.column_profile(col)
    return prof.role if prof else None


def detect_time_column(schema: Schema, table: str) -> str:
    """The base table's single date/timestamp column whose profile role is ``time``.

    Without a stored profile every date/timestamp column counts.

    Raises:
        ToolInputError: None (``invalid_period``) or several (``invalid_arguments``, listing them).
    """
    base = schema.table(table)
    found = [
        c.ref
        for c in schema.tables[base]
        if c.kind in ("date", "timestamp") and _role(schema, c) in ("time", None)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ToolInputError(
            f"table {base!r} has no date column; pass --time-column or --period-column",
            code="invalid_period",
            field="time_column",
        )
    raise ToolInputError(
        f"table {base!r} has several date columns; pass --time-column",
        code="invalid_arguments",
        valid_values=found,
        field="time_column",
    )


# --------------------------------------------------------------------------------------------
# Dimensions
# --------------------------------------------------------------------------------------------


def _join_columns(schema: Schema) -> set[tuple[str, str]]:
    """(table, column) of every join-key column."""
    keys: set[tuple[str, str]] = set()
    for k in schema.catalog.join_keys:
        keys.add((k.from_table, k.from_column))
        keys.add((k.to_table, k.to_column))
    return keys


def _is_dimension(schema: Schema, col: Column) -> bool:
    prof = schema.column_profile(col)
    return (
        prof is not None
        and prof.role == "dimension"
        and 1 < prof.distinct_count <= MAX_DIMENSION_DISTINCT
    )


def default_dimensions(schema: Schema, table: str, *, exclude: Iterable[str]) -> list[str]:
    """Columns worth searching: profile role ``dimension`` with 2-1,000 distinct values.

    Covers the table and its joined tables (``table.column`` refs), base table first, in column
    order. Join-key columns and ``exclude`` (refs, case-insensitive) are left out. Columns of
    tables without a stored profile are never chosen.
    """
    base = schema.table(table)
    skip = {e.lower() for e in exclude}
    keys = _join_columns(schema)
    return [
        c.ref
        for c in schema.columns_for(base)
        if c.ref.lower() not in skip and (c.table, c.name) not in keys and _is_dimension(schema, c)
    ]


def _split_dimensions(dimensions: str | Sequence[str]) -> list[str]:
    items = dimensions.split(",") if isinstance(dimensions, str) else list(dimensions)
    names = [d.strip() for d in items if isinstance(d, str)]
    if not names or len(names) != len(items) or not all(names):
        raise ToolInputError(
            f"dimensions must be column names separated by commas, got {short(dimensions)}",
            code="invalid_arguments",
            field="dimensions",
        )
    return names


def _resolve_dimensions(
    schema: Schema, table: str, dimensions: str | Sequence[str], periods: Periods
) -> tuple[str, ...]:
    """Resolve user-named dimensions to canonical refs (deduplicated, order kept)."""
    period_col = periods.time_column or periods.period_column
    refs: dict[str, None] = {}
    for d in _split_dimensions(dimensions):
        col = _column(schema, table, _dimension_ref(d, table), "dimensions")
        if col.ref == period_col:
            raise ToolInputError(
                f"dimension {col.ref!r} is the column that defines the periods",
                code="invalid_arguments",
                field="dimensions",
            )
        refs[col.ref] = None
    return tuple(refs)


def _dimension_ref(text: str, table: str) -> str:
    """``events.platform`` -> ``platform`` when ``events`` is the base table."""
    head, dot, tail = text.partition(".")
    return tail if dot and head.lower() == table.lower() else text


# --------------------------------------------------------------------------------------------
# metrics.yaml
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Question
# --------------------------------------------------------------------------------------------


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


def _periods(
    schema: Schema,
    table: str,
    *,
    time_column: str | None,
    period_column: str | None,
    baseline: str,
    comparison: str,
) -> Periods:
    """Label periods on ``period_column``, else date ranges on the (detected) time column."""
    if period_column is not None:
        col = _column(schema, table, period_column, "period_column")
        return _validated(
            lambda: Periods(
                period_column=col.ref, baseline=_label(baseline), comparison=_label(comparison)
            ),
            what="invalid periods",
            code="invalid_period",
        )
    ref = time_column if time_column is not None else detect_time_column(schema, table)
    col = _column(schema, table, ref, "time_column")
    if col.kind not in ("date", "timestamp"):
        raise ToolInputError(
            f"type mismatch: time column {col.ref!r} is {col.kind} ({col.type}), not a date",
            code="type_mismatch",
            field="time_column",
        )
    ranges = [
        _dated(which, text) for which, text in (("baseline", baseline), ("comparison", comparison))
    ]
    return _validated(
        lambda: Periods(time_column=col.ref, baseline=ranges[0], comparison=ranges[1]),
        what=f"invalid periods (baseline {ranges[0].label}, comparison {ranges[1].label})",
        code="invalid_period",
    )


def _dated(which: str, text: str) -> DateRange:
    period = parse_period(text)
    if isinstance(period, str):
        raise ToolInputError(
            f"{which} {short(period)} is not a date or date range (YYYY-MM-DD:YYYY-MM-DD); "
            "for labelled periods pass --period-column",
            code="invalid_period",
            field=which,
        )
    return period


def _metric_columns(metric: Metric) -> list[str]:
    aggs = [metric.numerator] + ([metric.denominator] if metric.denominator else [])
    return [a.column for a in aggs if a.column is not None]


def _single_value_columns(metric: Metric) -> list[str]:
    """Columns a filter pins to one value (no point searching them)."""
    return [f.column for f in metric.filters if f.op in ("=", "is_null")]


def _dimensions(
    schema: Schema,
    metric: Metric,
    periods: Periods,
    dimensions: str | Sequence[str] | None,
) -> tuple[str, ...]:
    if dimensions is not None:
        return _resolve_dimensions(schema, metric.table, dimensions, periods)
    exclude = [*_metric_columns(metric), *_single_value_columns(metric)]
    exclude += [c for c in (periods.time_column, periods.period_column) if c]
    found = default_dimensions(schema, metric.table, exclude=exclude)
    if not found:
        raise ToolInputError(
            f"found no dimension columns to search in {metric.table!r}; pass --dimensions",
            code="invalid_arguments",
            field="dimensions",
        )
    return tuple(found)


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
