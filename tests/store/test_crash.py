"""A process killed in the middle of saving leaves no partial investigation behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tasks.store import DuckDBStore
from tests.support.records import ios_revenue_drop

ROOT = Path(__file__).resolve().parents[2]

# Saves a record, pausing at one write step (reported on stdout) so the test can kill it there.
CHILD = """
import sys, time
import tasks.store.base as base
from tasks.store import DuckDBStore, InvestigationRecord, PostgresStore
from tasks.store.embed import WordLlamaEmbedder

kind, target, record_path, stop = sys.argv[1:5]
record = InvestigationRecord.model_validate_json(open(record_path).read())

def pause(step):
    print(step, flush=True)
    if step == stop:
        time.sleep(120)

base._after_write_step = pause
opener = DuckDBStore if kind == "duckdb" else PostgresStore
opener(target, embedder=WordLlamaEmbedder()).save_investigation(record)
print("saved", flush=True)
"""


def kill_during_save(kind: str, target: str, record, stop: str, tmp_path: Path) -> list[str]:
    """Run a saving process, SIGKILL it when it reaches `stop`; return the steps it reported."""
    record_path = tmp_path / "record.json"
    record_path.write_text(record.model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, target, str(record_path), stop],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    steps = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            steps.append(line.strip())
            if steps[-1] == stop:
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
    assert steps and steps[-1] == stop, (steps, proc.stderr.read())  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    return steps


def test_killed_mid_save_keeps_the_previous_version_and_nothing_partial(backend, tmp_path):
    original = ios_revenue_drop()
    store = backend.open()
    store.save_investigation(original)
    before = backend.counts()
    store.close()  # DuckDB: one process holds the file at a time

    changed = ios_revenue_drop(report_md="# v2\n\nrewritten", hypotheses=[], findings=[])
    if backend.name == "duckdb":
        target, stop = str(store.path), "findings"  # old rows deleted, new ones half inserted
    else:
        target, stop = store.dsn, "written"  # the write function ran; not yet committed
    steps = kill_during_save(backend.name, target, changed, stop, tmp_path)
    if backend.name == "duckdb":
        assert steps == ["investigation", "hypotheses", "evidence", "findings"]

    reopened = backend.open()
    assert reopened.get_investigation(original.run_id) == original
    assert backend.counts() == before


def test_killed_during_a_first_save_leaves_an_empty_store(tmp_path: Path, embedder):
    path = tmp_path / "store.duckdb"
    DuckDBStore(path, embedder=embedder).close()
    kill_during_save("duckdb", str(path), ios_revenue_drop(), "report", tmp_path)
    with DuckDBStore(path, embedder=embedder) as reopened:
        assert reopened.get_investigation("run-ios-revenue") is None
        assert reopened.list_investigations() == []
        assert set(reopened.table_counts().values()) == {0}
