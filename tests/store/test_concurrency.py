"""Several processes remember investigations in one DuckDB memory store at once: every write
lands (a process waits its turn while another holds the file), and a write that cannot land in
time fails the command with one line instead of a success message."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.store import DuckDBStore
from tests.support.records import ios_revenue_drop

# Slow end to end (investigations and processes saving at once):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
PERIODS = [
    "--time-column", "date", "--baseline", "2024-03-18:2024-03-24",
    "--comparison", "2024-03-25:2024-03-31", "--offline",
]  # fmt: skip
# The command line with every write step of a save slowed down, so that the saves of runs
# started together overlap (each holds the store file while it writes).
SLOW_WRITES = """
import sys, time
import tasks.store.base as base
from drilldown.cli import app


base._after_write_step = lambda step: time.sleep(0.3)
sys.argv = ["drilldown", *sys.argv[1:]]
app()
"""


def _save(path: str, run_id: str, start: multiprocessing.synchronize.Barrier) -> None:
    """One process saving one investigation, after the others are ready to save theirs; each
    write step slowed down so that the saves overlap."""
    import time

    import tasks.store.base as base
    from tasks.store.embed import WordLlamaEmbedder

    embedder = WordLlamaEmbedder()
    record = ios_revenue_drop(run_id=run_id)
    base._after_write_step = lambda step: time.sleep(0.2)
    start.wait(timeout=120)
    with DuckDBStore(path, embedder=embedder) as store:
        store.save_investigation(record)


def test_processes_saving_at_once_all_land(tmp_path: Path, embedder):
    path = str(tmp_path / "store.duckdb")
    ids = [f"run-{i}" for i in range(6)]
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(len(ids))
    procs = [spawn.Process(target=_save, args=(path, rid, start)) for rid in ids]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * len(ids)
    with DuckDBStore(path, embedder=embedder) as store:
        assert sorted(s.run_id for s in store.list_investigations(limit=20)) == ids
        for rid in ids:
            assert store.get_investigation(rid) == ios_revenue_drop(run_id=rid)


def _investigate(store: Path, out: Path, metric: str, wait: str = "120") -> subprocess.Popen:
    env = {**os.environ, "DRILLDOWN_STORE_PATH": str(store), "DRILLDOWN_STORE": "duckdb",
           "DRILLDOWN_STORE_WAIT": wait}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITES, "investigate", str(DEMO / "events.csv"),
         "--metric", metric, *PERIODS, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )  # fmt: skip


def test_concurrent_investigations_are_all_remembered(tmp_path: Path, embedder):
    store = tmp_path / "memory.duckdb"
    metrics = ["sum(revenue)", "sum(purchases)", "sum(sessions)", "count(*)"]
    procs = [_investigate(store, tmp_path / f"out{i}", m) for i, m in enumerate(metrics)]
    said = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-3000:]
        [line] = [x for x in stderr.splitlines() if x.startswith("remembered as ")]
        said.append(line.removeprefix("remembered as "))
    assert len(set(said)) == len(metrics)
    with DuckDBStore(store, embedder=embedder) as memory:
        assert sorted(s.run_id for s in memory.list_investigations(limit=20)) == sorted(said)
        for rid, metric in zip(said, metrics, strict=True):
            assert memory.get_investigation(rid).metric == metric


def test_a_store_held_too_long_fails_the_command_and_keeps_the_report(tmp_path: Path, embedder):
    store = tmp_path / "memory.duckdb"
    out = tmp_path / "out"
    with DuckDBStore(store, embedder=embedder):  # another process's long write
        proc = _investigate(store, out, "sum(revenue)", wait="1")
        _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 1
    assert "remembered as" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: investigation inv-") and "not remembered" in last
    assert "busy" in last and str(out) in last
    assert (out / "report.md").is_file() and (out / "result.json").is_file()
    with DuckDBStore(store, embedder=embedder) as memory:
        assert memory.list_investigations() == []


def test_a_wait_that_is_not_a_number_of_seconds_is_refused(tmp_path: Path):
    from tasks.store import StoreConfigError, store_from_config

    for raw in ("soon", "-1", "nan", "1e9"):
        env = {"DRILLDOWN_STORE_PATH": str(tmp_path / "s.duckdb"), "DRILLDOWN_STORE_WAIT": raw}
        with pytest.raises(StoreConfigError, match="DRILLDOWN_STORE_WAIT must be a number"):
            store_from_config(env)
    assert not (tmp_path / "s.duckdb").exists()
