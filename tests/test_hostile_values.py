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

from tests.conftest import file_digest
from tests.test_cli import drilldown

ESC = "\x1b"
ZWSP = "Wid\u200bget"  # looks exactly like Widget
RLO = "abc\u202efdp.exe"  # a direction override: drawn as "abcexe.pdf"
LINK = f"{ESC}]8;;https://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\ {ESC}[2J{ESC}[31mred{ESC}[0m"
HIDDEN = ("\u200b", "\u202e", ESC)
WEEKS = ("2024-01-01:2024-01-07", "2024-01-08:2024-01-14")


def tool(db: Path, name: str, args: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], Any]:
    proc = drilldown("tool", name, "--db", str(db), "--args", json.dumps(args))
    return proc, json.loads(proc.stdout)


def _products_csv() -> str:
    """Six products a day for two weeks; the three hostile ones fall by 70% in the second."""
    products = ["Widget", ZWSP, RLO, LINK, "Gadget", "Gizmo"]
    rows = ["day,product,revenue"]
    for d in range(14):
        day = date(2024, 1, 1) + timedelta(days=d)
        for i, p in enumerate(products):
            for k in range(3):
                value = 100 + (d * 7 + i * 13 + k * 5) % 11
                if d >= 7 and p in (ZWSP, RLO, LINK):
                    value *= 0.3
                rows.append(f'{day},"{p}",{value:.2f}')
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The products investigated offline by the CLI."""
    root = tmp_path_factory.mktemp("hostile")
    csv = root / "products.csv"
    csv.write_text(_products_csv(), encoding="utf-8")
    out = root / "out"
    proc = drilldown(
        "investigate", str(csv), "--metric", "sum(revenue)", "--time-column", "day",
        "--baseline", WEEKS[0], "--comparison", WEEKS[1], "--offline", "--no-remember",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {"out": out, "db": out / "data.duckdb", "proc": proc}


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
    moved = [d["segment"]["product"] for d in result["drivers"]]
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
    assert counts == {p: 42 for p in ("Widget", ZWSP, RLO, LINK, "Gadget", "Gizmo")}
    # The exact value is bound as a parameter: it selects its own rows, not Widget's.
    only = {**args, "filters": [{"column": "product", "op": "=", "value": ZWSP}]}
    proc, out = tool(db, "metric_aggregate", only)
    assert [r["product"] for r in out["rows"]] == [ZWSP] and out["params"] == {"p1": ZWSP}
    assert "\\u200b" in proc.stdout and "\u200b" not in proc.stdout
    assert file_digest(db) == before
