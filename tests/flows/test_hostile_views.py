"""A `.duckdb` file holding views that read a file, the settings or the environment, beside the
real table: investigating the table succeeds, finds what it finds without the views, names each
view in a note and writes nothing those views would read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.sql_tools.test_views import MARKER, build, hostile_views

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTION = [
    "--table", "sales", "--dimensions", "region,channel", "--metric", "sum(revenue)",
    "--baseline", "2024-03-01:2024-03-07", "--comparison", "2024-03-08:2024-03-14", "--offline",
]  # fmt: skip
# What the settings views would show: the sandbox's private folder and settings' own names.
SETTINGS_TEXT = ("drilldown-tmp-", "enable_external_access", "lock_configuration")


def investigate(db: Path, out: Path, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DRILLDOWN_STORE_PATH": str(store), "DRILLDOWN_STORE": "duckdb"}
    return subprocess.run(
        [sys.executable, "-m", "drilldown.cli", "investigate", str(db), *QUESTION,
         "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip


def named_segments(result: dict) -> list:
    return [
        [c["segment"] for c in result[part]]
        for part in ("root_causes", "drivers", "offsetting", "movers")
    ] + [sorted((json.dumps(f["segment"]), f["status"]) for f in result["findings"])]


def everything_written(out: Path, store: Path) -> str:
    texts = [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()]
    con = duckdb.connect(str(store), read_only=True)
    try:
        for schema, table in con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables()"
        ).fetchall():
            texts.append(repr(con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()))
    finally:
        con.close()
    return "\n".join(texts)


def test_views_reading_beyond_the_file_leave_the_investigation_of_the_table_as_it_is(tmp_path):
    views = hostile_views(tmp_path)
    with_views = build(tmp_path / "views.duckdb", views)
    plain = build(tmp_path / "plain.duckdb", {})
    results = {}
    for db in (with_views, plain):
        out, store = tmp_path / f"out-{db.stem}", tmp_path / f"store-{db.stem}.duckdb"
        proc = investigate(db, out, store)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
        results[db.stem] = json.loads((out / "result.json").read_text())
        written = everything_written(out, store) + proc.stdout + proc.stderr
        assert MARKER not in written
        for text in SETTINGS_TEXT:
            assert text not in written, text
    assert [c["segment"] for c in results["views"]["root_causes"]] == [{"region": "south"}]
    assert named_segments(results["views"]) == named_segments(results["plain"])
    notes = results["views"]["notes"]
    report = (tmp_path / "out-views" / "report.md").read_text()
    for name in views:
        assert sum(f"view {name!r} left out" in n for n in notes) == 1, name
        assert f"view {name!r} left out" in report.replace("\\_", "_"), name
    assert not [n for n in results["plain"]["notes"] if n.startswith("view ")]
