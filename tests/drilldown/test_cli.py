"""The drilldown command line, run as a user runs it (a subprocess), on the bundled demo data."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import ROOT, drilldown, file_digest, tool

DEMO = ROOT / "data" / "demo"
LAST_WEEK = {"start": "2024-03-25", "end": "2024-03-31"}
WEEK_BEFORE = {"start": "2024-03-18", "end": "2024-03-24"}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("cli") / "demo.duckdb"
    proc = drilldown("load", str(DEMO), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "loaded    events: 14,853 rows, 8 columns" in proc.stdout
    assert "loaded    users: 800 rows, 4 columns" in proc.stdout
    assert "skipped" in proc.stdout and "generate.py" in proc.stdout
    return db


def test_compare_periods_finds_the_planted_segment(demo_db):
    code, out = tool(
        demo_db,
        "metric_compare_periods",
        {
            "table": "events",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "date",
            "baseline": WEEK_BEFORE,
            "comparison": LAST_WEEK,
            "group_by": ["platform", "app_version"],
        },
    )
    assert code == 0
    assert out["total"]["relative_delta"] == pytest.approx(-0.2155, abs=0.001)
    top = out["rows"][0]
    assert (top["platform"], top["app_version"]) == ("ios", "5.2")
    assert top["relative_delta"] < -0.7 and top["share_of_delta"] > 0.7


def test_compare_periods_through_the_join(demo_db):
    code, out = tool(
        demo_db,
        "metric_compare_periods",
        {
            "table": "events",
            "metric": {"agg": "count_distinct", "column": "user_id"},
            "time_column": "date",
            "baseline": WEEK_BEFORE,
            "comparison": LAST_WEEK,
            "group_by": ["users.plan"],
        },
    )
    assert code == 0
    assert {r["users.plan"] for r in out["rows"]} == {"free", "plus", "pro"}
    assert out["additive"] is False
    code, out = tool(
        demo_db,
        "metric_aggregate",
        {
            "table": "events",
            "measures": [{"agg": "sum", "column": "revenue"}],
            "group_by": ["users.plan"],
            "filters": [{"column": "platform", "op": "=", "value": "ios"}],
        },
    )
    assert code == 0 and out["matched_count"] == 3


def test_short_tool_names_resolve(demo_db):
    """`drilldown tool compare_periods` is `metric_compare_periods`; unknown names still list the valid ones."""
    args = {
        "table": "events",
        "metric": {"agg": "sum", "column": "revenue"},
        "time_column": "date",
        "baseline": WEEK_BEFORE,
        "comparison": LAST_WEEK,
        "group_by": ["users.plan"],
    }
    code, short_out = tool(demo_db, "compare_periods", args)
    _, long_out = tool(demo_db, "metric_compare_periods", args)
    assert code == 0
    strip = lambda o: {k: v for k, v in o.items() if k != "elapsed_ms"}  # noqa: E731
    assert strip(short_out) == strip(long_out)
    code, out = tool(demo_db, "describe", {})
    assert code == 0 and {t["name"] for t in out["tables"]} == {"events", "users"}
    code, out = tool(demo_db, "compare", args)
    assert code == 2 and out["error"]["code"] == "unknown_tool"


def test_describe_reports_the_join_key(demo_db):
    code, out = tool(demo_db, "metric_describe", {})
    assert code == 0
    assert [(k["from_table"], k["from_column"], k["to_table"]) for k in out["join_keys"]] == [
        ("events", "user_id", "users")
    ]


@pytest.mark.parametrize(
    ("name", "args", "error_code"),
    [
        (
            "metric_aggregate",
            {
                "table": "events",
                "measures": [{"agg": "sum", "column": "revenue"}],
                "group_by": ["platform\"; COPY events TO '/tmp/pwn.csv'; --"],
            },
            "unknown_column",
        ),
        ("metric_sample", {"table": "read_csv('/etc/passwd')"}, "unknown_table"),
        ("metric_sample", {"table": "events", "sql": "DROP TABLE events"}, "invalid_arguments"),
        ("execute_sql", {"query": "DROP TABLE events"}, "unknown_tool"),
        ("metric_sample", "{not json", "invalid_arguments"),
        ("metric_sample", "[1, 2]", "invalid_arguments"),
    ],
)
def test_hostile_or_bad_arguments_exit_2_with_json_error(demo_db, name, args, error_code):
    before = file_digest(demo_db)
    code, out = tool(demo_db, name, args)
    assert code == 2
    assert out["error"]["code"] == error_code
    assert file_digest(demo_db) == before
    assert not Path("/tmp/pwn.csv").exists()


@pytest.mark.parametrize(
    "args",
    [
        "[" * 3000 + "]" * 3000,
        '{"a": ' * 3000 + "1" + "}" * 3000,
    ],
    ids=["arrays", "objects"],
)
def test_deeply_nested_arguments_are_refused_in_one_line(demo_db, args):
    """3,000 levels of nesting (30 KB) once ended in a RecursionError traceback and exit 1."""
    before = file_digest(demo_db)
    proc = drilldown("tool", "describe", "--db", str(demo_db), "--args", args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "invalid_arguments"
    assert error["message"] == (
        "arguments are nested too deeply (3,000 levels); at most 32 levels allowed"
    )
    assert file_digest(demo_db) == before


def test_args_from_stdin(demo_db):
    proc = drilldown(
        "tool",
        "metric_sample",
        "--db",
        str(demo_db),
        "--args",
        "-",
        stdin='{"table": "users", "n": 2}',
    )
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["rows"]) == 2


def test_missing_database_is_a_one_line_error(tmp_path):
    code, out = tool(tmp_path / "nope.duckdb", "metric_describe", {})
    assert code == 1 and out["error"]["code"] == "database_error"
    assert not (tmp_path / "nope.duckdb").exists()


def test_load_error_is_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "ragged.csv"
    bad.write_text("a,b\n1,2\n3,4,5\n")
    db = tmp_path / "x.duckdb"
    proc = drilldown("load", str(bad), "--db", str(db))
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "line 3" in lines[0]
    assert not db.exists()


def test_tools_lists_and_exports_definitions(demo_db):
    proc = drilldown("tools")
    assert proc.returncode == 0 and "metric_compare_periods" in proc.stdout
    proc = drilldown("tools", "--json", "--db", str(demo_db))
    defs = json.loads(proc.stdout)
    assert defs[1]["input_schema"]["properties"]["table"]["enum"] == ["events", "users"]
    assert defs[0]["input_schema"]["properties"]["table"]["anyOf"][0]["enum"] == ["events", "users"]


def test_make_demo_commands_run_as_written(tmp_path):
    """Every drilldown command `make demo` would run succeeds, with the arguments exactly as quoted."""
    import shlex
    import shutil

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    plan = subprocess.run(
        ["make", "-n", "demo"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    commands = [shlex.split(line) for line in plan.stdout.splitlines() if "bin/drilldown " in line]
    assert [c[1:3] for c in commands] == [["demo", "--out"]]  # the answer, not a page of JSON
    out = tmp_path / "drilldown-demo"
    for argv in commands:
        argv = [
            str(out) if a == "drilldown-demo" else a.replace("drilldown-demo/", f"{out}/")
            for a in argv
        ]
        proc = drilldown(*argv[1:])
        assert proc.returncode == 0, f"{shlex.join(argv)}\n{proc.stdout}\n{proc.stderr}"
    result = json.loads((out / "result.json").read_text())
    assert [c["segment"] for c in result["root_causes"]] == [
        {"platform": "ios", "app_version": "5.2"}
    ]
    assert "platform = ios, app\\_version = 5.2" in (out / "report.md").read_text()


def test_output_longer_than_a_pipe_arrives_whole(demo_db):
    """The process ends as soon as a command is done: what it printed still reaches the reader
    in full, and its exit status is the command's."""
    args = json.dumps({"table": "events", "n": 1000, "seed": 7})
    proc = drilldown("tool", "metric_sample", "--db", str(demo_db), "--args", args)
    assert proc.returncode == 0 and len(proc.stdout) > 65536  # more than a pipe holds
    out = json.loads(proc.stdout)  # the whole document, up to its last brace
    assert len(out["rows"]) > 100 and out["rows"][-1]["date"]
    proc = drilldown("tool", "metric_sample", "--db", str(demo_db), "--args", '{"table": "nope"}')
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["code"]


def test_an_in_process_investigation_never_imports_prefect(tmp_path):
    """``drilldown investigate`` without ``--prefect`` and without ``PREFECT_API_URL`` runs every
    step in-process, through to the memory store, and never loads Prefect (its import alone
    costs most of a second); on local files with the DuckDB store it loads no Postgres driver
    and no HTTP client either."""
    import os
    import sys

    out = tmp_path / "out"
    args = [
        "investigate", str(DEMO / "events.csv"), str(DEMO / "users.csv"), "--table", "events",
        "--metric", "sum(revenue)", "--time-column", "date", "--baseline", "2024-03-18:2024-03-24",
        "--comparison", "2024-03-25:2024-03-31", "--offline", "--out", str(out),
    ]  # fmt: skip
    script = (
        "import json, sys\n"
        "from drilldown.cli import app\n"
        f"app({args!r}, standalone_mode=False)\n"
        "tops = {m.split('.')[0] for m in sys.modules}\n"
        "print(json.dumps(sorted(tops & {'prefect', 'psycopg', 'httpx'})))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "ANTHROPIC_API_KEY")}
    env["DRILLDOWN_STORE_PATH"] = str(tmp_path / "memory.duckdb")
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [], "Prefect, psycopg or httpx was imported"
    assert "remembered as inv-" in proc.stderr
    result = json.loads((out / "result.json").read_text())
    assert [c["segment"] for c in result["root_causes"]] == [
        {"platform": "ios", "app_version": "5.2"}
    ]
