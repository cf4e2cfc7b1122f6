"""The engine on tables read in place in Postgres answers as on the same rows in DuckDB, for the
question shapes the planted scenarios leave out: period labels, averages, row counts with a
filter on a timestamp column, distinct counts over whole periods, ratios by label, the screening
pass, and the duplicate-rows check when it samples rows by their hash."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sql_tools import ToolContext
from sql_tools.passes import HeldAnswers
from tasks.engine import cube as cube_mod
from tasks.engine import leaf_days as leaf_days_mod
from tasks.engine.explain import analyze
from tasks.engine.quality import duplicates
from tasks.ingest.load import load_files
from tasks.ingest.postgres import open_postgres
from tasks.run import question_of
from tests.support.pg_source import (
    copy_tables,
    create_database,
    differences,
    drop_database,
    reader_role,
)

# Slow end to end (the engine on a real Postgres against DuckDB):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

NOT_COMPARED = frozenset({"sql", "elapsed_ms", "query_ms", "screen_ms", "cube_ms"})
DAYS = [f"2024-04-{d:02d}" for d in range(1, 15)]


def _events(duplicate_day: str | None = None) -> str:
    """Two weeks of events; in week 2, iOS in the US buys 40% less. ``duplicate_day``'s rows
    are loaded twice."""
    rng = np.random.default_rng(5)
    lines = ["ts,day,week,platform,country,plan,user_id,revenue,sessions,purchases"]
    for i, day in enumerate(DAYS):
        week = "w1" if i < 7 else "w2"
        day_rows = []
        for _ in range(120):
            platform = str(rng.choice(["ios", "android", "web"]))
            country = str(rng.choice(["US", "DE", "BR"]))
            plan = str(rng.choice(["free", "pro"]))
            hit = week == "w2" and platform == "ios" and country == "US"
            sessions = int(rng.integers(1, 6))
            purchases = int(rng.binomial(sessions, 0.12 if hit else 0.3))
            revenue = round(float(rng.gamma(2.0, 10.0)) * (0.3 if hit else 1.0), 2)
            ts = f"{day} {int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 60)):02d}:00"
            user = int(rng.integers(1, 400))
            day_rows.append(
                f"{ts},{day},{week},{platform},{country},{plan},{user},{revenue},{sessions},"
                f"{purchases}"
            )
        lines += day_rows * (2 if day == duplicate_day else 1)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def both(pg_server, tmp_path_factory):
    """(DuckDB file, reader URL) of the same events, twice: as generated, and with a day loaded
    twice."""
    made = []
    out = {}
    for name, dup in (("events", None), ("doubled", "2024-04-10")):
        root = tmp_path_factory.mktemp(name)
        (root / "events.csv").write_text(_events(dup))
        load_files([root / "events.csv"], root / "data.duckdb")
        uri = create_database(pg_server.admin_uri())
        made.append(uri)
        copy_tables(root / "data.duckdb", uri)
        out[name] = (root / "data.duckdb", reader_role(uri))
    yield out
    for uri in made:
        drop_database(pg_server.admin_uri(), uri)


def _explained(location: Path | str, qargs: dict[str, Any]) -> dict[str, Any]:
    opened = open_postgres(location) if isinstance(location, str) else ToolContext(location)
    with opened as ctx:
        q = question_of(ctx, {"filters": [], **qargs})
        return analyze(ctx, q).explanation.model_dump(mode="json")


DATES = {"time_column": "day", "baseline": "2024-04-01:2024-04-07",
         "comparison": "2024-04-08:2024-04-14"}  # fmt: skip
LABELS = {"period_column": "week", "baseline": "w1", "comparison": "w2"}
QUESTIONS = {
    "sum by labels": {"metric": "sum(revenue)", **LABELS},
    "average": {"metric": "avg(revenue)", **DATES},
    "rows on a timestamp, filtered": {
        "metric": "count(*)",
        **DATES,
        "time_column": "ts",
        "filters": ["plan=pro"],
    },
    "distinct over the period": {"metric": "count(distinct user_id)", **DATES},
    "ratio by labels": {"metric": "sum(purchases) / sum(sessions)", **LABELS},
}


@pytest.mark.parametrize("name", QUESTIONS)
def test_engine_answers_as_on_duckdb(both, name):
    duck, url = both["events"]
    qargs = {"table": "events", **QUESTIONS[name]}
    on_duck, on_pg = _explained(duck, qargs), _explained(url, qargs)
    assert differences(on_duck, on_pg, skip=NOT_COMPARED) == []
    if name == "sum by labels":
        assert [c["segment"] for c in on_pg["root_causes"]] == [
            {"platform": "ios", "country": "US"}
        ]


def test_screening_pass_answers_as_on_duckdb(both, monkeypatch):
    duck, url = both["events"]
    monkeypatch.setattr(cube_mod, "LEAF_BUDGET", 6)  # too many leaves: screen the columns first
    qargs = {"table": "events", "metric": "sum(revenue)", **DATES}
    on_duck, on_pg = _explained(duck, qargs), _explained(url, qargs)
    assert on_pg["stats"].get("screening"), on_pg["stats"]
    assert differences(on_duck, on_pg, skip=NOT_COMPARED) == []


def test_duplicate_rows_found_when_rows_are_sampled_by_hash(both, monkeypatch):
    duck, url = both["doubled"]
    monkeypatch.setattr(duplicates, "DUPLICATE_EXACT_MAX_ROWS", 400)  # sample 1 row in 8
    qargs = {"table": "events", "metric": "sum(revenue)", **DATES}
    found = {}
    for label, where in (("duckdb", duck), ("postgres", url)):
        issues = _explained(where, qargs)["data_quality"]
        found[label] = [i["details"].get("days") for i in issues if i["kind"] == "duplicate_rows"]
    # the hash differs between the databases, so the sampled rows do; the day found does not
    assert found["postgres"] == found["duckdb"] and found["postgres"], found


def test_a_failing_check_on_postgres_stops_the_question_before_the_search(both, monkeypatch):
    """Postgres runs the data-quality checks on the question's own connection, once the source
    is aggregated (the checks read the cells): their error is the answer at once, before the
    cube and the search."""
    from sql_tools import ToolInputError
    from tasks.engine import explain as explain_mod
    from tasks.engine import quality

    searched = []

    def broken(ctx, question, dimensions, cells=None):
        raise ToolInputError("the checks could not run", code="invalid_arguments")

    def leaves(*args, **kwargs):
        searched.append(True)
        return 0

    monkeypatch.setattr(quality, "check_quality", broken)
    monkeypatch.setattr(explain_mod, "build_cube", leaves)
    _, url = both["events"]
    with pytest.raises(ToolInputError, match="the checks could not run"):
        _explained(url, {"table": "events", "metric": "sum(revenue)", **DATES})
    assert searched == []


# 400: sample 1 row in 8 by its hash; 10: 1 in 512, days with no row in the sample
@pytest.mark.parametrize("exact_max", [None, 400, 10])
@pytest.mark.parametrize("shape", ["dates", "labels", "timestamp, filtered"])
def test_the_one_aggregation_counts_the_rows_loaded_twice(both, monkeypatch, shape, exact_max):
    """Once the question's check has counted the periods' rows, the one aggregation to cells
    also counts what the duplicates check counts (one pass less). What it holds for the check is
    what the check's own SQL gives on the source, on DuckDB and on Postgres; the check finds
    the same day with or without it; and its SQL is the check's own."""
    if exact_max is not None:
        monkeypatch.setattr(duplicates, "DUPLICATE_EXACT_MAX_ROWS", exact_max)
    qargs = {
        "dates": {"metric": "sum(revenue)", **DATES},
        "labels": {"metric": "sum(revenue)", **LABELS},
        "timestamp, filtered": {
            "metric": "count(*)", **DATES, "time_column": "ts", "filters": ["plan=pro"]
        },
    }[shape]
    held: list[Any] = []
    hold = HeldAnswers.hold

    def keep(self: HeldAnswers, out: Any) -> None:
        if out.columns[:1] == ["unit"]:
            held.append(out)
        hold(self, out)

    monkeypatch.setattr(HeldAnswers, "hold", keep)
    held_ahead = leaf_days_mod.held_ahead
    for where in both["doubled"]:
        found, passes = [], []
        for merged in (True, False):
            if not merged:
                monkeypatch.setattr(leaf_days_mod, "held_ahead", lambda *args: None)
            held.clear()
            opened = open_postgres(where) if isinstance(where, str) else ToolContext(where)
            with opened as ctx:
                q = question_of(ctx, {"table": "events", **qargs})
                with ctx.passes.during("engine"):
                    e = analyze(ctx, q).explanation
                passes.append(ctx.passes.by_step()["engine"]["events"])
                issues = [i for i in e.data_quality if i.kind == "duplicate_rows"]
                found.append([(i.details, i.evidence.sql, i.evidence.params) for i in issues])
                if merged:
                    (out,) = held
                    rerun = ctx.run(out.sql, out.params, max_rows=100)
                    assert [tuple(_plain(x) for x in r) for r in rerun.rows] == out.rows
                else:
                    assert held == []
        monkeypatch.setattr(leaf_days_mod, "held_ahead", held_ahead)
        assert found[0] == found[1], where
        if shape != "timestamp, filtered" and exact_max != 10:
            assert found[0], where  # the doubled day is found
        assert passes[0] == passes[1] - 1, (where, passes)


def _plain(x: Any) -> Any:
    """A count as the held answer gives it (Postgres sums integers as NUMERIC)."""
    return int(x) if isinstance(x, Decimal) else x
