"""A column's role (time, identifier, measure, dimension, other), guessed from its name, its
type and its counts; the words of a column name that the guess reads."""

from __future__ import annotations

import re

from sql_tools.catalog import INTEGER_TYPES, Role, kind_of

LOW_CARDINALITY_MAX = 20
ID_MIN_DISTINCT = 1_000
ID_MIN_SHARE = 0.5
UNIQUE_ID_MIN_ROWS = 100
FREE_TEXT_MIN_AVG_LENGTH = 40

_ID_LAST_WORDS = frozenset({"id", "uuid", "guid", "key"})
_AMOUNT_WORDS = frozenset(
    {
        "revenue",
        "revenues",
        "amount",
        "amounts",
        "price",
        "prices",
        "cost",
        "costs",
        "sessions",
        "count",
        "counts",
        "qty",
        "quantity",
        "quantities",
        "value",
        "values",
        "sales",
        "clicks",
        "views",
        "orders",
        "purchases",
        "users",
        "total",
        "sum",
        "spend",
        "units",
        "impressions",
        "conversions",
        "visits",
        "signups",
    }
)


def _is_integer(duck_type: str) -> bool:
    return duck_type.upper() in INTEGER_TYPES


def name_words(name: str) -> list[str]:
    """Split a column name into lower-case words at separators, camel case and digits.

    ``userId`` -> ``["user", "id"]``, ``USER_ID`` -> ``["user", "id"]``,
    ``pageViews2024`` -> ``["page", "views", "2024"]``, ``valid`` -> ``["valid"]``.
    """
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    parts = re.split(r"[^a-z0-9]+|(?<=[a-z])(?=[0-9])|(?<=[0-9])(?=[a-z])", s.lower())
    return [p for p in parts if p]


def is_identifier_name(name: str) -> bool:
    """True for names like ``id``, ``user_id``, ``userId``, ``uuid``, ``order_key``, ``email``."""
    words = name_words(name)
    if not words:
        return False
    return words[-1] in _ID_LAST_WORDS or words[-1] == "email" or words[-2:] == ["email", "address"]


def is_amount_name(name: str) -> bool:
    """True when a word of ``name`` suggests a quantity (revenue, amount, price, sessions, ...)."""
    return any(w in _AMOUNT_WORDS for w in name_words(name))


def guess_role(
    name: str,
    duck_type: str,
    row_count: int,
    non_null: int,
    distinct: int,
    avg_length: float | None = None,
) -> Role:
    """Guess what a column is for. The first rule that matches wins.

    1. No non-null value at all -> ``other``.
    2. DATE / TIMESTAMP / TIMESTAMP WITH TIME ZONE -> ``time``.
    3. Named like an identifier (``id``, ``*_id``, camel ``userId``, ``uuid``, ``*_key``,
       ``email``), or of type UUID -> ``identifier``.
    4. A single distinct value: ``measure`` if numeric with an amount-like name, else ``other``.
    5. Numbers:
       a. name suggests an amount (revenue, amount, price, cost, sessions, count, qty, quantity,
          value, sales, clicks, views, orders, purchases, users, total, ...) -> ``measure``;
       b. non-integer (FLOAT, DOUBLE, DECIMAL) -> ``measure``;
       c. integer unique per row (no nulls) in a table of more than 100 rows -> ``identifier``;
       d. integer with distinct count > 50 % of rows and > 1,000 -> ``identifier``;
       e. integer with more than 20 distinct values -> ``measure``;
       f. otherwise (a low-cardinality code such as ``app_version`` or ``tier``) -> ``dimension``.
    6. Text:
       a. more than 50 % of the non-null values distinct and an average length of at least 40
          characters (free text such as comments) -> ``other``;
       b. distinct count > 50 % of rows and > 1,000 -> ``identifier``;
       c. otherwise -> ``dimension``.
    7. BOOLEAN -> ``dimension``.
    8. Anything else (TIME, INTERVAL, BLOB, lists, structs) -> ``other``.

    Args:
        name: Column name.
        duck_type: DuckDB type string.
        row_count: Rows in the table.
        non_null: Non-null values in the column.
        distinct: Distinct non-null values (exact or estimated).
        avg_length: Average length of the text values (text columns only).

    Returns:
        One of ``time``, ``identifier``, ``measure``, ``dimension``, ``other``.
    """
    kind = kind_of(duck_type)
    if non_null == 0:
        return "other"
    if kind in ("date", "timestamp"):
        return "time"
    if is_identifier_name(name) or duck_type.upper() == "UUID":
        return "identifier"
    if distinct <= 1:
        return "measure" if kind == "number" and is_amount_name(name) else "other"
    high_cardinality = distinct > ID_MIN_SHARE * row_count and distinct > ID_MIN_DISTINCT
    if kind == "number":
        if is_amount_name(name) or not _is_integer(duck_type):
            return "measure"
        if distinct == row_count == non_null and row_count > UNIQUE_ID_MIN_ROWS:
            return "identifier"
        if high_cardinality:
            return "identifier"
        return "measure" if distinct > LOW_CARDINALITY_MAX else "dimension"
    if kind == "text":
        if distinct > ID_MIN_SHARE * non_null and (avg_length or 0) >= FREE_TEXT_MIN_AVG_LENGTH:
            return "other"
        return "identifier" if high_cardinality else "dimension"
    if kind == "boolean":
        return "dimension"
    return "other"
