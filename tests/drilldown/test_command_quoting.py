"""The report's re-run commands run the tool they name and nothing else, whatever the names hold.

A database file, table, column, segment value, filter value or period label holding shell
metacharacters (backticks, ``$(...)``, ``;``, ``&``, ``|``, quotes, a newline, a leading dash,
...) is copied from report.md as a reader would copy it (the text of its fenced block, as a
CommonMark renderer shows it) and run by a real ``bash``: it exits 0 with the numbers the
report claims, and no payload inside a name runs (a canary file never appears).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import duckdb
import pytest
from markdown_it import MarkdownIt

from tasks.report.command import shell_word, tool_command
from tasks.report.render import _md_fence
from tests.drilldown.test_printed_commands import BIN, without_venv_path
from tests.support.cli import ROOT

CANARY = "PWNED"
PAYLOADS = (
    f"`touch {CANARY}`",
    f"$(touch {CANARY})",
    f"; touch {CANARY} #",
    f"& touch {CANARY} &",
    f"| touch {CANARY}",
    f"> {CANARY}",
    f"< /dev/null; touch {CANARY}",
    f"'; touch {CANARY}; echo '",
    f'"; touch {CANARY}; echo "',
    f"\\'; touch {CANARY}; #",
    f"\n touch {CANARY}\n",
    f"```\ntouch {CANARY}\n```",
    "-rf *",
    "? * [a-z] ~ {a,b}",
    "!! !-1 # comment",
    "été 数据 🚀",
    "tab\there",
    "\u200bzero\u202ewidth\x1b[2J",
    f"$'\\x41'$(touch {CANARY})",
)


def canaries(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob(CANARY)]  # the file a payload makes


@pytest.mark.parametrize("word", PAYLOADS + ("", "plain", "a b", "'", "\\", "`"))
def test_a_quoted_word_reads_back_as_itself_in_bash(tmp_path, word):
    command = "printf '%s\\0' " + shell_word(word)
    ran = subprocess.run(["bash", "-c", command], capture_output=True, cwd=tmp_path, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == word.encode() + b"\0"
    assert not canaries(tmp_path)
    assert all(ch.isprintable() for ch in command), command  # the command shows what it passes


@pytest.mark.parametrize("word", PAYLOADS)
def test_a_command_copied_from_its_fenced_block_is_the_command(tmp_path, word):
    """The fence is longer than any run of backticks: a renderer's code block holds the
    command exactly, and the command, run, passes the word."""
    command = tool_command("metric_describe", str(tmp_path / f"{word}.duckdb"), "{}")
    block = _md_fence(command)
    fences = [t for t in MarkdownIt("commonmark").parse(block) if t.type == "fence"]
    assert [t.content for t in fences] == [command + "\n"]


def hostile(seed: int) -> dict[str, str]:
    """Names and values for one investigation, each holding shell metacharacters."""
    rng = random.Random(seed)
    pick = rng.sample(PAYLOADS, len(PAYLOADS))

    def name(i: int, stem: str) -> str:
        return f"{stem}{pick[i % len(pick)]}".replace("\x00", "")

    return {
        "file": (name(0, "-db ") + PAYLOADS[0]).replace("/", "_") + ".duckdb",
        "table": name(1, "sales "),
        "period": name(2, "period "),
        "dimension": name(3, "region ").replace(",", ";"),  # --dimensions splits at commas
        "other": name(4, "source ").replace(",", ";"),
        "value": name(5, "north "),
        "filtered": name(6, "channel "),
        "keep": name(7, "web "),
        # a label is read as one line, its spaces collapsed: no layout characters in it
        "before": " ".join(name(8, "2023 ").split()),
        "after": " ".join(name(9, "2024 ").split()),
    }


def build(path: Path, n: dict[str, str], seed: int) -> None:
    """Rows per period label, dimension and other dimension; the cell (n.value, src1) moves."""
    rng = random.Random(seed)
    regions = [n["value"], "south", "east", "west"]
    sources = ["src0", "src1", "src2", "src3"]
    rows = []
    for label in (n["before"], n["after"]):
        for r in regions:
            for s in sources:
                for channel in (n["keep"], "store"):
                    for _ in range(8):
                        v = 1000 * (1 + rng.gauss(0, 0.02))
                        if label == n["after"] and (r, s) == (n["value"], "src1"):
                            v *= 2.5
                        rows.append((label, r, s, channel, round(v, 1)))

    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    with duckdb.connect(str(path)) as con:
        cols = ", ".join(
            f"{q(n[k])} VARCHAR" for k in ("period", "dimension", "other", "filtered")
        )
        con.execute(f"CREATE TABLE {q(n['table'])} ({cols}, value DOUBLE)")
        con.executemany(f"INSERT INTO {q(n['table'])} VALUES (?, ?, ?, ?, ?)", rows)


def quoted(text: str) -> str:
    """A value or column as the CLI's filter syntax reads any text: double-quoted."""
    return '"' + text.replace('"', '""') + '"'


def copied_commands(report: str) -> list[str]:
    """The report's command blocks (fenced, no language), as a Markdown renderer shows them."""
    tokens = MarkdownIt("commonmark").parse(report)
    return [t.content.rstrip("\n") for t in tokens if t.type == "fence" and not t.info]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hostile_names_rerun_from_the_report_in_bash(tmp_path, seed):
    n = hostile(seed)
    home = tmp_path / "data"
    home.mkdir()
    db = home / n["file"]
    build(db, n, seed)
    out = tmp_path / "report"
    env = {**without_venv_path(), "DRILLDOWN_STORE_PATH": str(tmp_path / "memory.duckdb")}
    argv = [
        str(BIN / "drilldown"), "investigate", str(db), "--table", n["table"],
        "--metric", "sum(value)", "--period-column", n["period"],
        "--baseline", n["before"], "--comparison", n["after"],
        "--filter", f"{quoted(n['filtered'])} = {quoted(n['keep'])}",
        "--dimensions", f"{n['dimension']},{n['other']}", "--offline", "--out", str(out),
    ]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    claimed = [(s["baseline"], s["comparison"]) for s in result["root_causes"] + result["movers"]]
    commands = copied_commands((out / "report.md").read_text(encoding="utf-8"))
    assert commands and len(commands) <= len(claimed), commands
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in commands:
        ran = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, cwd=elsewhere, env=env,
            timeout=300,
        )  # fmt: skip
        assert ran.returncode == 0, f"{command}\n{ran.stderr}"
        got = json.loads(ran.stdout)
        assert "error" not in got, got
        total = (got["total"]["baseline"], got["total"]["comparison"])
        assert any(total == pytest.approx(c) for c in claimed), (total, claimed)
    assert not canaries(tmp_path, ROOT), canaries(tmp_path, ROOT)
    assert not os.path.exists(Path.home() / CANARY)
