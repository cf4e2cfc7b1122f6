"""The README stays true: its quickstart commands exist, CI runs its test command, every tool is listed."""

from __future__ import annotations

import re
from pathlib import Path

from tasks.tools import TOOLS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_quickstart_targets_exist_and_ci_runs_the_test_command():
    block = README.split("## Quickstart", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nmake test\n" in ci


def test_every_tool_is_in_the_readme_table():
    rows = dict(re.findall(r"^\| `(metric_\w+)` \| (.+?) \|$", README, re.M))
    assert set(rows) == {t.name for t in TOOLS}
    assert all(len(desc.strip()) > 20 for desc in rows.values())
