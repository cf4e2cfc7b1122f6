"""Every command the demo's report prints runs as printed from the repository root, right after
`make demo`: the virtual environment is not on PATH then, so a bare ``drilldown`` would be
"command not found"."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT

BIN = Path(sys.executable).parent


def without_venv_path() -> dict[str, str]:
    """The environment of a shell where the virtual environment was never activated."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    keep = [d for d in dirs if d and Path(d).resolve() != BIN.resolve()]
    return {**os.environ, "PATH": os.pathsep.join(keep), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def test_the_demo_reports_commands_run_as_printed(tmp_path):
    env = {**without_venv_path(), "DRILLDOWN_STORE_PATH": str(tmp_path / "memory.duckdb")}
    out = tmp_path / "demo"
    demo = subprocess.run(
        [str(BIN / "drilldown"), "demo", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Check it yourself", 1)[1]
    commands = re.findall(r"^```\n(.+?)\n```", section, re.M)
    assert commands, section[:500]
    for command in commands:
        ran = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
        )
        assert ran.returncode == 0, f"{command[:80]}...\n{ran.stderr}"
        assert "error" not in json.loads(ran.stdout), ran.stdout[:500]
