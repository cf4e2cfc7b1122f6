"""Spill to disk stays within its cap: a query that needs more stops with ``resource_limit``.

A distinct count over a million unique strings needs far more than 32 MB of memory, so it
spills; with 4 MB of spill space allowed it must stop, on every connection of a context and in
``drilldown investigate``, and the private temporary directory must never grow past the cap.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from sql_tools import Limits, ResourceLimit, ToolContext
from tests.support.cli import ROOT

CAP = "4MB"
CAP_BYTES = 4 * 1000**2  # DuckDB reads "MB" as 10^6 bytes
MEMORY = "32MB"
DISTINCT = 'SELECT count(DISTINCT "visitor") FROM "visits"'


@pytest.fixture(scope="module")
def visits_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DuckDB file of a million visits over two weeks, each by a visitor of its own."""
    db = tmp_path_factory.mktemp("spill") / "visits.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE visits AS SELECT DATE '2024-03-04' + (i % 14)::INT AS date, "
            "['web', 'ios'][1 + i % 2] AS platform, 'visitor-' || md5(i::VARCHAR) AS visitor "
            "FROM range(1000000) r(i)"
        )
    return db


def _disk_use(folder: Path) -> int:
    """Bytes the files under ``folder`` take on disk (files vanish while it is walked)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


class _Peak:
    """The most disk the files under ``folder`` took while the block ran, sampled every 10 ms."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.bytes, self._done = folder, 0, threading.Event()
        self._watch = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.is_set():
            self.bytes = max(self.bytes, _disk_use(self.folder))
            time.sleep(0.01)

    def __enter__(self) -> _Peak:
        self._watch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._watch.join()


@pytest.mark.parametrize("connection", ["context", "sibling"])
def test_a_query_that_needs_more_spill_than_the_cap_stops_at_the_cap(visits_db, connection):
    limits = Limits(memory_limit=MEMORY, max_temp_directory_size=CAP, timeout_s=120)
    with ToolContext(visits_db, limits) as ctx:
        twin = ctx.sibling()
        target = ctx if connection == "context" else twin
        with _Peak(Path(ctx._tmpdir)) as peak, pytest.raises(ResourceLimit) as info:
            target.run(DISTINCT, max_rows=1)
        twin.close()
    assert info.value.code == "resource_limit"
    assert "max_temp_directory_size" in info.value.message and CAP in info.value.message
    # the sampler may miss a short spill on a busy machine; what it saw never exceeds the cap
    assert peak.bytes <= CAP_BYTES, peak.bytes


def test_investigate_stops_at_the_spill_cap_with_one_line_and_writes_nothing(visits_db, tmp_path):
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "DRILLDOWN_MEMORY_LIMIT": MEMORY,
        "DRILLDOWN_MAX_TEMP_DIRECTORY_SIZE": CAP,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    args = [
        *("investigate", str(visits_db), "--metric", "count(distinct visitor)"),
        *("--time-column", "date", "--dimensions", "platform"),
        *("--baseline", "2024-03-04:2024-03-10", "--comparison", "2024-03-11:2024-03-17"),
        *("--offline", "--no-remember", "--no-prefect", "--out", str(out)),
    ]
    with _Peak(tmp) as peak:
        proc = subprocess.run(
            [sys.executable, "-m", "drilldown.cli", *args],
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert "max_temp_directory_size" in lines[0] and "Traceback" not in proc.stderr
    assert peak.bytes <= CAP_BYTES, peak.bytes
    assert not (out / "result.json").exists()
