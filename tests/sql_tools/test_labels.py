"""Period labels bind as the period column's type, written as text or as JSON numbers; a label
that cannot be of that type is refused. A text filter that matches no row but does in another
letter case says so in the result's notes."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from sql_tools import ToolContext
from tasks.tools import dispatch as call

COMPARE = "metric_compare_periods"


def _labelled(seed: int) -> tuple[str, dict[str, list[str]], dict[tuple[str, str], float]]:
    """CSV text with an integer, a decimal, a boolean, a date and a text column (of digits and
    a word) usable as periods; the labels each holds (as the CSV writes them) and
    ``sum(value)`` per (column, label)."""
    rng = random.Random(seed)
    years = list(range(rng.randint(1990, 2010), rng.randint(2015, 2030)))
    steps = sorted(rng.sample(range(1, 400), rng.randint(3, 6)))
    decimals = [f"{s / 4:.2f}" for s in steps]  # 0.25, 1.50, ...
    days = [f"2024-0{m}-1{d}" for m in (1, 2, 3) for d in (1, 5)]
    labels = {"year": [str(y) for y in years], "grade": decimals, "flag": ["true", "false"]}
    labels["day"] = days
    labels["fiscal"] = [str(y) for y in years[:3]] + ["FY-next"]
    sums: dict[tuple[str, str], float] = defaultdict(float)
    lines = [",".join([*labels, "platform", "value"])]
    for i in range(rng.randint(60, 200)):
        row = {k: rng.choice(v) for k, v in labels.items()}
        value = rng.randint(1, 1000)
        for k, v in row.items():
            sums[(k, v)] += value
        platform = rng.choice(["ios", "android"])
        lines.append(",".join([*row.values(), platform, str(value)]))
    return "\n".join(lines) + "\n", labels, sums


def _compare(ctx, column: str, baseline, comparison) -> tuple[bool, dict]:
    return call(
        ctx,
        COMPARE,
        {
            "table": "t",
            "metric": {"agg": "sum", "column": "value"},
            "period_column": column,
            "baseline": {"label": baseline},
            "comparison": {"label": comparison},
        },
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_period_labels_bind_as_the_columns_type(make_db, seed):
    text, labels, sums = _labelled(seed)
    rng = random.Random(seed)
    with ToolContext(make_db(t=text)) as ctx:
        kinds = {c.name: c.kind for c in ctx.schema.tables["t"]}
        assert kinds["year"] == kinds["grade"] == "number"
        assert (kinds["flag"], kinds["day"], kinds["fiscal"]) == ("boolean", "date", "text")
        for column, held in labels.items():
            b, c = rng.sample(held, 2)
            as_json = {
                "year": int,
                "grade": float,
                "flag": lambda s: s == "true",
                "fiscal": lambda s: int(s) if s.isdigit() else s,  # a JSON number: its digits
            }.get(column, str)
            # as text (a command line, the planner, the report's commands) and as JSON values
            pairs = [(b, c), (as_json(b), as_json(c))]
            if column == "year":  # a whole JSON float names the year too
                pairs.append((float(b), float(c)))
            if kinds[column] != "text":  # typed text is read as a value of that type
                pairs.append((f" {b} ", c))
            for baseline, comparison in pairs:
                is_error, out = _compare(ctx, column, baseline, comparison)
                assert not is_error, out
                assert out["total"]["baseline"] == pytest.approx(sums[(column, b)])
                assert out["total"]["comparison"] == pytest.approx(sums[(column, c)])


@pytest.mark.parametrize(
    ("column", "label", "want"),
    [
        ("year", "abc", "is not a whole number"),
        ("year", "2002.5", "is not a whole number"),
        ("year", "", "is not a whole number"),
        ("year", 2019.5, "is not a whole number"),
        ("grade", "1,5", "is not a number"),
        ("grade", "nan", "is not a number"),
        ("flag", "yes", "is not true or false"),
        ("day", "2024-13-01", "is not an ISO date"),
    ],
)
def test_a_label_that_cannot_be_the_columns_type_is_refused(make_db, column, label, want):
    text, labels, _ = _labelled(4)
    with ToolContext(make_db(t=text)) as ctx:
        is_error, out = _compare(ctx, column, label, labels[column][0])
    assert is_error, out
    assert out["error"]["code"] in ("invalid_period", "invalid_value"), out
    assert want in out["error"]["message"] and "\n" not in out["error"]["message"]


def _cased(seed: int) -> tuple[str, list[str]]:
    """Events whose platforms are written in one letter case each (which one varies)."""
    rng = random.Random(seed)
    names = [rng.choice([n, n.upper(), n.capitalize()]) for n in ("ios", "android", "web")]
    lines = ["date,platform,revenue"]
    for day in range(1, 15):
        for name in names:
            lines.append(f"2024-03-{day:02d},{name},{rng.randint(1, 99)}")
    return "\n".join(lines) + "\n", names


def _miscased(name: str, rng: random.Random) -> str:
    options = {name.lower(), name.upper(), name.capitalize(), name.swapcase()} - {name}
    return rng.choice(sorted(options))


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_a_filter_in_the_wrong_letter_case_names_the_values_that_exist(make_db, seed):
    text, names = _cased(seed)
    rng = random.Random(seed)
    held = rng.choice(names)
    wrong = _miscased(held, rng)
    other = rng.choice([n for n in names if n != held])
    periods = {
        "time_column": "date",
        "baseline": {"start": "2024-03-01", "end": "2024-03-07"},
        "comparison": {"start": "2024-03-08", "end": "2024-03-14"},
    }
    calls = {
        "metric_aggregate": {"table": "t", "measures": [{"agg": "sum", "column": "revenue"}]},
        "metric_sample": {"table": "t"},
        COMPARE: {"table": "t", "metric": {"agg": "sum", "column": "revenue"}, **periods},
    }
    with ToolContext(make_db(t=text)) as ctx:
        for tool, args in calls.items():
            for f in (
                {"column": "platform", "op": "=", "value": wrong},
                {"column": "platform", "op": "in", "value": [wrong, "nothing-like-it"]},
            ):
                is_error, out = call(ctx, tool, {**args, "filters": [f]})
                assert not is_error, out
                # matching stays exact: nothing matched
                assert out["matched_count"] == 0 or out["rows"] == [{"sum_revenue": None}]
                hint = [n for n in out["notes"] if "letter case" in n]
                assert len(hint) == 1, (tool, out["notes"])
                assert repr(wrong) in hint[0] and repr(held) in hint[0], hint
                assert "nothing-like-it" not in hint[0]
            # no note when the value exists as written, or in no letter case at all
            for value in (other, "nothing-like-it"):
                f = {"column": "platform", "op": "=", "value": value}
                is_error, out = call(ctx, tool, {**args, "filters": [f]})
                assert not is_error, out
                assert not [n for n in out["notes"] if "letter case" in n], out["notes"]
