"""The metric grammar: ``AGG`` or ``AGG / AGG`` tokenized and parsed into a syntax tree (no
schema lookups); errors name the character and what was expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sql_tools import ToolInputError, short
from tasks.engine.parse.columns import _Ref, _unquote
from tasks.engine.spec import AggFn

METRIC_CODE = "invalid_arguments"
"""Code for metric syntax errors (``invalid_metric`` is not a registered code)."""
MAX_METRIC_CHARS = 1_000

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
