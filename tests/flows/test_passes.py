"""Passes over the user's tables: how many times one offline investigation reads each source
table, counted by the product (``stats.passes`` in result.json, ``passes`` in the run's summary)
and, on real Postgres 16, by the database itself (``pg_stat_user_tables.seq_scan``).

The planted scenario ``pricing_join`` has two tables (``events``, joined many-to-one to
``users``), loaded by the real loader; the Postgres copy has no index, so every read of a table
is a sequential scan. The budgets are the passes the product makes today: a change that reads the
source more often fails here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tasks.investigation import investigation
from tasks.request import Request
from tasks.ingest.load import load_files
from tests.engine.test_scenarios import SCENARIOS, expected_of
from tests.flows.test_postgres_source import _question
from tests.support.pg_source import copy_tables, reader_role

# Slow end to end (flow runs counting their passes over the source):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

SCENARIO = "pricing_join"
TABLES = {"events", "users"}
ENGINE_PASSES = {"events": 2, "users": 2}
"""Most passes the engine's step makes over each table: the question's check (which counts the
coverage and non-NULL values the data-quality checks read too) and the one aggregation to cells,
which also counts the rows loaded twice (a hash of every row of ``events``; docs/deploy.md,
"Passes over the source"). Its root causes are checked on the cells."""
OPEN_SCANS = {"events": 1, "users": 1}
"""Most sequential scans of each table opening data in Postgres makes: one statement per table
measures its profile, its fingerprint and what the join key's checks need (whether the key's
values are all different, and its distinct values, whose containment is then counted without
reading either table again)."""
NO_PASSES = ("hypotheses", "verify", "report")
"""Steps that read no source table: the hypotheses' tool calls, the gate's re-run of each cited
call, the last check of the findings and the report's per-day numbers are answered from the
cells (docs/deploy.md, "Passes over the source")."""
POSTGRES_SCANS = {"events": 3, "users": 3}
"""Most sequential scans of each table one offline investigation of data in Postgres makes, every
step included: the opening (one statement per table: profile, fingerprint and the join key's
check) and the engine (the question's check; the one aggregation, which counts the rows loaded
twice too); the hypotheses and the report read none. At most three passes per table."""


@pytest.fixture(scope="module")
def scenario_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("passes") / "data.duckdb"
    files = sorted(p for p in (SCENARIOS / SCENARIO).iterdir() if p.name != "expected.json")
    load_files(files, db)
    return db


def _investigate(data: str, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's summary and its result.json."""
    summary = investigation(Request(data=[data], out=str(out), **_question(expected_of(SCENARIO))))
    return summary, json.loads((out / "result.json").read_text())


def test_result_json_reports_the_passes_per_source_table(scenario_db, tmp_path):
    summary, result = _investigate(str(scenario_db), tmp_path / "out")
    passes = result["stats"]["passes"]
    assert set(passes["tables"]) == TABLES
    # the hypotheses, the last check of the findings and the report read the cells
    assert set(passes["steps"]) == {"open", "engine"}
    for step in passes["steps"].values():  # the steps add up to the tables' totals
        assert set(step) <= TABLES
    assert {
        t: sum(s.get(t, 0) for s in passes["steps"].values()) for t in TABLES
    } == passes["tables"]
    # result.json is written by the report step: it holds every step's passes but the report's
    everything = summary["passes"]
    assert not set(everything["steps"]) & set(NO_PASSES), everything["steps"]
    assert {k: v for k, v in everything["steps"].items() if k != "report"} == passes["steps"]
    engine = passes["steps"]["engine"]
    assert all(engine[t] <= ENGINE_PASSES[t] for t in TABLES), engine


def _seq_scans(uri: str) -> dict[str, int]:
    """Each table's sequential scans since the statistics were reset, once every connection of
    the product has ended (a backend hands its counts over as it exits)."""
    name = conninfo_to_dict(uri)["dbname"]
    with psycopg.connect(uri, autocommit=True) as c:
        for _ in range(600):
            left = c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND application_name = 'drilldown'",
                [name],
            ).fetchone()
            if left == (0,):
                break
            time.sleep(0.05)
        c.execute("SELECT pg_stat_clear_snapshot()")
        rows = c.execute("SELECT relname, seq_scan FROM pg_stat_user_tables").fetchall()
    return {t: int(n) for t, n in rows if n}


def test_postgres_scans_each_table_as_often_as_the_ledger_says(
    scenario_db, pg_database, tmp_path
):
    uri = pg_database()
    copy_tables(scenario_db, uri)
    url = reader_role(uri)
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("ANALYZE")
        c.execute("SELECT pg_stat_reset()")
    summary, _ = _investigate(url, tmp_path / "out")
    scans = _seq_scans(uri)
    assert scans == summary["passes"]["tables"]
    assert not set(summary["passes"]["steps"]) & set(NO_PASSES), summary["passes"]["steps"]
    assert all(scans[t] <= POSTGRES_SCANS[t] for t in TABLES), scans
    opening = summary["passes"]["steps"]["open"]
    assert all(opening[t] <= OPEN_SCANS[t] for t in TABLES), opening
