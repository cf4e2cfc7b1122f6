"""The documentation stays true: the quickstart commands exist and CI runs the test command,
every tool is listed, result.json's reference matches its models, every link lands, and every
shell command of README.md and docs/*.md runs (in a copy of the project, right after the
quickstart, offline) or is listed below with the reason it cannot run here."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks import docs as result_docs
from tasks.engine.result import Explanation
from tasks.tools import TOOLS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("sh", "shell", "bash", "console")

# Commands run as written, except where the value says how (and the comment why).
RUNNABLE: dict[str, str | None] = {
    # The project's venv is the one running these tests: `make demo` must not reinstall it.
    "make demo": "make -o install demo",
    ".venv/bin/drilldown investigate data/demo/events.csv --metric 'sum(revenue)' --baseline "
    "2024-03-18:2024-03-24 --comparison 2024-03-25:2024-03-31 --out my-report": None,
    ".venv/bin/drilldown tool metric_compare_periods --db drilldown-demo/data.duckdb --args '{ "
    '"table": "events", "metric": {"agg": "sum", "column": "revenue"}, "time_column": "date", '
    '"baseline": {"start": "2024-03-18", "end": "2024-03-24"}, "comparison": {"start": '
    '"2024-03-25", "end": "2024-03-31"}, "group_by": ["platform", "users.plan"]}\'': None,
    ".venv/bin/drilldown load data/demo --db my.duckdb": None,
    ".venv/bin/drilldown tools": None,
    ".venv/bin/drilldown tools --json --db my.duckdb": None,
    "echo '{\"table\": \"users\", \"n\": 3, \"seed\": 1}' | .venv/bin/drilldown tool sample "
    "--db my.duckdb --args -": None,
    ".venv/bin/drilldown postgres-role --table events --table users": None,
    'URL=$(.venv/bin/python -m benchmarks.pg_source start "$PWD/pg-demo" data/demo)': None,
    '.venv/bin/drilldown investigate "$URL" --table events --metric \'sum(revenue)\' '
    "--time-column date --baseline 2024-03-18:2024-03-24 --comparison 2024-03-25:2024-03-31 "
    "--offline --out pg-report": None,
    '.venv/bin/python -m benchmarks.pg_source stop "$PWD/pg-demo"': None,
    ".venv/bin/python -m tasks.docs": None,
    ".venv/bin/drilldown investigate data/demo --table events --metric revenue --baseline "
    "2024-03-18:2024-03-24 --comparison 2024-03-25:2024-03-31 --dimensions platform,app_version "
    "--filter country=US --offline --out us-report": None,
    '.venv/bin/drilldown history "ios app release revenue fell"': None,
}

_PREFECT_SERVER = "needs a Prefect server and a worker left running (tests/flows run the flows "
_PREFECT_SERVER += "and deployments on a real server)"
NOT_RUNNABLE: dict[str, str] = {
    "make test": "is this test suite itself",
    ".venv/bin/drilldown sync": "needs a Supabase store (SUPABASE_DB_URL); tests/store run sync "
    "against a real Postgres",
    "claude mcp add drilldown -- /abs/path/.venv/bin/drilldown mcp --db "
    "/abs/path/drilldown-demo/data.duckdb": "needs Claude Code; tests/drilldown test the server",
    "claude mcp add drilldown -- /abs/path/.venv/bin/drilldown mcp --db "
    "/abs/path/data.duckdb": "needs Claude Code; tests/drilldown test the server",
    "ANTHROPIC_API_KEY=sk-ant-... .venv/bin/drilldown investigate data/demo --metric revenue "
    "--baseline 2024-03-18:2024-03-24 --comparison 2024-03-25:2024-03-31 --out claude-report":
        "needs a Claude key (tests/agent run the same loop on a fake of Claude's HTTP API)",
    ".venv/bin/prefect profile create local": "changes the user's Prefect profiles",
    ".venv/bin/prefect -p local config set PREFECT_API_URL=http://127.0.0.1:4200/api "
    "PREFECT_SERVER_ANALYTICS_ENABLED=false": "changes the user's Prefect profiles",
    ".venv/bin/prefect -p local server start": "a server that runs until stopped",
    ".venv/bin/prefect profile use local": "changes the user's Prefect profiles",
    ".venv/bin/prefect work-pool create local-process --type process": _PREFECT_SERVER,
    "DRILLDOWN_PROJECT_DIR=$PWD .venv/bin/prefect --no-prompt deploy --all": _PREFECT_SERVER,
    ".venv/bin/prefect worker start --pool local-process": _PREFECT_SERVER,
    ".venv/bin/prefect deployment run investigate/default --watch": _PREFECT_SERVER,
    ".venv/bin/prefect flow-run ls --flow-name weekly-review --state-type SCHEDULED":
        _PREFECT_SERVER,
    ".venv/bin/prefect deployment run weekly-review/weekly --watch": _PREFECT_SERVER,
}  # fmt: skip


def fences(text: str) -> list[tuple[str, str]]:
    """Each fenced code block as (language, body), the body dedented to its fence."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        i += 1
        if not opening:
            continue
        indent, body = opening.group(1), []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        blocks.append((opening.group(2), "\n".join(body)))
    return blocks


def commands(block: str) -> list[str]:
    """The block's commands as written: continuation lines and multi-line quotes joined."""
    found, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        found.append(pending)
        pending = ""
    assert not pending, f"unfinished command: {pending}"
    return found


def key(command: str) -> str:
    """A command as this file lists it: comments cut, continuations and spacing flattened."""
    text = re.sub(r"(?m)\s{2,}#.*$", "", command).replace("\\\n", " ")
    return " ".join(text.split())


def shell_commands() -> list[tuple[Path, list[str]]]:
    """Each shell block of README.md and docs/*.md, in reading order, as its commands."""
    return [
        (doc, commands(body))
        for doc in DOCS
        for lang, body in fences(doc.read_text())
        if lang in SHELL
    ]


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


def test_the_readme_is_an_overview_not_a_manual():
    assert len(README.splitlines()) <= 250


def test_every_code_block_says_its_language():
    """A block without a language could hide a shell command from the checks below."""
    bare = [doc.name for doc in DOCS for lang, _ in fences(doc.read_text()) if not lang]
    assert not bare, f"code blocks without a language (sh, text, json, ...) in {bare}"


def test_every_shell_command_is_run_or_excused():
    """A new command must be run below or listed with the reason it cannot run here."""
    found = {key(c) for _, block in shell_commands() for c in block}
    assert not set(RUNNABLE) & set(NOT_RUNNABLE)
    unlisted = sorted(found - set(RUNNABLE) - set(NOT_RUNNABLE))
    assert not unlisted, "add to RUNNABLE or NOT_RUNNABLE (with the reason):\n" + "\n".join(
        unlisted
    )
    gone = sorted((set(RUNNABLE) | set(NOT_RUNNABLE)) - found)
    assert not gone, "no longer in the docs, drop from this file:\n" + "\n".join(gone)


def _project_copy(tmp_path: Path) -> Path:
    """The project as a fresh clone has it, using this test run's installed environment."""
    venv = Path(sys.prefix)
    assert (venv / "bin" / "drilldown").exists(), f"no drilldown in {venv}: run make install-test"
    skip = shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*.egg-info", "drilldown-*", "*.duckdb", ".pytest_cache"
    )
    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=skip)
    (project / ".venv").symlink_to(venv)
    return project


def _offline_env(tmp_path: Path) -> dict[str, str]:
    """No key, no server, no team store, a home of its own: what a first-time reader has."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "PREFECT_", "SUPABASE_", "DRILLDOWN_", "VOYAGE_"))
    }
    home = tmp_path / "home"
    home.mkdir()
    return {**env, "HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


@pytest.mark.slow  # the quickstart and every documented command, in a copy of the project
def test_shell_commands_run_after_the_quickstart(tmp_path):
    """Each shell block's runnable commands, as one script per block in reading order, from the
    project folder right after `make demo`: what a reader following the docs would type."""
    project, env = _project_copy(tmp_path), _offline_env(tmp_path)
    printed = {}
    try:
        for doc, block in shell_commands():
            runnable = [c for c in block if key(c) in RUNNABLE]
            script = "\n".join(RUNNABLE[key(c)] or c for c in runnable)
            if not script:
                continue
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert done.returncode == 0, f"{doc.name}:\n{script}\n{done.stdout}\n{done.stderr}"
            printed[key(block[0])] = done.stdout + done.stderr
    finally:
        if (project / "pg-demo").exists():
            stop = ["stop", str(project / "pg-demo")]
            subprocess.run(
                [".venv/bin/python", "-m", "benchmarks.pg_source", *stop],
                cwd=project, env=env, capture_output=True, timeout=120,
            )  # fmt: skip
    for out in ("drilldown-demo", "my-report", "us-report", "pg-report"):
        assert (project / out / "result.json").is_file(), out
    shown = next(body for lang, body in fences(README) if lang == "text")  # what make demo prints
    missing = [ln for ln in shown.splitlines() if ln.strip() and ln not in printed["make demo"]]
    assert not missing, f"the README shows lines `make demo` no longer prints: {missing}"


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    """Every model reachable from ``model``'s fields."""
    seen.add(model)
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            t = stack.pop()
            stack.extend(typing.get_args(t))
            if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                _models(t, seen)
    return seen


def test_result_json_reference_is_generated_and_up_to_date():
    """docs/result-json.md is what `python -m tasks.docs` writes from the models today."""
    committed = result_docs.TARGET.read_text() if result_docs.TARGET.exists() else ""
    assert committed == result_docs.render(), "docs/result-json.md is out of date: run " + (
        "python -m tasks.docs"
    )


def test_result_json_reference_covers_every_model_and_field():
    """A new nested model gets a section; a new field gets a meaning."""
    documented = {model for _, model, _ in result_docs.SECTIONS}
    assert _models(Explanation, set()) <= documented
    silent = [
        f"{model.__name__}.{name}"
        for model in documented
        for name, field in model.model_fields.items()
        if not result_docs.meaning(model, name, field)
    ]
    assert not silent, f"fields without a meaning: {silent}"


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_lands(doc: Path):
    """Relative links point at files that exist, and at headings those files have."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists() or (anchor and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_test_a_doc_names_exists(doc: Path):
    """A defence "held by" a test names one that is there: ``tests/x.py::name``, or
    ``::name`` for another test of the file named last."""
    text, module, missing = doc.read_text(encoding="utf-8"), None, []
    for m in re.finditer(r"`(tests/[\w/]+\.py)?::(\w+)", text):
        module = m.group(1) or module
        assert module, f"{doc.name}: ::{m.group(2)} follows no test file"
        source = (ROOT / module).read_text(encoding="utf-8")
        if not re.search(rf"^\s*(?:async )?def {m.group(2)}\(", source, re.M):
            missing.append(f"{module}::{m.group(2)}")
    assert not missing, f"{doc.name} names tests that are not there: {missing}"
