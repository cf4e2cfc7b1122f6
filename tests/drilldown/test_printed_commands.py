"""Every command a report prints runs as printed, from any folder, right after `make demo`: the
virtual environment is not on PATH then, so a bare ``drilldown`` would be "command not found",
and a path relative to the repository would not be found from elsewhere."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in commands:
        for cwd in (ROOT, elsewhere):
            ran = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, cwd=cwd, env=env,
                timeout=300,
            )  # fmt: skip
            assert ran.returncode == 0, f"{command[:80]}...\n{ran.stderr}"
            assert "error" not in json.loads(ran.stdout), ran.stdout[:500]


def _labelled(seed: int) -> tuple[str, str, str, tuple[str, int]]:
    """Rows per period label (whole years, or decimal versions such as ``4.25``), source and
    region, with little noise; one (source, region) moves by a random factor from the
    comparison's label on. Returns the CSV text, the baseline and comparison labels (as text)
    and the moved cell."""
    rng = random.Random(seed)
    if rng.random() < 0.5:
        labels = [str(y) for y in range(rng.randint(1995, 2005), 2012)]
    else:
        labels = [f"{v / 4:.2f}" for v in range(rng.randint(4, 12), 30, rng.randint(1, 3))]
    sources = [f"src{i}" for i in range(rng.randint(4, 6))]
    regions = list(range(rng.randint(3, 5)))  # numbered: a number column among the dimensions
    cell = (rng.choice(sources), rng.choice(regions))
    factor = rng.choice([0.3, 0.5, 1.8, 2.5])
    baseline, comparison = sorted(rng.sample(labels, 2), key=float)
    rows = {(s, g): rng.randint(6, 12) for s in sources for g in regions}
    lines = ["period,source,region,value"]
    for label in labels:
        moved = float(label) >= float(comparison)
        for s in sources:
            for g in regions:
                for _ in range(rows[(s, g)]):
                    v = 1000 * (1 + rng.gauss(0, 0.02))
                    v *= factor if moved and (s, g) == cell else 1.0
                    lines.append(f"{label},{s},{g},{v:.1f}")
    return "\n".join(lines) + "\n", baseline, comparison, cell


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numeric_period_labels_are_investigated_and_their_commands_run_anywhere(tmp_path, seed):
    """Period labels of a number column, given as text on the command line: every hypothesis's
    tool calls bind them as numbers (no type errors, no inconclusive verdict for it), the planted
    cell is confirmed, and the printed commands give its numbers from another folder."""
    text, baseline, comparison, (source, region) = _labelled(seed)
    data, out = tmp_path / "energy.csv", tmp_path / "report"
    data.write_text(text, encoding="utf-8")
    env = {**without_venv_path(), "DRILLDOWN_STORE_PATH": str(tmp_path / "memory.duckdb")}
    argv = [
        str(BIN / "drilldown"), "investigate", str(data), "--metric", "sum(value)",
        "--period-column", "period", "--baseline", baseline, "--comparison", comparison,
        "--offline", "--out", str(out),
    ]  # fmt: skip
    # from the repository, as after `make demo`: the script is inside the working folder
    run = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    for h in result["hypotheses"]:
        for e in h["evidence"]:
            assert "error" not in (e.get("result") or {}), (h["title"], e["result"])
        assert h["status"] in ("confirmed", "ruled_out"), (h["title"], h["summary"])
    planted = {"source": source, "region": region}
    causes = [rc for rc in result["root_causes"] if rc["segment"] == planted]
    assert causes, [rc["segment"] for rc in result["root_causes"]]
    confirmed = [h for h in result["hypotheses"] if h["segment"] == planted]
    assert [h["status"] for h in confirmed] == ["confirmed"], confirmed
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Check it yourself", 1)[1]
    commands = re.findall(r"^```\n(.+?)\n```", section, re.M)
    assert len(commands) == len(result["root_causes"]), section[:500]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command, rc in zip(commands, result["root_causes"], strict=True):
        ran = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, cwd=elsewhere, env=env,
            timeout=300,
        )  # fmt: skip
        assert ran.returncode == 0, f"{command[:80]}...\n{ran.stderr}"
        out = json.loads(ran.stdout)
        assert "error" not in out, out
        assert out["total"]["baseline"] == pytest.approx(rc["baseline"])
        assert out["total"]["comparison"] == pytest.approx(rc["comparison"])
