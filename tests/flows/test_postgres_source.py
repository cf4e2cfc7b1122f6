"""The investigate flow on data that stays in Postgres: ``data=["postgresql://..."]``.

Each planted scenario (data/scenarios) is loaded by the real loader into DuckDB, its rows copied
with their types into Postgres, and investigated both ways by the real composition
(:func:`tasks.investigation.investigation`, offline planner): the same root causes with the same
numbers, and the evidence SQL that result.json holds re-runs on Postgres to its numbers. Then the
edges: a cached answer never outlives a change of rows, the password shows up nowhere, and the
command line refuses a role that may write with one line and nothing written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tasks.investigation import investigation
from tasks.request import Request
from sql_tools import parse_postgres_url
from tasks.ingest.load import load_files
from tasks.ingest.postgres import open_context
from tasks.run import Run
from tests.engine.test_scenarios import NAMES, SCENARIOS, expected_of, segment_set
from tests.support import cell_calls
from tests.support.pg_source import copy_tables, create_database, drop_database, reader_role
from tests.support.pg_source import differences as compare

# Slow end to end (every planted scenario investigated on a real Postgres and on DuckDB):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
DEMO_QUESTION = dict(
    metric="sum(revenue)",
    table="events",
    time_column="date",
    baseline="2024-03-18:2024-03-24",
    comparison="2024-03-25:2024-03-31",
)
SECRET = "Tr0ub4dor-and-3"
# what differs by nature between the two runs: SQL text, timings and the passes (data in
# Postgres is profiled where it is, a DuckDB file by its loader)
NOT_COMPARED = frozenset({"sql", "elapsed_ms", "query_ms", "screen_ms", "cube_ms", "passes"})
REL = 1e-9


def differences(a: Any, b: Any) -> list[str]:
    """Where two result.json differ (floats to ``REL``), SQL text and timings aside."""
    return compare(a, b, skip=NOT_COMPARED, rel=REL)


def _question(exp: dict[str, Any]) -> dict[str, Any]:
    return dict(
        metric=exp["metric"],
        table=exp.get("table"),
        time_column=exp["time_column"],
        baseline=exp["baseline"],
        comparison=exp["comparison"],
        grain=exp.get("grain"),
        dimensions=exp.get("dimensions"),
        offline=True,
        remember=False,
    )


@pytest.fixture(scope="module", params=NAMES)
def both_ways(request, pg_server, tmp_path_factory):
    """(expected, DuckDB result.json, Postgres result.json, reader URL) of one scenario."""
    name = request.param
    exp = expected_of(name)
    root = tmp_path_factory.mktemp(f"pg-{name}")
    files = sorted(p for p in (SCENARIOS / name).iterdir() if p.name != "expected.json")
    duck = root / "data.duckdb"
    load_files(files, duck)
    uri = create_database(pg_server.admin_uri())
    copy_tables(duck, uri)
    url = reader_role(uri)
    results = {}
    for label, data in (("duckdb", str(duck)), ("postgres", url)):
        out = root / label
        investigation(Request(data=[data], out=str(out), **_question(exp)))
        results[label] = json.loads((out / "result.json").read_text())
    yield exp, results["duckdb"], results["postgres"], url
    drop_database(pg_server.admin_uri(), uri)


def test_same_root_causes_and_numbers_as_duckdb(both_ways):
    exp, duck, pg, _ = both_ways
    assert segment_set(pg["root_causes"]) == segment_set(duck["root_causes"])
    if not exp["data_quality"] and exp["significant"]:
        assert segment_set(pg["root_causes"]) == segment_set(exp["root_causes"])
    assert differences(duck, pg) == []


def _rerun(url: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The SQL and JSON parameters from result.json, run as they are with psycopg."""
    info = parse_postgres_url(url).conninfo
    with psycopg.connect(**info) as con:
        return con.execute(sql, params).fetchall()


def _metric(result: dict[str, Any], which: str, n: float, d: float) -> float | None:
    """A segment's metric from its query's ``n`` and ``d`` (``evidence.result.formula``)."""
    if result["metric"]["kind"] == "ratio":
        return n / d if d else None
    if result["metric"]["grain"] == "day":
        return n / result[which]["days"]
    return n


def test_evidence_sql_reruns_on_postgres_to_its_numbers(both_ways):
    _, _, pg, url = both_ways
    checked = 0
    # root causes carry the numbers their query gave; drivers the search's (exact unless the
    # metric counts distinct values, which the search sums over finer segments)
    segments = [(s, s["evidence"]["result"]) for s in pg["root_causes"]]
    if pg["metric"]["kind"] != "distinct":
        segments += [(s, s) for s in [*pg["drivers"], *pg.get("offsetting", [])]]
    for seg, claimed in segments:
        ev = seg["evidence"]
        rows = {
            int(p): (float(n or 0), float(d or 0))
            for p, n, d in _rerun(url, ev["sql"], ev["params"])
        }
        for p, which in ((0, "baseline"), (1, "comparison")):
            value = _metric(pg, which, *rows.get(p, (0.0, 0.0)))
            if claimed[which] is None:
                assert value is None, (seg["segment"], which)
            else:
                assert value == pytest.approx(claimed[which], rel=1e-9, abs=1e-9), (
                    seg["segment"],
                    which,
                )
            checked += 1
    for issue in pg["data_quality"]:
        ev = issue.get("evidence")
        if ev and ev.get("sql"):
            assert _rerun(url, ev["sql"], ev["params"]) is not None  # runs as it is recorded
    assert checked == 2 * len(segments)


def test_tool_calls_from_the_cells_are_what_their_sql_gives_on_postgres(both_ways):
    """The hypotheses' calls, the gate's re-run of a cited call and the report's per-day
    numbers, on a run of data in Postgres: read from the cells, no scan of a table, and what
    their SQL gives on Postgres (a context of its own, without cells)."""
    exp, _, pg, url = both_ways
    if pg["metric"]["kind"] == "distinct":
        pytest.skip("a distinct count is not a sum of cells: its calls read the source")
    with Run(url, cell_calls.qargs(exp["scenario"])) as run, open_context(url) as source:
        cell_calls.answered_from_cells(run, source, cell_calls.planner_calls(run))
        cell_calls.charts_from_cells(run, source)
        if run.analysis.explanation.root_causes:
            cell_calls.gate_from_cells(run, source)


# --- caching, secrets and the command line, on the demo data -----------------------------------


@pytest.fixture(scope="module")
def demo_duckdb(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("demo-pg") / "demo.duckdb"
    load_files([DEMO / "events.csv", DEMO / "users.csv"], db)
    return db


@pytest.fixture
def demo_pg(pg_database, demo_duckdb) -> str:
    """The demo tables in a fresh Postgres database of this test's own: its superuser URI."""
    uri = pg_database()
    copy_tables(demo_duckdb, uri)
    return uri


def _with_password(url: str, password: str = SECRET) -> str:
    user, rest = url.split("://", 1)[1].split("@", 1)
    return f"postgresql://{user}:{password}@{rest}"


def _demo_qargs() -> dict[str, Any]:
    return {**DEMO_QUESTION, "filters": []}


def _revenue_up(uri: str) -> None:
    """Change rows but not their count: the comparison week's US revenue doubles."""
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute(
            "UPDATE events SET revenue = revenue * 2 "
            "WHERE country = 'US' AND date >= DATE '2024-03-25'"
        )


def test_run_identity_leaves_out_the_password_and_follows_the_rows(demo_pg):
    url = _with_password(reader_role(demo_pg))
    with Run(url, _demo_qargs()) as run:
        first = run.identity()
        assert SECRET not in json.dumps(first) and SECRET not in run.db and SECRET not in repr(run)
        assert first["db"].startswith("postgresql://") and "@" not in first["db"]
        assert first["db"].endswith("schema=public")
    with Run(_with_password(url, "another"), _demo_qargs()) as run:  # same place, same rows
        assert run.identity() == first
    _revenue_up(demo_pg)
    with Run(url, _demo_qargs()) as run:
        changed = run.identity()
    assert changed["db"] == first["db"] and changed["data"] != first["data"]


def test_a_prefect_cache_hit_never_outlives_a_change_of_rows(prefect_harness, demo_pg, tmp_path):
    from flows.investigate import investigate
    from tests.flows.test_flow import _task_states

    url = reader_role(demo_pg)

    def run(name: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
        out = tmp_path / name
        request = Request(data=[url], **DEMO_QUESTION, out=str(out), offline=True,
                          remember=False)  # fmt: skip
        state = investigate(request, return_state=True)
        assert state.is_completed(), state.message
        result = json.loads((out / "result.json").read_text())
        return result, _task_states(state.state_details.flow_run_id)

    first, states = run("first")
    assert states["decompose"] == ["Completed"]
    again, states = run("again")
    assert states["decompose"] == ["Cached"] and again["comparison"] == first["comparison"]
    _revenue_up(demo_pg)
    changed, states = run("changed")
    assert states["decompose"] == ["Completed"]
    assert changed["comparison"]["value"] > first["comparison"]["value"]


def test_the_password_appears_nowhere(demo_pg, tmp_path, capfd):
    url = _with_password(reader_role(demo_pg))  # the test server trusts it; it is still secret
    out = tmp_path / "out"
    summary = investigation(Request(data=[url], **DEMO_QUESTION, out=str(out), offline=True))
    assert summary["root_causes"] == [{"platform": "ios", "app_version": "5.2"}]
    assert SECRET not in json.dumps(summary) and "postgresql://" in summary["db"]
    written = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"result.json", "report.md", "report.html"}
    store = Path(os.environ["DRILLDOWN_STORE_PATH"])
    for path in [*written, store]:
        assert SECRET.encode() not in path.read_bytes(), path
    report = (out / "report.md").read_text()
    assert "drilldown tool metric_compare_periods --db 'postgresql://" in report
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err


def _cli(url: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drilldown.cli", "investigate", url,
         *[f"--{k.replace('_', '-')}={v}" for k, v in DEMO_QUESTION.items()],
         "--offline", "--no-remember", "--out", str(out), *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
    )  # fmt: skip


def test_cli_investigates_postgres_and_its_tool_command_reruns(demo_pg, tmp_path):
    from tests.support.pg_source import as_role, password_role

    role = password_role(demo_pg, SECRET, ["events", "users"])
    url = _with_password(as_role(demo_pg, role))
    out = tmp_path / "out"
    proc = _cli(url, out)
    assert proc.returncode == 0, proc.stderr
    assert "root cause: platform=ios, app_version=5.2" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr
    # the report's command re-runs the numbers: the URL it shows, the password from PGPASSWORD
    report = (out / "report.md").read_text()
    # (``drilldown`` may be printed as the path of the environment's script)
    command = next(ln for ln in report.splitlines() if ln.partition(" ")[0].endswith("drilldown"))
    tool = subprocess.run(
        f"{sys.executable} -m drilldown.cli {command.partition(' ')[2]}",
        shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PGPASSWORD": SECRET},
    )  # fmt: skip
    assert tool.returncode == 0, tool.stdout + tool.stderr
    rows = json.loads(tool.stdout)["rows"]
    assert [(r["baseline"], r["comparison"]) for r in rows] == [
        pytest.approx((2906.94, 700.15), rel=1e-6)
    ]


@pytest.mark.parametrize("grant", ["INSERT", "UPDATE", "TRUNCATE"])
def test_cli_refuses_a_role_that_may_write_in_one_line_writing_nothing(demo_pg, tmp_path, grant):
    url = reader_role(demo_pg)
    role = parse_postgres_url(url).conninfo["user"]
    with psycopg.connect(demo_pg, autocommit=True) as c:
        c.execute(f'GRANT {grant} ON events TO "{role}"')
    out = tmp_path / "out"
    proc = _cli(_with_password(url), out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "refusing to read as role" in lines[0] and "'events'" in lines[0]
    assert SECRET not in proc.stdout + proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"postgresql://ana:{SECRET}@127.0.0.1:1/shop?connect_timeout=3", "cannot connect to"),
        ("{reader}&tables=events,nope", "no table 'nope'"),
    ],
    ids=["unreachable", "missing table"],
)
def test_cli_connection_errors_are_one_line_without_the_password(demo_pg, tmp_path, url, expected):
    url = url.replace("{reader}", _with_password(reader_role(demo_pg)))
    out = tmp_path / "out"
    proc = _cli(url, out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert not out.exists()


def test_prefect_parameters_never_hold_the_password(monkeypatch):
    from drilldown.cli import _password_apart

    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = f"postgresql://ana:{SECRET}@db.example:5432/shop?sslmode=require&schema=s"
    assert _password_apart(url) == "postgresql://ana@db.example:5432/shop?sslmode=require&schema=s"
    assert os.environ["PGPASSWORD"] == SECRET
    assert _password_apart("data/demo/events.csv") == "data/demo/events.csv"


def test_postgres_role_prints_a_select_only_role(tmp_path):
    from tests.support.cli import drilldown

    proc = drilldown("postgres-role", "--table", "events", "--table", "users", "--role", "ro")
    assert proc.returncode == 0, proc.stderr
    assert 'CREATE ROLE "ro" LOGIN NOSUPERUSER NOBYPASSRLS' in proc.stdout
    assert 'GRANT SELECT ON TABLE "public"."events", "public"."users" TO "ro";' in proc.stdout
    assert "INSERT" not in proc.stdout and "ALL PRIVILEGES" not in proc.stdout


def test_commands_that_read_duckdb_files_only_never_echo_a_url():
    from tests.support.cli import drilldown

    proc = drilldown("mcp", "--db", f"postgresql://ana:{SECRET}@127.0.0.1:1/shop")
    assert proc.returncode != 0
    assert "reads DuckDB files only" in proc.stderr and SECRET not in proc.stderr + proc.stdout
