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


def test_make_demo_prints_the_answer_and_the_report_only(tmp_path):
    venv = Path(sys.executable).parent.parent
    plan = subprocess.run(
        ["make", "-n", "demo", f"VENV={venv}"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert plan.returncode == 0, plan.stderr
    runs = [line for line in plan.stdout.splitlines() if "/drilldown " in line]
    assert len(runs) == 1 and " demo " in f"{runs[0]} ", runs
    env = {**os.environ, "DRILLDOWN_STORE_PATH": str(tmp_path / "memory.duckdb")}
    demo = subprocess.run(
        [str(venv / "bin" / "drilldown"), "demo", "--out", str(tmp_path / "demo")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert len(demo.stdout.splitlines()) <= 8, demo.stdout
    assert "report.md" in demo.stdout and "Warning" not in demo.stderr, demo.stderr
