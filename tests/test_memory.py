"""Memory across investigations, through the CLI as a user runs it: the second investigation of
a similar incident cites the first, a dismissed finding is not re-proposed without new evidence,
re-running an investigation does not duplicate it, and `drilldown history` finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "demo"
QUESTION = [
    "--metric", "sum(revenue)", "--time-column", "date",
    "--baseline", "2024-03-18:2024-03-24", "--comparison", "2024-03-25:2024-03-31", "--offline",
]  # fmt: skip


def drilldown(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DRILLDOWN_STORE_PATH": str(store), "DRILLDOWN_STORE": "duckdb"}
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_second_investigation_cites_the_first(tmp_path):
    store = tmp_path / "memory.duckdb"
    first, second = tmp_path / "first", tmp_path / "second"
    drilldown(store, "investigate", str(DEMO / "events.csv"), str(DEMO / "users.csv"),
              "--table", "events", *QUESTION, "--out", str(first))  # fmt: skip
    r1 = json.loads((first / "result.json").read_text())
    assert r1["similar_investigations"] == []
    dismissed = [f["segment"] for f in r1["findings"] if f["status"] == "dismissed"]
    assert dismissed, "the first run dismissed a driver"
    run1 = [line for line in drilldown(store, "history", "x").stdout.splitlines()]
    assert len(run1) == 1
    first_id = run1[0].rsplit("(run ", 1)[1].rstrip(")")

    # the same incident in a later export (events only): a different investigation
    proc = drilldown(store, "investigate", str(DEMO / "events.csv"), *QUESTION,
                     "--out", str(second))  # fmt: skip
    assert "1 similar past investigation(s) found" in proc.stderr
    r2 = json.loads((second / "result.json").read_text())
    assert [p["run_id"] for p in r2["similar_investigations"]] == [first_id]
    assert r2["similar_investigations"][0]["root_causes"] == ["platform=ios, app_version=5.2"]
    cause = next(
        h for h in r2["hypotheses"] if h["segment"] == {"platform": "ios", "app_version": "5.2"}
    )
    assert cause["cites"] == [first_id] and first_id in cause["story"]
    assert cause["status"] == "confirmed"
    assert not [h for h in r2["hypotheses"] if h["segment"] in dismissed]
    report = (second / "report.md").read_text()
    assert "## Similar past investigations" in report and first_id in report

    # running the first again updates it in place: still two investigations
    drilldown(store, "investigate", str(DEMO / "events.csv"), str(DEMO / "users.csv"),
              "--table", "events", *QUESTION, "--out", str(tmp_path / "again"))  # fmt: skip
    lines = drilldown(store, "history", "ios app release revenue fell").stdout.splitlines()
    assert len(lines) == 2
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:  # every stored tool call keeps the digest of its result
        rows, missing = con.execute(
            "select count(*), count(*) filter (where result_digest is null) from evidence"
        ).fetchone()
    finally:
        con.close()
    assert rows > 0 and missing == 0
    assert all("platform=ios, app_version=5.2" in line for line in lines)


def test_no_remember_leaves_the_store_alone(tmp_path):
    store = tmp_path / "memory.duckdb"
    drilldown(store, "investigate", str(DEMO / "events.csv"), *QUESTION, "--no-remember",
              "--out", str(tmp_path / "o"))  # fmt: skip
    assert not store.exists()
