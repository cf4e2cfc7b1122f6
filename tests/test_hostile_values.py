"""Cell values that are not what they look like, met as a user meets them: through the CLI.

Invisible characters (a zero-width space, a direction override) and terminal control sequences
(a hyperlink, clear-screen, colours) are kept exact in the data and in SQL parameters, and shown
as escapes wherever a person or the model reads them.
"""

from __future__ import annotations

import json
import subprocess
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import drilldown, file_digest

ESC = "\x1b"
ZWSP = "Wid\u200bget"  # looks exactly like Widget
RLO = "abc\u202efdp.exe"  # a direction override: drawn as "abcexe.pdf"
LINK = f"{ESC}]8;;https://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\ {ESC}[2J{ESC}[31mred{ESC}[0m"
HIDDEN = ("\u200b", "\u202e", ESC)
PRODUCTS = ["Widget", ZWSP, RLO, LINK, "Gadget", "Gizmo"]  # the hostile three fall
WEEKS = ("2024-01-01:2024-01-07", "2024-01-08:2024-01-14")


def tool(db: Path, name: str, args: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], Any]:
    proc = drilldown("tool", name, "--db", str(db), "--args", json.dumps(args))
    return proc, json.loads(proc.stdout)


def weeks_csv(column: str, values: list[Any], falling: list[Any]) -> str:
    """Two weeks of revenue, three rows a day per value of ``column`` (and a BIGINT ``units``
    column of 2^60 + day); the ``falling`` values' revenue drops by 70% in the second week."""
    rows = [f"day,{column},units,revenue"]
    for d in range(14):
        day = date(2024, 1, 1) + timedelta(days=d)
        for i, v in enumerate(values):
            for k in range(3):
                value = 100 + (d * 7 + i * 13 + k * 5) % 11
                if d >= 7 and v in falling:
                    value *= 0.3
                rows.append(f'{day},"{v}",{2**60 + d},{value:.2f}')
    return "\n".join(rows) + "\n"


def investigated(root: Path, name: str, csv_text: str, *args: str) -> dict[str, Any]:
    """``root/name.csv`` investigated offline by the CLI (sum of revenue, week over week)."""
    csv = root / f"{name}.csv"
    csv.write_text(csv_text, encoding="utf-8")
    out = root / "out"
    proc = drilldown(
        "investigate", str(csv), "--metric", "sum(revenue)", "--time-column", "day",
        "--baseline", WEEKS[0], "--comparison", WEEKS[1], "--offline", "--no-remember",
        "--out", str(out), *args,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {"out": out, "db": out / "data.duckdb", "proc": proc}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The products investigated offline by the CLI."""
    text = weeks_csv("product", PRODUCTS, falling=[ZWSP, RLO, LINK])
    return investigated(tmp_path_factory.mktemp("hostile"), "products", text)


def read(run: dict[str, Any], name: str) -> str:
    return (run["out"] / name).read_text(encoding="utf-8")


def test_the_report_shows_invisible_characters_as_escapes(hostile):
    md, page = read(hostile, "report.md"), read(hostile, "report.html")
    for text in (md, page):
        assert not any(ch in text for ch in HIDDEN)
    # report.md escapes the backslash for Markdown: it renders as Wid\u200bget
    assert "product = Wid\\\\u200bget |" in md
    assert "product = abc\\\\u202efdp.exe |" in md
    assert "<b>product</b> = Wid\\u200bget</td>" in page
    assert "<b>product</b> = abc\\u202efdp.exe</td>" in page


def test_terminal_sequences_in_a_cell_never_reach_the_report(hostile):
    md, page = read(hostile, "report.md"), read(hostile, "report.html")
    assert ESC not in md and ESC not in page
    assert (
        "product = \\\\x1b\\]8;;hxxps://evil.example/\\\\x1b\\\\click\\\\x1b\\]8;;\\\\x1b\\\\ "
        "\\\\x1b\\[2J\\\\x1b\\[31mred\\\\x1b\\[0m |"
    ) in md
    assert (
        "<b>product</b> = \\x1b]8;;hxxps://evil.example/\\x1b\\click\\x1b]8;;\\x1b\\ "
        "\\x1b[2J\\x1b[31mred\\x1b[0m</td>"
    ) in page
    for log in (hostile["out"] / "hypotheses").glob("*.log"):
        assert ESC not in log.read_text(encoding="utf-8")


def test_the_cli_prints_escapes_and_result_json_keeps_exact_values(hostile):
    proc = hostile["proc"]
    printed = proc.stdout + proc.stderr
    assert not any(ch in printed for ch in HIDDEN)
    assert "product = Wid\\u200bget changed" in printed
    for name in ("result.json", "evidence.jsonl"):
        assert not any(ch in read(hostile, name) for ch in HIDDEN)
    result = json.loads(read(hostile, "result.json"))
    moved = [d["segment"]["product"] for d in result["root_causes"] + result["drivers"]]
    assert {ZWSP, RLO, LINK} <= set(moved) and "Widget" not in moved
    entries = [json.loads(line) for line in read(hostile, "evidence.jsonl").splitlines()]
    sent = [e["result"]["rows"] for e in entries if e["tool"] == "metric_compare_periods"]
    assert {ZWSP, RLO, LINK, "Widget"} <= {r.get("product") for rows in sent for r in rows}


def test_tool_results_keep_values_apart_and_print_them_escaped(hostile):
    db = hostile["db"]
    before = file_digest(db)
    args = {"table": "products", "measures": [{"agg": "count"}], "group_by": ["product"]}
    proc, out = tool(db, "metric_aggregate", args)
    assert proc.returncode == 0
    assert not any(ch in proc.stdout for ch in HIDDEN)
    assert '"product": "Wid\\u200bget"' in proc.stdout
    counts = {r["product"]: r["count"] for r in out["rows"]}
    assert counts == {p: 42 for p in PRODUCTS}
    # The exact value is bound as a parameter: it selects its own rows, not Widget's.
    only = {**args, "filters": [{"column": "product", "op": "=", "value": ZWSP}]}
    proc, out = tool(db, "metric_aggregate", only)
    assert [r["product"] for r in out["rows"]] == [ZWSP] and out["params"] == {"p1": ZWSP}
    assert "\\u200b" in proc.stdout and "\u200b" not in proc.stdout
    assert file_digest(db) == before


# --- integers beyond 2^53 -----------------------------------------------------------------------

SAFE = 2**53 - 1
ACCOUNTS = [2**60 + 1, 2**60 + 2, 9223372036854775808, 2**63 + 5, 17]  # HUGEINT column
FALLING_ACCOUNT = 9223372036854775808


def exact_json(text: str) -> Any:
    """Parse ``text``, failing on any integer a JavaScript reader would round."""

    def parse_int(literal: str) -> int:
        assert abs(int(literal)) <= SAFE, f"bare integer {literal} in JSON"
        return int(literal)

    return json.loads(text, parse_int=parse_int)


@pytest.fixture(scope="module")
def accounts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Accounts with ids beyond 2^53 investigated offline by the CLI, one of them falling."""
    root = tmp_path_factory.mktemp("accounts")
    text = weeks_csv("account", ACCOUNTS, falling=[FALLING_ACCOUNT])
    return investigated(root, "accounts", text, "--dimensions", "account")


def test_tool_results_write_big_integers_as_strings(accounts):
    db = accounts["db"]
    before = file_digest(db)
    day = [{"column": "day", "op": "=", "value": "2024-01-01"}]
    args = {"table": "accounts", "columns": ["account", "units"], "filters": day, "n": 15}
    proc = drilldown("tool", "metric_sample", "--db", str(db), "--args", json.dumps(args))
    rows = exact_json(proc.stdout)["rows"]
    assert {r["account"] for r in rows} == {str(a) if a > SAFE else a for a in ACCOUNTS}
    assert {r["units"] for r in rows} == {str(2**60)}
    # A value read back as a string is accepted as the integer it stands for.
    pick = {"column": "account", "op": "=", "value": str(FALLING_ACCOUNT)}
    args = {"table": "accounts", "measures": [{"agg": "count"}, {"agg": "sum", "column": "units"}]}
    proc = drilldown(
        "tool", "aggregate", "--db", str(db), "--args", json.dumps({**args, "filters": [pick]})
    )
    out = exact_json(proc.stdout)
    assert out["rows"] == [{"count": 42, "sum_units": str(42 * 2**60 + 3 * sum(range(14)))}]
    assert out["params"] == {"p1": str(FALLING_ACCOUNT)}
    assert file_digest(db) == before


def test_result_json_and_evidence_write_big_integers_as_strings(accounts):
    result = exact_json(read(accounts, "result.json"))
    for line in read(accounts, "evidence.jsonl").splitlines():
        exact_json(line)
    [cause] = result["root_causes"]
    assert cause["segment"] == {"account": str(FALLING_ACCOUNT)}
    assert f"root cause: account={FALLING_ACCOUNT}" in accounts["proc"].stdout
    assert f"account = {FALLING_ACCOUNT}" in read(accounts, "report.md")
    # The re-run command the report prints works as written and gives the reported numbers.
    ev = cause["evidence"]
    proc = drilldown(
        "tool", ev["tool"], "--db", str(accounts["db"]), "--args", json.dumps(ev["arguments"])
    )
    assert proc.returncode == 0, proc.stdout
    total = exact_json(proc.stdout)["total"]
    assert (total["baseline"], total["comparison"]) == pytest.approx(
        (cause["baseline"], cause["comparison"])
    )


# --- NaN and infinities ---------------------------------------------------------------------------

NON_FINITE_ROWS = ["2024-01-02,US,1,-Infinity", "2024-01-09,EU,1,NaN", "2024-01-10,US,1,inf"]


@pytest.fixture(scope="module")
def non_finite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Revenue by region with NaN, Infinity and -Infinity among the values, investigated."""
    text = weeks_csv("region", ["EU", "US", "APAC"], falling=["EU"])
    text += "\n".join(NON_FINITE_ROWS) + "\n"
    return investigated(tmp_path_factory.mktemp("non-finite"), "sales", text)


def test_tools_say_why_a_sum_over_non_finite_values_is_null(non_finite):
    db = non_finite["db"]
    before = file_digest(db)
    measures = [{"agg": a, "column": "revenue"} for a in ("sum", "avg", "max", "count")]
    _, out = tool(db, "metric_aggregate", {"table": "sales", "measures": measures})
    [row] = out["rows"]
    assert (row["sum_revenue"], row["avg_revenue"], row["max_revenue"]) == (None, None, None)
    assert row["count_revenue"] == 3 * 3 * 14 + 3
    assert out["notes"] == [
        "column 'revenue' holds 3 non-finite values (1 NaN, 1 Infinity, 1 -Infinity) in the "
        "rows read: a sum, average, minimum or maximum that takes one in is not a finite "
        "number and is shown as null"
    ]
    weeks = {"time_column": "day", "baseline": {"start": "2024-01-01", "end": "2024-01-07"},
             "comparison": {"start": "2024-01-08", "end": "2024-01-14"}}  # fmt: skip
    args = {"table": "sales", "metric": measures[0], "group_by": ["region"], **weeks}
    args["filters"] = [{"column": "region", "op": "=", "value": "EU"}]
    _, out = tool(db, "metric_compare_periods", args)
    assert out["rows"][0]["comparison"] is None and out["total"]["comparison"] is None
    assert "column 'revenue' holds 1 non-finite value (1 NaN) in the rows read" in out["notes"][0]
    _, out = tool(db, "metric_sample", {"table": "sales", "filters": [
        {"column": "day", "op": "in", "value": ["2024-01-02", "2024-01-09", "2024-01-10"]},
        {"column": "units", "op": "=", "value": 1},
    ]})  # fmt: skip
    assert [r["revenue"] for r in out["rows"]] == [None, None, None]
    assert out["notes"] == [
        "column 'revenue': 3 non-finite values (1 NaN, 1 Infinity, 1 -Infinity) in these rows, "
        "shown as null"
    ]
    assert file_digest(db) == before


def test_the_engine_and_report_name_the_column_and_the_count(non_finite):
    """Once: -Infinity became -1.8e308 and NaN 0 in the engine, and drawing the waterfall
    failed ("arange: cannot compute length"), so no report was written."""
    result = json.loads(read(non_finite, "result.json"))
    [issue] = [d for d in result["data_quality"] if d["kind"] == "non_finite_values"]
    assert issue["column"] == "revenue"
    assert issue["message"] == (
        "Column 'revenue' holds 3 non-finite values (1 NaN, 1 Infinity, 1 -Infinity): 1 in the "
        "baseline, 2 in the comparison. The metric leaves them out, like missing values; a SQL "
        "tool's sum or average over them comes back null."
    )
    assert "- **non finite values** (warning): Column 'revenue' holds 3 non-finite values" in (
        read(non_finite, "report.md")
    )
    assert "<b>non finite values</b> (warning): Column &#x27;revenue&#x27; holds 3" in (
        read(non_finite, "report.html")
    )
    assert "data quality: Column 'revenue' holds 3 non-finite values" in non_finite["proc"].stdout
    # The metric is the sum of the finite values; the drop planted in EU leads the movers.
    rows = [line.split(",") for line in weeks_csv("region", ["EU", "US", "APAC"], ["EU"]).split()]
    week1 = sum(float(r[3]) for r in rows[1:] if r[0] <= "2024-01-07")
    assert result["baseline"]["value"] == pytest.approx(week1)
    assert (result["root_causes"] + result["drivers"])[0]["segment"] == {"region": "EU"}
