"""Runs that complete in an output folder: a re-run into the product's own folder replaces its
report, and two runs into one new folder never write over, nor clean up under, each other (one
holds the folder; the other is refused in one line, exit 2, and removes nothing).

Each run is ``drilldown investigate --offline`` in a real subprocess, remembering in a store of
its own beside the folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tasks.outdir import MARKER
from tests.report.test_out_folder import WEEKS, cli, refused_line, write_events
from tests.support.cli import ROOT

# Slow end to end (whole investigations in subprocesses): left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_events(tmp_path_factory.mktemp("out-folder-runs"))

# The command line, with the output folder held until the file GO exists: the run has taken
# its folder (HELD is written) and waits there, so that another run meets it holding the folder.
HOLD = """
import os, sys, time
from pathlib import Path
import tasks.outdir as outdir
from drilldown.cli import app

held, go = Path(sys.argv[1]), Path(sys.argv[2])
take = outdir.claim


def claim_and_wait(out, *args, **kwargs):
    taken = take(out, *args, **kwargs)
    held.write_text("held")
    for _ in range(3000):
        if go.exists():
            break
        time.sleep(0.1)
    return taken


outdir.claim = claim_and_wait
sys.argv = ["drilldown", *sys.argv[3:]]
app()
"""


def holding(tmp_path: Path, events: Path, out: Path, metric: str) -> subprocess.Popen[str]:
    """A run into ``out`` that holds it until ``tmp_path/go`` exists; returns once it holds."""
    argv = ["investigate", str(events), "--metric", metric, *WEEKS, "--offline", "--out", str(out)]
    env = {"DRILLDOWN_STORE_PATH": str(tmp_path / "holder-store.duckdb")}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "held"), str(tmp_path / "go"), *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **env},
    )  # fmt: skip
    while not (tmp_path / "held").exists():
        assert proc.poll() is None, proc.communicate()
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
    return proc


def complete(out: Path) -> dict:
    """The folder holds one whole report: result.json, report.md and a database that opens."""
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert (out / "report.md").read_text(encoding="utf-8").startswith("#")
    con = duckdb.connect(str(out / "data.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 42
    finally:
        con.close()
    return result


def test_a_second_run_into_a_held_folder_is_refused_and_removes_nothing(events, tmp_path):
    out = tmp_path / "out"
    holder = holding(tmp_path, events, out, "sum(revenue)")
    try:
        line = refused_line(cli(events, out))
        assert f"another run is writing into {out}" in line, line
        assert (out / MARKER).is_file(), "the refused run removed the holder's folder"
    finally:
        (tmp_path / "go").write_text("go")
        stdout, stderr = holder.communicate(timeout=300)
    assert holder.returncode == 0, stderr
    assert f"wrote {out / 'report.md'}" in stdout
    result = complete(out)
    assert result["change"]["relative"] < 0


def test_a_failed_run_takes_back_its_new_folder_only_after_letting_no_one_in(events, tmp_path):
    # the holder fails (a column the data does not have) after making the folder: the run that
    # met it is refused and removes nothing; the holder then takes back what it made, and the
    # next run into the same folder completes
    out = tmp_path / "out"
    holder = holding(tmp_path, events, out, "sum(no_such_column)")
    try:
        refused_line(cli(events, out))
    finally:
        (tmp_path / "go").write_text("go")
        holder.communicate(timeout=300)
    assert holder.returncode == 2 and not out.exists()
    assert cli(events, out).returncode == 0
    complete(out)


def test_two_runs_started_together_into_one_new_folder_leave_one_whole_report(events, tmp_path):
    out = tmp_path / "new" / "out"
    argv = ["investigate", str(events), "--metric", "sum(revenue)", *WEEKS, "--offline"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "drilldown.cli", *argv, "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "DRILLDOWN_STORE_PATH": str(tmp_path / f"store-{i}.duckdb")},
        )  # fmt: skip
        for i in range(2)
    ]
    ends = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert 0 in codes, ends
    for code, (_, stderr) in zip(codes, ends, strict=True):
        if code != 0:
            assert code == 2 and f"another run is writing into {out}" in stderr, stderr
    complete(out)


def test_a_rerun_into_the_products_own_folder_replaces_its_report(events, tmp_path):
    out = tmp_path / "out"
    assert cli(events, out).returncode == 0
    first = complete(out)
    (out / "hypotheses" / "h99.log").write_text("from an earlier run\n", encoding="utf-8")
    again = cli(events, out)
    assert again.returncode == 0, again.stderr
    assert complete(out)["change"] == first["change"]
    assert not (out / "hypotheses" / "h99.log").exists()
    assert sorted(out.rglob("*.tmp")) == []
