"""Installing the project prints no warning of the build backend (pip runs it offline here from
the configured package index, as `make install` does)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.cli import ROOT


def test_installing_prints_no_build_warning(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--dry-run", "--quiet", "-e", str(ROOT)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
