"""`drilldown investigate` and `drilldown history` on a memory store the disk left damaged, on a
read-only mount, or that may not grow (a full disk): one line on standard error naming the file
and the fix, no traceback, and the investigation's report kept in --out. Each case runs the
command line as a user does, in a subprocess, on a small table; the store is in the test's own
folder."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.support.cli import ROOT
from tests.support.store_files import DAMAGE, file_size_limit, pending_log, read_only

pytestmark = pytest.mark.slow

QUESTION = ["--metric", "sum(revenue)", "--baseline", "2024-03-18:2024-03-24",
            "--comparison", "2024-03-25:2024-03-31", "--offline"]  # fmt: skip


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A loaded table: 28 days x 3 platforms, iOS revenue falls in the last week."""
    from tasks.ingest.load import load_files

    lines = ["date,platform,country,revenue"]
    for i in range(28):
        day = date(2024, 3, 4) + timedelta(days=i)
        for k, platform in enumerate(("ios", "android", "web")):
            revenue = 100 + 7 * k + i % 5 - (40 if platform == "ios" and i >= 21 else 0)
            lines.append(f"{day},{platform},{'US' if (i + k) % 2 else 'GB'},{revenue}")
    root = tmp_path_factory.mktemp("events")
    (root / "events.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_files([root / "events.csv"], root / "events.duckdb")
    return root / "events.duckdb"


@pytest.fixture(scope="module")
def remembered(events: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one investigation of ``events``, made by the command line."""
    store = tmp_path_factory.mktemp("remembered") / "store.duckdb"
    out = store.parent / "out"
    proc = run(store, "investigate", str(events), *QUESTION, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return store


def run(
    store: Path, *args: str, prefix: list[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command line with its memory store at ``store``; ``prefix`` runs it under a limit
    or a read-only mount."""
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DRILLDOWN_STORE": "duckdb",
           "DRILLDOWN_STORE_PATH": str(store), **(env or {})}  # fmt: skip
    env.pop("PREFECT_API_URL", None)
    argv = prefix or [sys.executable, "-m", "drilldown.cli"]
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )  # fmt: skip


def the_error(proc: subprocess.CompletedProcess[str], code: int, *named: Path) -> str:
    """The one line of standard error naming the file(s), after checking the exit code."""
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    naming = [line for line in proc.stderr.splitlines() if str(named[0]) in line]
    assert len(naming) == 1, proc.stderr
    line = naming[0]
    assert line.startswith("error: "), line
    assert all(str(p) in line for p in named), line
    assert "remembered as" not in proc.stderr, proc.stderr
    return line


def kept(out: Path) -> None:
    for name in ("report.md", "result.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name


def a_store_like(remembered: Path, tmp_path: Path) -> Path:
    store = tmp_path / "memory" / "store.duckdb"
    store.parent.mkdir()
    store.write_bytes(remembered.read_bytes())
    return store


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_store_keeps_the_report_and_names_the_file(
    events, remembered, tmp_path, damage
):
    store = a_store_like(remembered, tmp_path)
    DAMAGE[damage](store)
    out = tmp_path / "out"
    proc = run(store, "investigate", str(events), *QUESTION, "--out", str(out))
    line = the_error(proc, 2, store, out)
    assert "not remembered" in line and "aside" in line and "DRILLDOWN_STORE_PATH" in line, line
    kept(out)

    proc = run(store, "history", "revenue fell on iOS")
    line = the_error(proc, 2, store)
    assert "no past investigations read" in line and "aside" in line, line
    assert proc.stdout == ""


def test_a_read_only_store_is_read_and_the_report_kept(events, remembered, tmp_path):
    store = a_store_like(remembered, tmp_path)
    before = store.read_bytes()
    with read_only(store.parent) as prefix:
        cli = [*prefix, sys.executable, "-m", "drilldown.cli"]
        proc = run(store, "history", "revenue fell on iOS", prefix=cli)
        assert proc.returncode == 0, proc.stderr
        assert "(run inv-" in proc.stdout and proc.stderr == "", proc.stdout + proc.stderr

        out = tmp_path / "out"
        proc = run(store, "investigate", str(events), *QUESTION, "--out", str(out), prefix=cli)
    line = the_error(proc, 1, store, out)
    assert "not remembered" in line and "writable" in line, line
    assert "past investigations unavailable" not in proc.stderr, proc.stderr  # recalled
    kept(out)
    assert store.read_bytes() == before


def test_a_store_that_cannot_grow_keeps_the_report_and_names_the_file(events, tmp_path):
    """Files may not grow past 1 MB (a full disk, as ``write()`` meets it): the report's files
    are smaller, the store's write-ahead log already larger."""
    store = tmp_path / "memory" / "store.duckdb"
    pending_log(store, rows=8000)  # about 1.7 MB
    out = tmp_path / "out"
    limited = file_size_limit(1_000_000)
    proc = run(store, "investigate", str(events), *QUESTION, "--out", str(out), prefix=limited)
    line = the_error(proc, 1, store, out)
    assert "File too large" in line and "not remembered" in line, line
    kept(out)


def test_an_output_folder_that_cannot_grow_is_named(events, tmp_path):
    out = tmp_path / "out"
    store = tmp_path / "memory" / "store.duckdb"
    limited = file_size_limit(20_000)  # less than the report's own files
    proc = run(store, "investigate", str(events), *QUESTION, "--out", str(out), prefix=limited)
    line = the_error(proc, 1, out)
    assert "File too large" in line and "--out" in line, line
    assert not store.exists(), "the store was written"


def test_an_investigation_kept_locally_in_an_outage_is_not_called_remembered(events, tmp_path):
    """The team's store is unreachable: the investigation is kept in the local store for
    `drilldown sync`, and the command says so, never "remembered"."""
    from tests.store.test_supabase import closed_port_dsn

    store = tmp_path / "memory" / "store.duckdb"
    out = tmp_path / "out"
    env = {"DRILLDOWN_STORE": "supabase", "SUPABASE_DB_URL": closed_port_dsn()}
    proc = run(store, "investigate", str(events), *QUESTION, "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "remembered" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("kept locally as inv-")]
    assert line.endswith("; `drilldown sync` sends it"), line
    kept(out)
    assert store.exists()
