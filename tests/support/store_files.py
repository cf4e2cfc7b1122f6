"""Memory-store files in the states a disk leaves them in: cut short, overwritten, never a
database, a damaged write-ahead log; a store on a read-only mount; a process whose files may not
grow past a size (a full disk, as ``write()`` meets it)."""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.cli import ROOT


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def junk(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes(random.Random(40).randbytes(size))


def text(path: Path) -> None:
    path.write_text("date,revenue\n2024-03-18,100\n" * 500, encoding="utf-8")


def damaged_log(path: Path) -> None:
    """A store whose last writes are only in its write-ahead log, the log's entries overwritten
    after its header."""
    pending_log(path, rows=200)
    wal = path.with_name(path.name + ".wal")
    data = wal.read_bytes()
    wal.write_bytes(data[:64] + random.Random(40).randbytes(len(data) - 64))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "cut in half": cut_in_half,
    "zero bytes": emptied,
    "random bytes": junk,
    "a text file": text,
    "a damaged write-ahead log": damaged_log,
}


def pending_log(path: Path, rows: int) -> None:
    """Leave ``rows`` rows of 200 characters in the store's write-ahead log, not yet in its
    file: the process ends before DuckDB checkpoints (as a killed process would)."""
    script = (
        "import os, sys\n"
        "from tasks.store import DuckDBStore\n"
        "store = DuckDBStore(sys.argv[1])\n"
        "store._con.execute(\"set checkpoint_threshold = '1GB'\")\n"
        "store._con.execute(f\"create table padding as select i, repeat('x', 200) || i as v "
        "from range({int(sys.argv[2])}) t(i)\")\n"
        "os._exit(0)\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(path), str(rows)], cwd=ROOT, check=True, timeout=120
    )


FILE_SIZE_LIMIT = (
    "import resource, signal, sys\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "sys.argv = ['drilldown', *sys.argv[2:]]\n"
    "from drilldown.cli import main\n"
    "main()\n"
)
"""``python -c FILE_SIZE_LIMIT BYTES ARGS...``: the command line, in a process whose files may
not grow past BYTES (``write()`` fails with EFBIG, as on a full disk: not with a signal)."""


def file_size_limit(limit: int) -> list[str]:
    return [sys.executable, "-c", FILE_SIZE_LIMIT, str(limit)]


def _user_namespaces() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = [unshare, "--user", "--map-root-user", "--mount", "true"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


_MOUNT_READ_ONLY = (
    'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'
)


@contextmanager
def read_only(folder: Path) -> Iterator[list[str]]:
    """The argv prefix that runs a command with ``folder`` read-only: mounted read-only in a
    mount namespace of its own where the system allows one (root included), else its files
    and itself without write permission (which root ignores: then the test is skipped)."""
    if _user_namespaces():
        unshare = shutil.which("unshare")
        yield [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", _MOUNT_READ_ONLY,
               "sh", str(folder)]  # fmt: skip
        return
    if os.geteuid() == 0:
        pytest.skip("root writes past file modes and no mount namespace can be made here")
    modes = {p: p.stat().st_mode for p in (folder, *folder.iterdir())}
    for p in modes:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        yield []
    finally:
        for p, mode in modes.items():
            p.chmod(stat.S_IMODE(mode))
