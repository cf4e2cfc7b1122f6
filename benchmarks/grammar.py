"""sqlglot as the syntax layer for metrics and filters, measured against the hand parser.

``python -m benchmarks.grammar [--loops 1000] [--out benchmarks/results/grammar.json]``

The product parses what users write (``sum(revenue)``, ``count(distinct users.plan)``,
``sum(purchases) / sum(sessions)``; ``platform=ios``, ``country in US,GB``, ``revenue>=10``)
with the hand-written scanners of :mod:`tasks.engine.parse`. This module holds a prototype that
replaces only the *syntax* layer with sqlglot: the text is parsed into a sqlglot tree (DuckDB
dialect), the tree is checked node by node against a whitelist (sum / avg / count / count
distinct of a column or ``*``, one ``/`` between two aggregates; one comparison, ``in``,
``between``, ``is [not] null`` or ``contains(col, 'x')`` with literal values), and everything
else is refused with a one-line :class:`ToolInputError`. Name resolution, type checks and the
models are the hand parser's own helpers, so the two differ only in syntax.

The harness runs a corpus through both parsers on three small DuckDB files built by the real
loader (the demo events/users, the tests' ``misc`` facts table, the attack catalogue's F1 table):
the metric and filter strings of ``tests/engine/test_parse.py``, the ARG cases of
``tests/test_attacks.py`` / ``ATTACKS.md`` written as metric or filter text, and filter forms
users type that are not SQL (``country=US``, ``country in US,GB``, ``name=O'Brien``, values with
spaces or dashes). Per input it records accept / reject by each parser, whether both produced the
same model (``model_dump``), both messages and codes, and the time per parse.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
import sqlglot.expressions as exp
from sqlglot.errors import ParseError, TokenError

from benchmarks._machine import REPO, machine_facts, machine_line
from sql_tools import Filter, FilterOp, Schema, ToolContext, ToolInputError, one_line, short
from tasks.engine.parse import (
    _AGG_HINT,
    _OPS_HINT,
    FILTER_CODE,
    MAX_FILTER_CHARS,
    MAX_METRIC_CHARS,
    METRIC_CODE,
    _Agg,
    _check_arity,
    _Expr,
    _filter_error,
    _filter_from,
    _FilterSyntax,
    _metric_error,
    _metric_from,
    _parse_expression,
    _Ref,
    _split_filter,
    parse_filter,
    parse_metric,
)
from tasks.engine.spec import Metric

RESULTS = REPO / "benchmarks" / "results"
DIALECT = "duckdb"

# --------------------------------------------------------------------------------------------
# The prototype: sqlglot tree -> whitelist -> the hand parser's resolution and models
# --------------------------------------------------------------------------------------------

_Fail = Callable[[str, int | None], ToolInputError]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SYMBOLS: dict[type[exp.Expression], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.DPipe: "||",
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.And: "and",
    exp.Or: "or",
}
_NAMED: dict[type[exp.Expression], str] = {
    exp.Case: "a CASE expression",
    exp.Window: "a window (OVER)",
    exp.Filter: "a FILTER (WHERE ...) clause",
    exp.Cast: "a cast",
    exp.Block: "a second statement after ';'",
    exp.Placeholder: "a parameter placeholder",
    exp.Paren: "parentheses",
    exp.IgnoreNulls: "IGNORE NULLS",
    exp.Subquery: "a subquery",
    exp.Select: "a SELECT",
    exp.Lambda: "a lambda",
    exp.Null: "NULL",
    exp.Boolean: "a boolean",
    exp.Dot: "a dotted value",
    exp.Distinct: "DISTINCT",
    exp.Tuple: "a tuple",
    exp.Array: "a list",
}
_KEYWORDS: dict[type[exp.Expression], str] = {exp.Window: "over", exp.Filter: "filter"}
_ARG_NAMES = {"this": "left side", "expression": "right side", "low": "low", "high": "high"}
_FILTER_HINT = (
    "write column op value with op one of =, !=, <, <=, >, >=, in (a, b), not in (a, b), "
    "between a and b, is null, is not null, contains(column, 'text'); quote text with spaces "
    "or dashes: 'New York'"
)
_OPS: dict[type[exp.Expression], FilterOp] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}


def _span(node: exp.Expression) -> tuple[int, int] | None:
    """First and last source offsets the parser recorded anywhere in ``node``'s subtree."""
    starts, ends = [], []
    for n in node.walk():
        meta = n._meta  # noqa: SLF001  (``.meta`` would create an empty dict on every node)
        if meta and "start" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"])
    return (min(starts), max(ends)) if starts else None


def _pos(text: str, node: exp.Expression, after: int = 0) -> int | None:
    """0-based offset of ``node`` in ``text`` (the operator of a binary node), if known."""
    meta = node._meta  # noqa: SLF001
    if meta and "start" in meta:
        return meta["start"]
    if isinstance(node, (exp.Binary, exp.Block, *_KEYWORDS)):
        left = node.expressions[0] if isinstance(node, exp.Block) else node.this
        sym = (
            ";"
            if isinstance(node, exp.Block)
            else _SYMBOLS.get(type(node), _KEYWORDS.get(type(node)))
        )
        left_span = _span(left)
        if sym and left_span:
            found = text.lower().find(sym, left_span[1] + 1)
            return found if found >= 0 else None
    if isinstance(node, exp.Star):
        found = text.find("*", after)
        return found if found >= 0 else None
    if _is_call(node) and (at := _func_at(text, node)[1]) is not None:
        return at
    span = _span(node)
    if span:
        return span[0]
    return after if after else None


def _func_at(text: str, node: exp.Expression) -> tuple[str, int | None]:
    """The function name as the user wrote it (``string_agg``, not sqlglot's ``GROUP_CONCAT``)
    and where it starts."""
    meta = node._meta  # noqa: SLF001
    if meta and "start" in meta:
        return text[meta["start"] : meta["end"] + 1], meta["start"]
    span = _span(node)
    if span:
        m = re.search(r"([^\W\d]\w*)\s*\(\s*(?:distinct\s+)?$", text[: span[0]], re.I)
        if m:
            return m[1], m.start(1)
    return (node.sql_name().lower() if isinstance(node, exp.Func) else node.key), None


def _func_name(text: str, node: exp.Expression) -> str:
    return _func_at(text, node)[0]


def _inside(text: str, parent: exp.Expression) -> int:
    """Offset of the first character inside ``parent``'s parentheses."""
    at = text.find("(", _pos(text, parent) or 0) + 1
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _column_text(col: exp.Column) -> str:
    return ".".join(p.name for p in col.parts)


def _describe(text: str, node: exp.Expression) -> str:
    """How a node is named in an error message."""
    if isinstance(node, exp.Star):
        return "'*'"
    if isinstance(node, exp.Literal):
        return f"string {node.this!r}" if node.is_string else f"number {node.this}"
    if isinstance(node, exp.Column):
        return f"column {_column_text(node)!r}"
    if type(node) in _SYMBOLS:
        return f"operator {_SYMBOLS[type(node)]!r}"
    if isinstance(node, exp.Alias):
        return f"a second word {node.alias!r}"
    if type(node) in _NAMED:
        if isinstance(node, (exp.Block, *_KEYWORDS)):  # the snippet would be the whole text
            return _NAMED[type(node)]
        return f"{_NAMED[type(node)]} {short(node.sql(dialect=DIALECT), 40)}"
    if isinstance(node, exp.Func):
        return f"function {_func_name(text, node)!r}"
    return node.key.upper()


def _sg_parse(text: str, fail: _Fail) -> exp.Expression:
    """sqlglot's tree for ``text``, its errors turned into one-line ``ToolInputError``s."""
    try:
        tree = sqlglot.parse_one(text, read=DIALECT)
    except ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        token = _ANSI.sub("", err.get("highlight") or "")
        raise fail(
            _parse_problem(err.get("description", str(exc)), token), _offset(text, err, token)
        ) from None
    except TokenError:
        raise fail("cannot split into SQL tokens (an unterminated ' or \" quote?)", None) from None
    except RecursionError:
        raise fail("nested too deeply", None) from None
    for node in tree.walk():
        if node.comments:
            at = min((i for i in (text.find("--"), text.find("/*")) if i >= 0), default=None)
            raise fail("comments ('--', '/*') are not allowed", at)
    return tree


def _offset(text: str, err: dict[str, Any], token: str) -> int | None:
    line, col = err.get("line"), err.get("col")
    if not isinstance(line, int) or not isinstance(col, int):
        return None
    lines = text.split("\n")
    base = sum(len(s) + 1 for s in lines[: line - 1])
    return max(0, base + col - max(len(token), 1))


def _parse_problem(description: str, token: str) -> str:
    found = repr(token) if token else "the end of the text"
    if description.startswith("Invalid expression / Unexpected token"):
        return f"unexpected {found}"
    if m := re.match(r"Expecting (.+)", description):
        return f"expected {m[1]!r} after {found}"
    if m := re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", description):
        cls = getattr(exp, m[2], None)
        what = repr(_SYMBOLS[cls]) if cls in _SYMBOLS else m[2].lower()
        return f"incomplete {what}: its {_ARG_NAMES.get(m[1], m[1])} is missing (at {found})"
    if m := re.match(r"The number of provided arguments \((\d+)\) is greater", description):
        return f"too many arguments ({m[1]}) at {found}"
    return re.sub(r"<class '[\w.]*?(\w+)'>", r"\1", description)


def _only_args(text: str, node: exp.Expression, allowed: set[str], fail: _Fail) -> None:
    extra = [k for k, v in node.args.items() if k not in allowed and v not in (None, False, [])]
    if extra:
        what = extra[0].rstrip("_").replace("_", " ")
        raise fail(f"{_describe(text, node)} with {what} is not allowed", _pos(text, node))


# ---- metrics ---------------------------------------------------------------------------------


def _sg_expression(text: str) -> _Expr:
    """The metric's syntax tree (``_Expr``) from sqlglot's tree."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError(
            f"metric is empty; expected {_AGG_HINT}", code=METRIC_CODE, field="metric"
        )
    if len(text) > MAX_METRIC_CHARS:
        raise _metric_error(text, f"longer than {MAX_METRIC_CHARS} characters")

    def fail(problem: str, pos: int | None) -> ToolInputError:
        return _metric_error(text, problem, pos)

    def syntax_fail(problem: str, pos: int | None) -> ToolInputError:
        hint = f"; expected {_AGG_HINT} or A / B" if problem.startswith("unexpected") else ""
        return _metric_error(text, problem + hint, pos)

    tree = _sg_parse(text, syntax_fail)
    if isinstance(tree, exp.Div):
        _only_args(text, tree, {"this", "expression"}, fail)
        if isinstance(tree.this, exp.Div):
            raise fail("expected the end (one '/' at most), found '/'", _pos(text, tree))
        return _Expr(_sg_agg(text, tree.this, fail), _sg_agg(text, tree.expression, fail))
    return _Expr(_sg_agg(text, tree, fail), None)


def _sg_agg(text: str, node: exp.Expression, fail: _Fail) -> _Agg:
    if isinstance(node, exp.IgnoreNulls):  # any_value(x) comes back wrapped
        node = node.this
    at = _pos(text, node)
    if isinstance(node, (exp.Sum, exp.Avg)):
        _only_args(text, node, {"this"}, fail)
        if isinstance(node.this, exp.Distinct):
            raise fail("'distinct' is only allowed in count(distinct x)", _inside(text, node))
        fn = "sum" if isinstance(node, exp.Sum) else "avg"
        return _Agg(fn, _sg_column(text, node.this, node, fail))
    if isinstance(node, exp.Count):
        _only_args(text, node, {"this", "big_int"}, fail)
        arg = node.this
        if arg is None:
            raise fail("expected '*' or a column name, found ')'", _inside(text, node))
        if isinstance(arg, exp.Star):
            _only_args(text, arg, set(), fail)
            return _Agg("count", None)
        if isinstance(arg, exp.Distinct):
            _only_args(text, arg, {"expressions"}, fail)
            if not arg.expressions:
                after = _inside(text, node)
                after += re.match(r"distinct\s*", text[after:], re.I).end()  # type: ignore[union-attr]
                raise fail("expected a column after distinct, found ')'", after)
            if len(arg.expressions) > 1:
                second = arg.expressions[1]
                problem = f"count(distinct ...) takes one column, found {_describe(text, second)}"
                raise fail(problem, _pos(text, second))
            if isinstance(arg.expressions[0], exp.Star):
                raise fail("expected a column after distinct, found '*'", _pos(text, arg, at or 0))
            return _Agg("count_distinct", _sg_column(text, arg.expressions[0], node, fail))
        return _Agg("count", _sg_column(text, arg, node, fail))
    if isinstance(node, (exp.Min, exp.Max)):
        name = _func_name(text, node)
        raise fail(f"{name!r} is not supported; expected sum, avg or count", _pos(text, node))
    if isinstance(node, exp.Column):
        raise fail(f"expected {_AGG_HINT}, found {_describe(text, node)}", at)
    if _is_call(node):
        name, where = _func_at(text, node)
        raise fail(f"unknown function {name!r}; expected sum, avg or count", where)
    raise fail(f"expected {_AGG_HINT} or A / B, found {_describe(text, node)}", at)


def _is_call(node: exp.Expression) -> bool:
    """A function call as written (not an operator, CASE, cast or list sqlglot models as one)."""
    return isinstance(node, exp.Func) and not isinstance(
        node, (exp.Binary, exp.Unary, *_NAMED, *_KEYWORDS)
    )


def _sg_column(text: str, node: exp.Expression, parent: exp.Expression, fail: _Fail) -> _Ref:
    after = _inside(text, parent)
    if isinstance(node, exp.Column):
        if node.args.get("db") or node.args.get("catalog"):
            raise fail(f"expected table.column, found {_column_text(node)!r}", _pos(text, node))
        _only_args(text, node, {"this", "table"}, fail)
        if isinstance(node.this, exp.Star):
            raise fail("expected a column name, found '*'", _pos(text, node, after))
        if not node.name:
            raise fail("empty column name", _pos(text, node))
        return _Ref(node.table or None, node.name)
    if _is_call(node):
        name, where = _func_at(text, node)
        raise fail(f"nested function {name!r}; expected a column name", where)
    raise fail(f"expected a column name, found {_describe(text, node)}", _pos(text, node, after))


def parse_metric_sqlglot(text: str, schema: Schema, table: str | None = None) -> Metric:
    """:func:`tasks.engine.parse.parse_metric` with sqlglot as the syntax layer."""
    return _metric_from(_sg_expression(text), text, schema, table)


# ---- filters ---------------------------------------------------------------------------------


def _sg_filter_syntax(text: str) -> _FilterSyntax:
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("filter is empty", code=FILTER_CODE, field="filters")
    if len(text) > MAX_FILTER_CHARS:
        raise _filter_error(text, f"longer than {MAX_FILTER_CHARS} characters")

    def fail(problem: str, pos: int | None, code: str = FILTER_CODE) -> ToolInputError:
        where = f" at character {pos + 1}" if pos is not None else ""
        return ToolInputError(
            f"invalid filter {short(text)}{where}: {problem}", code=code, field="filters"
        )

    def syntax_fail(problem: str, pos: int | None) -> ToolInputError:
        return fail(f"{problem}; {_FILTER_HINT}", pos)

    tree = _sg_parse(text, syntax_fail)
    node, negated = (tree.this, True) if isinstance(tree, exp.Not) else (tree, False)
    op: FilterOp
    if isinstance(node, exp.Alias):
        if isinstance(node.this, exp.Column):
            problem = f"expected an operator after {_column_text(node.this)!r} ({_OPS_HINT})"
            raise fail(problem, _pos(text, node.args["alias"]), "invalid_operator")
        raise syntax_fail(f"unexpected {node.alias!r}", _pos(text, node.args["alias"]))
    if isinstance(node, exp.Column):
        problem = f"expected an operator after {_column_text(node)!r} ({_OPS_HINT})"
        raise fail(problem, None, "invalid_operator")
    if isinstance(node, (exp.And, exp.Or)):
        raise fail(
            f"{_describe(text, node)}: one condition per filter (give several filters)",
            _pos(text, node),
            "invalid_operator",
        )
    if isinstance(node, (exp.Like, exp.ILike)):
        problem = "LIKE patterns are not supported; use contains(column, 'text')"
        raise fail(problem, _pos(text, node), "invalid_operator")
    if type(node) in _OPS and not negated:
        op, values = _OPS[type(node)], [_sg_value(text, node.expression, fail)]
    elif isinstance(node, exp.In):
        if node.args.get("field") is not None:
            raise syntax_fail("'in' needs its values in parentheses: in (a, b)", _pos(text, node))
        if node.args.get("query") is not None:
            raise fail("a subquery is not a list of values", _pos(text, node.args["query"]))
        _only_args(text, node, {"this", "expressions"}, fail)
        op = "not_in" if negated else "in"
        values = [_sg_value(text, v, fail) for v in node.expressions]
    elif isinstance(node, exp.Between) and not negated:
        _only_args(text, node, {"this", "low", "high"}, fail)
        op, values = "between", [_sg_value(text, node.args[k], fail) for k in ("low", "high")]
    elif isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        op, values = ("not_null" if negated else "is_null"), []
    elif isinstance(node, exp.Contains) and not negated:
        op, values = "contains", [_sg_value(text, node.expression, fail)]
    else:
        what = f"'not' with {_describe(text, node)}" if negated else _describe(text, node)
        raise fail(f"{what} is not a filter; {_FILTER_HINT}", _pos(text, node), "invalid_operator")
    column = node.this
    if not isinstance(column, exp.Column) or column.args.get("db"):
        raise syntax_fail(
            f"expected a column name before the operator, found {_describe(text, column)}",
            _pos(text, column),
        )
    if isinstance(column.this, exp.Star) or not column.name:
        raise syntax_fail("expected a column name before the operator", _pos(text, column))
    if not values and op not in ("is_null", "not_null"):
        raise fail(f"'{op.replace('_', ' ')}' needs a value", _pos(text, node))
    _check_arity(text, op, values)
    return _FilterSyntax(_Ref(column.table or None, column.name), op, values)


def _sg_value(text: str, node: exp.Expression, fail: Callable[..., ToolInputError]) -> str:
    """A value as raw text, for the hand parser's type conversion."""
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + node.this.this
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Column) and not node.table and not isinstance(node.this, exp.Star):
        return node.name
    at = _pos(text, node)
    if isinstance(node, exp.Null):
        raise fail("compare with null using 'is null' or 'is not null'", at)
    if isinstance(node, (exp.Sub, exp.Dot, exp.Column)):
        raise fail(
            f"{_describe(text, node)} is not a value; quote dates and values with '-', '.' "
            "or spaces: '2024-03-01', '5.2.0'",
            at,
        )
    raise fail(f"{_describe(text, node)} is not allowed as a value", at)


def parse_filter_sqlglot(text: str, schema: Schema, table: str) -> Filter:
    """:func:`tasks.engine.parse.parse_filter` with sqlglot as the syntax layer."""
    return _filter_from(_sg_filter_syntax(text), text, schema, table)


# --------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    kind: str  # "metric" | "filter"
    text: str
    db: str  # "demo" | "misc" | "f1"
    table: str | None
    source: str


def _cases(kind: str, db: str, table: str | None, source: str, texts: list[str]) -> list[Case]:
    return [Case(kind, t, db, table, source) for t in texts]


def _nest(k: int, inner: str = "revenue") -> str:
    return "sum(" + "(" * k + inner + ")" * k + ")"


_P = "tests/engine/test_parse.py"
_A = "tests/test_attacks.py / ATTACKS.md (as metric or filter text)"
_U = "user-typed forms that are not SQL"


def corpus() -> list[Case]:
    """Every metric and filter string of the parse tests, the ARG family, and user forms."""
    cases: list[Case] = []
    # tests/engine/test_parse.py::test_metric_forms (with each case's table)
    for text, table in [
        ("sum(revenue)", None),
        ("  AVG ( Revenue ) ", None),
        ("Count ( * )", "events"),
        ("count(user_id)", "events"),
        ("count(DISTINCT user_id)", "events"),
        ("sum(purchases)/sum(sessions)", None),
        ("sum(revenue) / count(distinct users.plan)", None),
        ("count(distinct USERS . Plan)", "Events"),
        ("sum(events.revenue)", None),
        ('sum("revenue")', None),
        ('sum("events"."revenue")', None),
    ]:
        cases.append(Case("metric", text, "demo", table, f"{_P}::test_metric_forms"))
    cases += _cases(
        "metric",
        "demo",
        None,
        f"{_P} (kinds, table inference, unknown column, type mismatch, metrics.yaml, cli)",
        [
            "sum(purchases) / sum(sessions)",
            "avg(revenue)",
            "count(distinct plan)",
            "sum(sessions)",
            "count(*)",
            "sum(revnue)",
            "sum(platform)",
            "avg(signup_channel)",
            "revenue",
            "conversion",
        ],
    )
    cases += _cases(
        "metric",
        "demo",
        "events",
        f"{_P} (errors with table events)",
        [
            "count(distinct user_id)",
            "sum(revnue)",
            'sum("a""b")',
            # test_metric_syntax_errors_name_position_and_expectation
            "sum(revenue) + 1",
            "sum(revenue); drop table events",
            "sum(revenue) -- comment",
            "sum(case when revenue > 0 then 1 end)",
            "sum(revenue * 2)",
            "median(revenue)",
            "count(distinct *)",
            "sum(*)",
            "sum(1)",
            "sum(sum(revenue))",
            "sum(revenue",
            "sum(revenue))",
            "(sum(revenue)",
            "sum(purchases) / sum(sessions) / count(*)",
            'sum("rev',
            'sum("")',
            "",
            "   ",
        ],
    )
    cases.append(Case("metric", "sum(revenue)", "demo", "evnts", f"{_P}::unknown table"))
    # tests/engine/test_parse.py filters
    cases += _cases(
        "filter",
        "demo",
        "events",
        f"{_P}::test_filter_forms_with_typed_values",
        [
            "platform=ios",
            "PLATFORM = ios ",
            "events.platform=ios",
            'platform != "ios"',
            "platform<>ios",
            "sessions<3",
            "sessions <= 2",
            "revenue>0",
            "revenue >= 1.5",
            "revenue>=-2e3",
            "country in US, GB,IN",
            "country NOT IN US",
            "sessions between 1,3",
            "date between 2024-03-01, 2024-03-07",
            "date>=2024-03-01",
            "users.plan=pro",
            "users.plan is null",
            "users.plan IS NOT NULL",
            "users.plan not null",
            "platform contains io",
            'country = "United, States "',
            'country in "a,b", c',
            '"platform"="say ""hi"""',
        ],
    )
    cases += _cases(
        "filter",
        "misc",
        "facts",
        f"{_P}::test_filter_booleans_and_timestamps",
        [
            "active=TRUE",
            "active != false",
            "seen_at>=2024-01-01 10:00:00",
            "seen_at<2024-01-02",
            "active=yes",
        ],
    )
    cases += _cases(
        "filter",
        "demo",
        "events",
        f"{_P}::test_bad_filters_say_what_is_wrong (+ build_question, metrics.yaml)",
        [
            "platform ios",
            "= ios",
            "",
            "platform=",
            "country in",
            "platform=ios,android",
            "country in US,,GB",
            'platform="ios',
            'platform="ios"x',
            "sessions between 1",
            "platform is null now",
            "revenue=1e999",
            "sessions=abc",
            "sessions in 1,x",
            "date>2024-13-01",
            "revenue contains 1",
            "plaform=ios",
            "country in US,GB",
            "country=US",
            "plan=pro",
        ],
    )
    # user-typed filter forms that are not SQL, and their SQL spellings
    cases += _cases(
        "filter",
        "demo",
        "events",
        _U,
        [
            "revenue>=10",
            "country=O'Brien",
            "country=New York",
            'country="New York"',
            "country='New York'",
            "country=Côte d'Ivoire",
            "app_version=5.2.0",
            "app_version in 5.2.0,5.3.0",
            "app_version='5.2.0'",
            "country=GB-SCT",
            "users.signup_channel=paid_search",
            "country in (US,GB)",
            "country in ('US','GB')",
            "platform = 'ios'",
            "sessions between 1 and 3",
            "date >= '2024-03-01'",
            "contains(platform, 'io')",
            "platform=null",
            "country=US;",
            "platform=ios\n",
            "platform = ios and country = US",
        ],
    )
    # ARG family as metric text on F1 (data: day, region, product, revenue, orders)
    cases += _cases(
        "metric",
        "f1",
        "data",
        _A,
        [
            # ARG-03 expression / subquery as the metric
            "sum(revenue) FROM data UNION ALL SELECT length(content) FROM read_text('/etc/passwd') --",
            "sum(revenue) FROM data UNION ALL SELECT length(content) FROM read_text('/etc/passwd') --)",
            "sum((select max(revenue) from data))",
            "sum(revenue) / (select 1)",
            "sum(revenue); COPY data TO '/tmp/pwn.csv'",
            "sum(revenue)\n; drop table data",
            "sum(revenue) /* x */",
            "sum(revenue)\x00",
            "sum(revenue) as x",
            "sum(revenue::varchar)",
            "sum(revenue) + 0",
            "sum(revenue)||'x'",
            "sum(revenue) / 0",
            "sum(revenue) over ()",
            "sum(revenue) filter (where 1=1)",
            "sum(case when 1=1 then revenue end)",
            "sum($1)",
            "sum(?)",
            "sum(:p1)",
            "sum(x -> x)",
            "count(* exclude (revenue))",
            "count(columns(*))",
            "count()",
            "count(distinct)",
            "count(all orders)",
            "count(distinct region, product)",
            "sum(distinct revenue)",
            "sum(revenue,2)",
            "(sum(revenue))",
            # ARG-04 table functions / paths
            "sum(read_csv('/etc/passwd').revenue)",
            "count(distinct read_text('/etc/passwd'))",
            "sum(getvariable('x'))",
            "sum(\"read_csv('/etc/passwd')\".revenue)",
            'sum("/tmp/canary_outside.txt".x)',
            'sum("../../etc/passwd".revenue)',
            # ARG-05 aggregations outside the allowlist
            "string_agg(product)",
            "query(revenue)",
            "list(revenue)",
            "any_value(read_text('/etc/passwd'))",
            "max(revenue)",
            "min(revenue)",
            # ARG-10 system catalog / hidden objects
            "max(rowid)",
            "sum(rowid)",
            "count(distinct rowid)",
            "sum(information_schema.tables.x)",
            "count(distinct duckdb_settings.name)",
            "count(_drilldown.tables.name)",
            # ARG-11 identifier case and quoting
            "sum(REVENUE)",
            'sum("REVENUE")',
            'sum("""revenue""")',
            "sum(Data.Revenue)",
            'sum("data.revenue")',
            "sum(`revenue`)",
            "sum([revenue])",
            "sum(révenue)",
            "sum(rev\u200benue)",
            "ｓｕｍ(revenue)",
            "sum(revenue\u00a0)",
            # deep nesting and oversized text (ARG-14)
            _nest(5),
            _nest(45),
            _nest(60),
            _nest(400),
            "(" * 300 + "sum(revenue)" + ")" * 300,
            "sum(" + "r" * 990 + ")",
            "sum(" + "r" * 1200 + ")",
        ],
    )
    # ARG family as filter text on F1
    cases += _cases(
        "filter",
        "f1",
        "data",
        _A,
        [
            # ARG-01 SQL smuggled in a value
            "product=x' OR 1=1; COPY data TO '/tmp/pwn.csv'; --",
            'product="x\' OR 1=1; --"',
            "product='x' OR 1=1",
            "product=x OR 1=1",
            # ARG-02 / PI-01 SQL in the column
            "1=1; COPY data TO '/tmp/x'=1",
            "region\"; COPY data TO '/tmp/pwn.csv'; --=EU",
            '"region""; COPY data TO \'/tmp/pwn.csv\'; --"=EU',
            "read_csv('/etc/passwd').x=1",
            # ARG-05 operator outside the allowlist
            "revenue > 0 OR 1=1 --",
            "revenue >= 0 and 1=1",
            "revenue > (select 0)",
            "region in (select region from data)",
            "region = read_text('/etc/passwd')",
            "region like '%'",
            "revenue > 0 -- x",
            "revenue not between 1 and 2",
            "region in EU",
            # ARG-09 LIKE wildcards through contains
            "product contains %",
            "product contains _",
            'product contains "%%"',
            "contains(product, '%')",
            # ARG-11 case and quoting
            "REGION=EU",
            '"Region"=EU',
            '"""region"""=EU',
            # ARG-12 value type mismatch
            "revenue>abc",
            "revenue > 'abc'",
            "region=1",
            "day>2024-13-01",
            "day>=2024-01-01",
            "day >= '2024-01-01'",
            "orders=1.5",
            # deep nesting, ARG-14 oversized values and lists
            "orders in " + "(" * 60 + "1" + ")" * 60,
            "product=" + "A" * 2048,
            "region in " + ",".join(f"R{i}" for i in range(1500)),
            "region in (" + ",".join(f"'R{i}'" for i in range(1500)) + ")",
            "product=" + "A" * (1 << 20),
        ],
    )
    seen: set[tuple[str, str, str, str | None]] = set()
    unique = []
    for c in cases:
        key = (c.kind, c.text, c.db, c.table)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------

MISC_FACTS = (
    "day,seen_at,active,score,label,closed_on\n"
    "2024-01-01,2024-01-01 09:00:00,true,1.5,a,2024-01-02\n"
    "2024-01-02,2024-01-02 10:30:00,false,2.5,b,2024-01-03\n"
)
F1 = (
    "day,region,product,revenue,orders\n"
    "2024-01-01,EU,Widget,100.00,10\n"
    "2024-01-01,US,Gadget,80.00,8\n"
    "2024-01-08,EU,Widget,50.00,5\n"
    "2024-01-08,US,Gadget,90.00,9\n"
    "2024-01-08,EU,50%_off,0.00,0\n"
)


def build_schemas(root: Path) -> dict[str, Schema]:
    """demo (events joined to users), misc (facts), f1 (data), each loaded by the real loader."""
    from tasks.ingest.load import load_files

    sources: dict[str, list[Path]] = {}
    demo = root / "demo"
    demo.mkdir()
    sources["demo"] = [
        Path(shutil.copy(REPO / "data" / "demo" / n, demo / n)) for n in ("events.csv", "users.csv")
    ]
    for name, stem, text in (("misc", "facts", MISC_FACTS), ("f1", "data", F1)):
        folder = root / name
        folder.mkdir()
        (folder / f"{stem}.csv").write_text(text, encoding="utf-8")
        sources[name] = [folder / f"{stem}.csv"]
    schemas = {}
    for name, paths in sources.items():
        db = root / f"{name}.duckdb"
        load_files(paths, db)
        with ToolContext(db) as ctx:
            schemas[name] = ctx.schema
    return schemas


# --------------------------------------------------------------------------------------------
# Harness
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool
    model: dict[str, Any] | None = None
    code: str | None = None
    message: str | None = None
    crash: str | None = None


@dataclass
class Record:
    case: Case
    hand: Outcome
    sg: Outcome
    sg_raw: str | None = None
    sg_syntax_ok: bool = True
    status: str = ""
    quality: dict[str, Any] = field(default_factory=dict)
    hand_us: float = 0.0
    sg_us: float = 0.0
    hand_syntax_us: float = 0.0
    sg_syntax_us: float = 0.0


def _run(fn: Callable[[], Any]) -> Outcome:
    try:
        model = fn()
    except ToolInputError as exc:
        return Outcome(False, code=exc.code, message=exc.message)
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, not a harness failure
        return Outcome(False, crash=f"{type(exc).__name__}: {str(exc)[:200]}")
    return Outcome(True, model=model.model_dump(mode="json"))


def _callables(case: Case, schema: Schema) -> dict[str, Callable[[], Any]]:
    if case.kind == "metric":
        return {
            "hand": lambda: parse_metric(case.text, schema, case.table),
            "sg": lambda: parse_metric_sqlglot(case.text, schema, case.table),
            "hand_syntax": lambda: _parse_expression(case.text),
            "sg_syntax": lambda: _sg_expression(case.text),
        }
    return {
        "hand": lambda: parse_filter(case.text, schema, case.table),
        "sg": lambda: parse_filter_sqlglot(case.text, schema, case.table),
        "hand_syntax": lambda: _split_filter(case.text),
        "sg_syntax": lambda: _sg_filter_syntax(case.text),
    }


def _raw_sqlglot(case: Case) -> str | None:
    """What sqlglot itself says about the text (None: it parses), before any mapping."""
    limit = MAX_METRIC_CHARS if case.kind == "metric" else MAX_FILTER_CHARS
    if not case.text.strip() or len(case.text) > limit:
        return None
    try:
        sqlglot.parse_one(case.text, read=DIALECT)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {one_line(_ANSI.sub('', str(exc)), 300)}"
    return None


def _passes(fn: Callable[[], Any]) -> bool:
    """Whether a syntax layer accepts the text (a crash counts as not accepting)."""
    try:
        fn()
    except Exception:  # noqa: BLE001
        return False
    return True


def _time_us(fn: Callable[[], Any], loops: int) -> float:
    """Median of 5 batches, microseconds per call (errors included: they are the product too)."""
    batch = max(1, loops // 5)
    times = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            try:
                fn()
            except Exception:  # noqa: BLE001, S110
                pass
        times.append((time.perf_counter_ns() - t0) / batch / 1000)
    return statistics.median(times)


_POSITION = re.compile(r"at character \d+")
# a parser's failure rather than the rule that was broken
_GENERIC = re.compile(r": (unexpected '|cannot split into SQL tokens|nested too deeply)")
_EXPECT = re.compile(
    r"\b(expected|allowed|use|write|quote|needs?|takes|must|pass --|valid|only|supported)\b",
    re.I,
)


def _rest(case: Case, msg: str) -> str:
    """The message without its echo of the whole input."""
    for echo in (short(case.text, 100), short(case.text)):
        if echo in msg:
            return msg.replace(echo, "", 1)
    return msg


def _flags(case: Case, msg: str) -> dict[str, bool]:
    """What a rejection message tells the user, judged by the same rules for both parsers."""
    rest = _rest(case, msg)
    quoted = [q for q in re.findall(r"'([^']+)'", rest) if q.lower() in case.text.lower()]
    return {
        "position": bool(_POSITION.search(msg)),
        "token": bool(quoted) or "the end of the text" in rest or "number " in rest,
        "expectation": bool(_EXPECT.search(rest)),
        "generic": bool(_GENERIC.search(rest)),
        "internal": "<class" in msg or "sqlglot" in msg.lower() or "Error tokenizing" in msg,
    }


def _score(f: dict[str, bool]) -> int:
    good = int(f["position"]) + int(f["token"]) + int(f["expectation"])
    return good - int(f["generic"]) - 2 * int(f["internal"])


MANUAL_VERDICTS: dict[str, tuple[str, str]] = {
    "sum(révenue)": (
        "equivalent",
        "hand points at 'é' (bare names are ASCII); sqlglot reads a unicode name and the lookup "
        "lists the valid columns",
    ),
    "sum(rev\u200benue)": (
        "equivalent",
        "hand points at the zero-width space; sqlglot's unknown_column shows it as \\u200b and "
        "lists the valid columns",
    ),
}
"""Message verdicts judged by reading, where the rule-based score misjudges."""


def classify(r: Record) -> None:
    h, s = r.hand, r.sg
    if h.crash or s.crash:
        r.status = "crash"
    elif h.ok and s.ok:
        r.status = "both_accept_same" if h.model == s.model else "both_accept_different"
    elif not h.ok and not s.ok:
        r.status = "both_reject_same_code" if h.code == s.code else "both_reject_different_code"
    elif s.ok:
        r.status = "sqlglot_accepts_hand_rejects"
    else:
        r.status = "sqlglot_rejects_hand_accepts"
    if s.message is not None:
        fs = _flags(r.case, s.message)
        q: dict[str, Any] = {"sqlglot": fs, "sqlglot_score": _score(fs)}
        if h.message is not None:
            fh = _flags(r.case, h.message)
            q.update(hand=fh, hand_score=_score(fh))
            if h.message == s.message:
                q["verdict"] = "identical"
            elif q["sqlglot_score"] < q["hand_score"]:
                q["verdict"] = "sqlglot_worse"
            elif q["sqlglot_score"] > q["hand_score"]:
                q["verdict"] = "sqlglot_better"
            else:
                q["verdict"] = "equivalent"
            if r.case.text in MANUAL_VERDICTS:
                q["verdict"], q["manual_reason"] = MANUAL_VERDICTS[r.case.text]
        r.quality = q


def _compact(value: Any) -> Any:
    """A model dump for the JSON file, long value lists cut to their first items."""
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items()}
    if isinstance(value, list) and len(value) > 8:
        return [*value[:5], f"… ({len(value)} items)"]
    return value


def _show(text: str) -> str:
    return text if len(text) <= 120 else f"{text[:80]}… ({len(text)} chars)"


def _record_json(r: Record) -> dict[str, Any]:
    def side(o: Outcome) -> dict[str, Any]:
        if o.crash:
            return {"crash": o.crash}
        if o.ok:
            return {"accepted": True, "model": _compact(o.model)}
        return {"accepted": False, "code": o.code, "message": o.message}

    return {
        "kind": r.case.kind,
        "text": _show(r.case.text),
        "db": r.case.db,
        "table": r.case.table,
        "source": r.case.source,
        "status": r.status,
        "hand": side(r.hand),
        "sqlglot": side(r.sg),
        "sqlglot_raw_error": r.sg_raw,
        "quality": r.quality,
        "us_per_parse": {
            "hand": round(r.hand_us, 2),
            "sqlglot": round(r.sg_us, 2),
            "hand_syntax": round(r.hand_syntax_us, 2),
            "sqlglot_syntax": round(r.sg_syntax_us, 2),
        },
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def timings(records: list[Record]) -> dict[str, Any]:
    groups: dict[str, list[Record]] = {
        "all": records,
        "metrics": [r for r in records if r.case.kind == "metric"],
        "filters": [r for r in records if r.case.kind == "filter"],
        "accepted_by_both": [r for r in records if r.hand.ok and r.sg.ok],
    }
    out = {}
    for name, rs in groups.items():
        hand = _median([r.hand_us for r in rs])
        sg = _median([r.sg_us for r in rs])
        out[name] = {
            "inputs": len(rs),
            "hand_median_us": hand,
            "sqlglot_median_us": sg,
            "ratio": round(sg / hand, 1) if hand and sg else None,
            "hand_syntax_median_us": _median([r.hand_syntax_us for r in rs]),
            "sqlglot_syntax_median_us": _median([r.sg_syntax_us for r in rs]),
        }
    return out


def run(loops: int) -> tuple[list[Record], dict[str, Any]]:
    cases = corpus()
    root = Path(tempfile.mkdtemp(prefix="grammar-bench-"))
    try:
        schemas = build_schemas(root)
        records = []
        for i, case in enumerate(cases):
            fns = _callables(case, schemas[case.db])
            r = Record(case, _run(fns["hand"]), _run(fns["sg"]), _raw_sqlglot(case))
            r.sg_syntax_ok = _passes(fns["sg_syntax"])
            classify(r)
            # alternate which parser is timed first, so neither always runs on a warmer cache
            order = ("hand", "sg") if i % 2 == 0 else ("sg", "hand")
            for name in order:
                setattr(r, f"{name}_us", _time_us(fns[name], loops))
                setattr(r, f"{name}_syntax_us", _time_us(fns[f"{name}_syntax"], loops))
            records.append(r)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return records, timings(records)


def summary(records: list[Record], times: dict[str, Any], loops: int) -> dict[str, Any]:
    status = Counter(r.status for r in records)
    verdicts = Counter(r.quality.get("verdict") for r in records if r.quality.get("verdict"))
    rejected = [r for r in records if not r.hand.ok or not r.sg.ok]
    limits = {"metric": MAX_METRIC_CHARS, "filter": MAX_FILTER_CHARS}
    raw = [r for r in records if r.case.text.strip() and len(r.case.text) <= limits[r.case.kind]]

    def pairs(pred: Callable[[Record], bool]) -> list[dict[str, Any]]:
        return [
            {
                "text": _show(r.case.text),
                "hand": r.hand.message or r.hand.crash or "accepted",
                "sqlglot": r.sg.message or r.sg.crash or "accepted",
                "sqlglot_raw_error": r.sg_raw,
                "hand_model": _compact(r.hand.model),
                "sqlglot_model": _compact(r.sg.model),
            }
            for r in records
            if pred(r)
        ]

    return {
        "what": "tasks.engine.parse (hand-written) vs a sqlglot syntax layer over the same "
        "resolution helpers and models; see benchmarks/grammar.py",
        "sqlglot": sqlglot.__version__,
        "dialect": DIALECT,
        "loops_per_input": loops,
        "inputs": len(records),
        "inputs_by_kind": dict(Counter(r.case.kind for r in records)),
        "counts": {
            "agreements": status["both_accept_same"] + status["both_reject_same_code"],
            **{k: status[k] for k in sorted(status)},
            "rejections_compared": len(rejected),
            "message_verdicts": dict(verdicts),
            "message_verdicts_by_kind": {
                kind: dict(
                    Counter(
                        r.quality["verdict"]
                        for r in records
                        if r.case.kind == kind and r.quality.get("verdict")
                    )
                )
                for kind in ("metric", "filter")
            },
            "messages_with_position": {
                f"{kind}_{who}": sum(
                    1
                    for r in records
                    if r.case.kind == kind and r.quality.get(who, {}).get("position")
                )
                for kind in ("metric", "filter")
                for who in ("hand", "sqlglot")
            },
        },
        "raw_sqlglot": {
            "what": "sqlglot.parse_one(text, read='duckdb') alone, before the whitelist",
            "parses": sum(1 for r in raw if r.sg_raw is None),
            "parse_error": sum(1 for r in raw if (r.sg_raw or "").startswith("ParseError")),
            "token_error_no_position": sum(
                1 for r in raw if (r.sg_raw or "").startswith("TokenError")
            ),
            "recursion_error": sum(1 for r in raw if (r.sg_raw or "").startswith("RecursionError")),
            "message_names_internal_class": sum(1 for r in raw if "<class" in (r.sg_raw or "")),
            "parsed_but_refused_by_whitelist": sum(
                1 for r in raw if r.sg_raw is None and not r.sg_syntax_ok
            ),
        },
        "timings_us_per_parse": times,
        "examples": {
            "sqlglot_accepts_hand_rejects": pairs(
                lambda r: r.status == "sqlglot_accepts_hand_rejects"
            ),
            "sqlglot_rejects_hand_accepts": pairs(
                lambda r: r.status == "sqlglot_rejects_hand_accepts"
            ),
            "both_accept_different": pairs(lambda r: r.status == "both_accept_different"),
            "sqlglot_message_worse": pairs(lambda r: r.quality.get("verdict") == "sqlglot_worse"),
            "sqlglot_message_better": pairs(lambda r: r.quality.get("verdict") == "sqlglot_better"),
            "crash": pairs(lambda r: r.status == "crash"),
        },
        "records": [_record_json(r) for r in records],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loops", type=int, default=1000, help="parses per input and parser")
    ap.add_argument("--out", type=Path, default=RESULTS / "grammar.json")
    args = ap.parse_args(argv)
    records, times = run(args.loops)
    result = summary(records, times, args.loops)
    result["machine"] = machine_facts("sqlglot", "pydantic")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    c = result["counts"]
    print(
        f"{result['inputs']} inputs ({result['inputs_by_kind']}); {machine_line(result['machine'])}"
    )
    print(json.dumps(c, indent=1))
    for name, t in times.items():
        print(
            f"{name:17} n={t['inputs']:3}  hand {t['hand_median_us']} µs  sqlglot "
            f"{t['sqlglot_median_us']} µs  (x{t['ratio']}); syntax only: hand "
            f"{t['hand_syntax_median_us']} µs, sqlglot {t['sqlglot_syntax_median_us']} µs"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
