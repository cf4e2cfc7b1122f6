"""Installing the project prints no warning of the build backend (pip runs it offline here from
the configured package index, as `make install` does), and `make demo` prints the answer and
where the report is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT


def test_installing_prints_no_build_warning(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--dry-run", "--quiet", "-e", str(ROOT)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr


def test_the_demo_prints_the_answer_and_the_report_only(tmp_path):
    """(The Makefile's demo recipe is checked in tests/drilldown/test_cli.py.)"""
    venv = Path(sys.executable).parent.parent
    env = {**os.environ, "DRILLDOWN_STORE_PATH": str(tmp_path / "memory.duckdb")}
    demo = subprocess.run(
        [str(venv / "bin" / "drilldown"), "demo", "--out", str(tmp_path / "demo")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert len(demo.stdout.splitlines()) <= 8, demo.stdout
    assert "report.md" in demo.stdout and "Warning" not in demo.stderr, demo.stderr
