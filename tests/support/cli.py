"""The command line run as a user runs it (a subprocess from the repository root), and the
digest that shows a file was left untouched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def drilldown(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    return subprocess.run(
        [sys.executable, "-m", "drilldown.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def tool(db: Path, name: str, args: dict | str) -> tuple[int, dict]:
    raw = args if isinstance(args, str) else json.dumps(args)
    proc = drilldown("tool", name, "--db", str(db), "--args", raw)
    return proc.returncode, json.loads(proc.stdout)
