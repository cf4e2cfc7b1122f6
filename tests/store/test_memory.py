"""Memory across investigations, through the CLI as a user runs it: the second investigation of
a similar incident cites the first, a dismissed finding is not re-proposed without new evidence,
re-running an investigation does not duplicate it, and `drilldown history` finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Slow end to end (investigations run one after another through the command line):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
IOS_52 = {"platform": "ios", "app_version": "5.2"}
DEMO = ROOT / "data" / "demo"
QUESTION = [
    "--metric", "sum(revenue)", "--time-column", "date",
    "--baseline", "2024-03-18:2024-03-24", "--comparison", "2024-03-25:2024-03-31", "--offline",
]  # fmt: skip


def drilldown(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DRILLDOWN_STORE_PATH": str(store), "DRILLDOWN_STORE": "duckdb"}
    proc = subprocess.run(
        [sys.executable, "-m", "drilldown.cli", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def investigate_demo(store: Path, out: Path) -> dict:
    """Investigate the demo data (events and users) into ``out``; its result.json."""
    drilldown(store, "investigate", str(DEMO / "events.csv"), str(DEMO / "users.csv"),
              "--table", "events", *QUESTION, "--out", str(out))  # fmt: skip
    return json.loads((out / "result.json").read_text())


def test_second_investigation_cites_the_first(tmp_path):
    store = tmp_path / "memory.duckdb"
    first, second = tmp_path / "first", tmp_path / "second"
    r1 = investigate_demo(store, first)
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
    investigate_demo(store, tmp_path / "again")
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


def _another_shop(folder: Path) -> Path:
    """A different dataset with the same table and columns as the demo (every amount doubled)."""
    import csv

    folder.mkdir()
    with (
        (DEMO / "events.csv").open(newline="") as src,
        (folder / "events.csv").open("w", newline="") as dst,
    ):
        rows = csv.DictReader(src)
        out = csv.DictWriter(dst, fieldnames=rows.fieldnames or [])
        out.writeheader()
        for row in rows:
            out.writerow({**row, "revenue": f"{float(row['revenue']) * 2:.2f}"})
    return folder / "events.csv"


def test_memory_of_another_dataset_is_marked_and_suppresses_nothing(tmp_path):
    store = tmp_path / "memory.duckdb"
    first, second = tmp_path / "first", tmp_path / "second"
    r1 = investigate_demo(store, first)
    dismissed = [f["segment"] for f in r1["findings"] if f["status"] == "dismissed"]
    assert dismissed == [{"country": "US"}]

    # another shop's export: the same table, columns and metric, other data
    drilldown(store, "investigate", str(_another_shop(tmp_path / "shop-b")), *QUESTION,
              "--out", str(second))  # fmt: skip
    r2 = json.loads((second / "result.json").read_text())
    # the driver dismissed on the first shop's data is investigated again on this one
    assert [h for h in r2["hypotheses"] if h["segment"] == {"country": "US"}]
    [past] = r2["similar_investigations"]
    assert past["same_data"] is False
    # the first shop's root cause is cited as seen on other data, and weighs no more for it
    cause = next(h for h in r2["hypotheses"] if h["segment"] == IOS_52)
    assert "Seen before on other data" in cause["story"] and cause["cites"] == [past["run_id"]]
    assert cause["prior"] == next(h for h in r1["hypotheses"] if h["segment"] == IOS_52)["prior"]
    report = (second / "report.md").read_text()
    section = report.split("## Similar past investigations", 1)[1].split("\n## ", 1)[0]
    assert past["run_id"] in section and "other data" in section
    assert "other data" in (second / "report.html").read_text()


def test_a_named_source_carries_memory_to_its_next_version(tmp_path):
    store = tmp_path / "memory.duckdb"
    drilldown(store, "investigate", str(DEMO / "events.csv"), *QUESTION, "--source", "shop",
              "--out", str(tmp_path / "week1"))  # fmt: skip
    # the same source a week later: its rows changed, its name did not
    later = tmp_path / "week2"
    drilldown(store, "investigate", str(_another_shop(tmp_path / "export")), *QUESTION,
              "--source", "shop", "--out", str(later))  # fmt: skip
    result = json.loads((later / "result.json").read_text())
    assert [p["same_data"] for p in result["similar_investigations"]] == [True]
    cause = next(h for h in result["hypotheses"] if h["segment"] == IOS_52)
    assert "Seen before: the investigation of" in cause["story"]
    assert not [h for h in result["hypotheses"] if h["segment"] == {"country": "US"}]
    assert "other data" not in (later / "report.md").read_text()


def _loaded_and_changed(tmp_path: Path) -> tuple[Path, Path]:
    """Two databases the loader wrote from the same file, one of them changed afterwards (every
    US amount tripled): the same catalogue, other data."""
    import shutil

    import duckdb

    from tasks.ingest.load import load_files

    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    load_files([DEMO / "events.csv"], a)
    shutil.copy(a, b)
    con = duckdb.connect(str(b))
    try:
        con.execute("update events set revenue = revenue * 3 where country = 'US'")
    finally:
        con.close()
    return a, b


def investigate_db(store: Path, db: Path, out: Path) -> dict:
    """Investigate the database ``db`` into ``out``; its result.json."""
    drilldown(store, "investigate", str(db), *QUESTION, "--out", str(out))
    return json.loads((out / "result.json").read_text())


def test_two_databases_asked_the_same_question_are_two_investigations(tmp_path):
    store = tmp_path / "memory.duckdb"
    a, b = _loaded_and_changed(tmp_path)
    r1, r2 = (investigate_db(store, db, tmp_path / db.stem) for db in (a, b))
    dismissed = [f["segment"] for f in r1["findings"] if f["status"] == "dismissed"]
    assert dismissed == [{"country": "US"}]
    # b did not replace a: both are stored, and a is listed as an investigation of other data
    lines = drilldown(store, "history", "revenue fell", "--limit", "10").stdout.splitlines()
    assert len(lines) == 2
    [past] = r2["similar_investigations"]
    assert past["same_data"] is False
    # the driver a dismissed on its data is investigated again on b's
    assert [h for h in r2["hypotheses"] if h["segment"] == {"country": "US"}]


def test_the_identity_of_a_database_is_its_contents(tmp_path):
    """Databases written outside the loader have no load records: their tables' contents still
    tell them apart, and a copy of a database holds the same data."""
    import shutil

    import duckdb

    from tasks.run import Run
    from tasks.store.models import DataIdentity

    a, b, copy = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "copy.duckdb"
    for path, factor in ((a, 1), (b, 2)):
        con = duckdb.connect(str(path))
        try:
            con.execute(f"create table events as select * from read_csv('{DEMO / 'events.csv'}')")
            con.execute(f"update events set revenue = revenue * {factor} where country = 'US'")
        finally:
            con.close()
    shutil.copy(a, copy)
    prints = {}
    for path in (a, b, copy):
        with Run(path, {}) as run:
            prints[path.stem] = run.fingerprint
    assert set(prints["a"]) == {"events"} and prints["a"] != prints["b"]
    assert prints["a"] == prints["copy"]
    ident = {k: DataIdentity(table="events", fingerprint=fp) for k, fp in prints.items()}
    assert not ident["a"].same_data(ident["b"]) and ident["a"].same_data(ident["copy"])
