"""Planted-cause scenarios (data/scenarios): `drilldown investigate` must find what was planted.

Each folder under data/scenarios holds generated data and an ``expected.json`` naming the cause that
the generator planted (see data/scenarios/README.md). The CLI runs as a user runs it (a subprocess,
offline) and its ``result.json`` is checked against the plant: significance, exactly the planted
root-cause segments with their effects, a global shift for even growth, a missing-days finding for
an ingestion gap, and a report that names the cause.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.report_tables import SEGMENT_SECTIONS, md_tables, named_twice, one_precision

# Slow end to end (every planted scenario investigated and checked against its expected answer):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "data" / "scenarios"
NAMES = sorted(p.parent.name for p in SCENARIOS.glob("*/expected.json"))
# the script that writes each scenario folder
GENERATORS = {
    "generate.py": [
        "growth",
        "missing_day",
        "mix_shift",
        "pricing_join",
        "pure_noise",
        "release_loss",
        "two_causes",
    ],
    "pattern_tied_columns.py": ["tied_columns"],
    "pattern_small_events.py": ["binary_events", "flat_many", "uneven_drop"],
    "pattern_segment_outage.py": ["segment_outage"],
    "pattern_event_rows.py": ["event_rows"],
    "pattern_mix_channel.py": ["mix_channel"],
}


def expected_of(name: str) -> dict:
    return json.loads((SCENARIOS / name / "expected.json").read_text())


def segment_set(causes: list[dict]) -> set[frozenset]:
    """Segments as comparable sets: {column: value} -> frozenset of (column, str(value))."""
    return {frozenset((k, str(v)) for k, v in c["segment"].items()) for c in causes}


def mentions(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as a whole word (``pro`` not in ``product``; ``8.3`` not in
    ``8.35``), case-insensitively."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?!\w)", text, re.I) is not None


@pytest.fixture(scope="module", params=NAMES)
def investigated(request, tmp_path_factory) -> tuple[dict, dict, Path]:
    """(expected, result.json, output folder) of one `drilldown investigate` run per scenario."""
    name = request.param
    exp = expected_of(name)
    out = tmp_path_factory.mktemp(f"investigate-{name}")
    args = [
        "investigate",
        f"data/scenarios/{name}",
        "--metric",
        exp["metric"],
        "--time-column",
        exp["time_column"],
        "--baseline",
        exp["baseline"],
        "--comparison",
        exp["comparison"],
        "--offline",
        "--out",
        str(out),
    ]
    if exp.get("grain"):
        args += ["--grain", exp["grain"]]
    if exp.get("dimensions"):
        args += ["--dimensions", ",".join(exp["dimensions"])]
    proc = subprocess.run(
        [sys.executable, "-m", "drilldown.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DRILLDOWN_STORE_PATH": str(out / "memory.duckdb"),  # each scenario on its own
        },
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"drilldown {' '.join(args)} exited {proc.returncode}\n"
        f"stdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}"
    )
    result = json.loads((out / "result.json").read_text())
    return exp, result, out


def test_significance_matches_the_plant(investigated):
    exp, result, _ = investigated
    assert result["change"]["significant"] is exp["significant"], (
        f"{exp['scenario']}: planted {exp['story']!r}; engine said significant="
        f"{result['change']['significant']} (p={result['change'].get('p_value')}, "
        f"relative={result['change'].get('relative')})"
    )


def test_root_causes_are_exactly_the_planted_segments(investigated):
    exp, result, _ = investigated
    found = result.get("root_causes") or []
    if exp["data_quality"]:  # the plant is a data problem: a data_quality "cause" is fine
        planted = segment_set(exp["root_causes"])
        found = [
            c for c in found if c.get("effect") != "data_quality" or segment_set([c]) <= planted
        ]
    assert segment_set(found) == segment_set(exp["root_causes"]), (
        f"{exp['scenario']}: planted {[c['segment'] for c in exp['root_causes']]}, "
        f"engine named {[c['segment'] for c in found]}"
    )


def test_effects_match_the_plant(investigated):
    exp, result, _ = investigated
    by_segment = {
        frozenset((k, str(v)) for k, v in c["segment"].items()): c.get("effect")
        for c in result.get("root_causes") or []
    }
    for cause in exp["root_causes"]:
        key = frozenset((k, str(v)) for k, v in cause["segment"].items())
        if cause.get("effect") and key in by_segment:
            assert by_segment[key] == cause["effect"], (exp["scenario"], cause["segment"])


def test_global_shift_only_where_planted(investigated):
    exp, result, _ = investigated
    if exp["global_shift"]:
        assert result.get("global_shift") is not None, f"{exp['scenario']}: no global shift"
        assert not result.get("root_causes"), "an even move is not any one segment's doing"
    elif not exp["significant"]:
        assert result.get("global_shift") is None, f"{exp['scenario']}: noise called a shift"


def test_data_quality_findings(investigated):
    exp, result, _ = investigated
    issues = result.get("data_quality") or []
    kinds = {i["kind"] for i in issues}
    assert set(exp["data_quality"]) <= kinds, (exp["scenario"], sorted(kinds))
    if "missing_days" in exp["data_quality"]:
        text = json.dumps([i for i in issues if i["kind"] == "missing_days"])
        for day in exp["missing_dates"]:
            assert day in text, f"missing_days finding does not name {day}: {text}"
        business = [c for c in result.get("root_causes") or [] if c.get("effect") != "data_quality"]
        assert not business, f"an ingestion gap blamed on {[c['segment'] for c in business]}"
    else:  # no day is missing in these datasets
        assert "missing_days" not in kinds, (exp["scenario"], issues)
    for cause in exp["root_causes"]:
        if cause["effect"] != "data_quality":
            continue
        # the segment's own issue names its missing days, and so does the root cause
        (named,) = [c for c in result["root_causes"] if c["segment"] == cause["segment"]]
        note = named["data_quality"]
        assert note["explained"] and "segment_missing_days" in note["kinds"]
        aside = note["days_set_aside"]["baseline"] + note["days_set_aside"]["comparison"]
        assert aside == exp["missing_dates"], note
        for day in exp["missing_dates"]:
            assert day in note["message"]
        own = [i for i in issues if i["kind"] == "segment_missing_days"]
        assert any(
            i["segment"] == cause["segment"] and day in i["details"]["days"]
            for i in own
            for day in exp["missing_dates"]
        ), own
    if not exp["data_quality"]:  # no defect planted: none is reported
        assert not issues, (exp["scenario"], issues)


def test_report_names_the_cause(investigated):
    exp, _, out = investigated
    report = out / "report.md"
    assert report.is_file(), "no report.md"
    text = report.read_text()
    assert text.strip()
    for cause in exp["root_causes"]:
        for column, value in cause["segment"].items():
            assert mentions(text, str(value)), f"report.md does not name {column}={value}"
    for day in exp["missing_dates"]:
        assert day in text, f"report.md does not name the missing day {day}"
    # a planted data problem is what the report says first, before any business story
    headline = text.split("\n## ", 1)[0]
    planted_data = exp["data_quality"] and exp["significant"]
    assert ("is a data problem first" in headline) is bool(planted_data), headline
    if planted_data:
        assert headline.index("data problem first") < text.index("## Root causes")
        for day in exp["missing_dates"]:
            assert day in headline


def name_set(segment: dict) -> frozenset:
    return frozenset((k, str(v)) for k, v in segment.items())


def test_root_causes_are_named_once_with_their_aliases(investigated):
    """A planted cause on tied columns is named once, with the fewest columns, and its other names
    are listed as aliases; no root cause anywhere carries a shorter or more basic alias."""
    exp, result, _ = investigated
    found = {name_set(c["segment"]): c for c in result.get("root_causes") or []}
    for cause in exp["root_causes"]:
        if "aliases" in cause:
            got = found[name_set(cause["segment"])]["aliases"]
            assert {name_set(a) for a in got} == {name_set(a) for a in cause["aliases"]}, got
    for c in result.get("root_causes") or []:
        rank = len(c["segment"]), sum("." in k for k in c["segment"])
        for a in c["aliases"]:
            assert (len(a), sum("." in k for k in a)) >= rank, (c["segment"], a)


def test_each_list_names_its_rows_once(investigated):
    """Root causes, drivers and offsetting segments: no list holds the same rows twice, under one
    name or two (same numbers and volumes, or one entry another's alias)."""
    _, result, _ = investigated
    for key in ("root_causes", "drivers", "offsetting"):
        entries = result.get(key) or []
        figures = [
            (s["baseline"], s["comparison"], s["baseline_volume"], s["comparison_volume"])
            for s in entries
        ]
        assert len(set(figures)) == len(figures), (key, [s["segment"] for s in entries])
        names = [name_set(s["segment"]) for s in entries]
        assert len(set(names)) == len(names), key
        aliases = {name_set(a) for s in entries for a in s["aliases"]}
        assert not aliases & set(names), (key, [s["segment"] for s in entries])


@pytest.mark.parametrize("investigated", ["tied_columns"], indirect=True)
def test_a_joined_copy_of_a_column_never_names_a_segment(investigated):
    """Where ``country`` and the joined ``users.country`` agree on every row, segments are named
    with ``country``, and the ``users.country`` name is among the aliases."""
    exp, result, _ = investigated
    assert exp["realized"]["tied_rows"]["country = users.country"] == exp["realized"]["rows"]
    reported = [s for k in ("root_causes", "drivers", "offsetting") for s in result.get(k) or []]
    with_country = [s for s in reported if "country" in s["segment"]]
    assert with_country, "no reported segment names a country"
    for s in reported:
        assert "users.country" not in s["segment"], s["segment"]
    for s in with_country:
        joined = {("users.country" if k == "country" else k): v for k, v in s["segment"].items()}
        assert joined in s["aliases"], (s["segment"], s["aliases"])


def test_report_names_each_segment_once_in_one_precision_per_column(investigated):
    _, result, out = investigated
    tables = md_tables((out / "report.md").read_text())
    assert not named_twice(tables), named_twice(tables)
    for title in SEGMENT_SECTIONS:
        rows = tables.get(title, [])
        assert one_precision(rows, (1, 2)) and one_precision(rows, (3,)), (title, rows)
    if result["root_causes"]:
        assert tables["Root causes"], "root causes missing from report.md"


def test_expected_files_are_complete():
    assert NAMES == sorted(n for names in GENERATORS.values() for n in names)
    for name in NAMES:
        exp = expected_of(name)
        assert exp["baseline"] == "2024-03-18:2024-03-24"
        assert exp["comparison"] == "2024-03-25:2024-03-31"
        planted = exp["root_causes"] or exp["global_shift"] or exp["data_quality"]
        assert exp["significant"] is bool(planted)
        assert set(exp["effects"].values()) <= {"rate", "mix", "new", "gone", "data_quality"}
        if name in GENERATORS["pattern_small_events.py"]:  # small event tables by design
            assert 2_000 <= exp["realized"]["rows"] <= 60_000
        else:
            assert 15_000 <= exp["realized"]["rows"] <= 60_000


@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_generator_reproduces_the_committed_files(tmp_path, generator):
    """Each generator writes the committed bytes of its scenarios into ``OUTDIR``. Gzip members
    are compared after decompression: the deflate stream may differ between zlib builds, the
    data may not."""
    proc = subprocess.run(
        [sys.executable, str(SCENARIOS / generator), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    names = GENERATORS[generator]
    committed = sorted(
        p.relative_to(SCENARIOS) for n in names for p in (SCENARIOS / n).iterdir() if p.is_file()
    )
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.glob("*/*") if p.is_file())
    assert fresh == committed
    for rel in committed:
        a, b = (SCENARIOS / rel).read_bytes(), (tmp_path / rel).read_bytes()
        if rel.suffix == ".gz":
            a, b = gzip.decompress(a), gzip.decompress(b)
        assert a == b, f"{rel} differs from a fresh generation"


def rerun(con, result: dict, sql: str, params: dict) -> dict[str, float]:
    """A segment query re-run on a plain connection: the metric per period, by its formula."""
    per = {int(p): (n or 0.0, d or 0.0) for p, n, d in con.execute(sql, params).fetchall()}
    days = 7 if result["metric"]["grain"] == "day" else 1
    out = {}
    for p, which in ((0, "baseline"), (1, "comparison")):
        n, d = per.get(p, (0.0, 0.0))
        out[which] = n / d if result["metric"]["kind"] == "ratio" else n / days
    return out


def test_every_root_cause_reproduces_from_its_recorded_sql(investigated):
    """Re-running a cause's recorded SQL with its parameters gives the numbers the result states."""
    import duckdb

    exp, result, out = investigated
    con = duckdb.connect(str(out / "data.duckdb"), read_only=True)
    try:
        for cause in result["root_causes"]:
            ev = cause["evidence"]
            for which, value in rerun(con, result, ev["sql"], ev["params"]).items():
                assert value == pytest.approx(ev["result"][which], rel=1e-9)
                assert value == pytest.approx(cause[which], rel=1e-9)
    finally:
        con.close()


def test_hypotheses_have_verdicts_and_evidence(investigated):
    """The offline investigation: every hypothesis ends with a verdict resting on recorded tool
    calls, each planted cause is confirmed by an accepted finding, and the ledger is written."""
    exp, result, out = investigated
    hyps = result["hypotheses"]
    assert hyps, "no hypotheses"
    for h in hyps:
        assert h["status"] in ("confirmed", "ruled_out", "inconclusive")
        assert h["evidence"], f"{h['id']} has no evidence"
        for ev in h["evidence"]:
            assert ev["tool"].startswith("metric_") and ev["sql"]
    accepted = [f for f in result["findings"] if f["status"] == "accepted"]
    confirmed = {h["id"] for h in hyps if h["status"] == "confirmed"}
    for cause in exp["root_causes"]:
        want = frozenset((k, str(v)) for k, v in cause["segment"].items())
        match = [
            f for f in accepted if frozenset((k, str(v)) for k, v in f["segment"].items()) == want
        ]
        assert match, f"no accepted finding for the planted {cause['segment']}"
        assert match[0]["hypothesis_id"] in confirmed
    if not exp["significant"]:
        assert not confirmed
        assert any(h["status"] == "ruled_out" for h in hyps)
    # "a data problem" stands exactly when one was planted, on the gate's word
    (data,) = [h for h in hyps if h["source"] == "data_quality"]
    if exp["data_quality"]:
        assert data["status"] == "confirmed", data
        assert any(f["category"] == "data_quality" for f in accepted)
    else:
        assert data["status"] == "ruled_out", data
    ruled_out = [h for h in hyps if h["status"] == "ruled_out"]
    assert ruled_out, "an investigation that rules nothing out has not tested alternatives"
    lines = (out / "evidence.jsonl").read_text().splitlines()
    assert len(lines) == result["stats"]["agent"]["ledger_entries"]
    assert all((out / "hypotheses" / f"{h['id']}.log").is_file() for h in hyps)
    report = (out / "report.md").read_text()
    assert "## Hypotheses" in report


def test_the_even_shift_is_weighed_on_the_totals_not_a_second_engine_run(investigated):
    """The "everything moved" hypothesis of a plain metric reads the two totals with one
    aggregate (no second run of the engine over the rows), and they are the metric's values."""
    exp, result, out = investigated
    metric = result["metric"]
    hyps = [h for h in result["hypotheses"] if h["category"] == "global"]
    if metric["kind"] == "ratio" or metric["grain"] or not hyps:
        pytest.skip("ratio and per-day metrics are weighed by the engine's own query")
    (evidence,) = hyps[0]["evidence"]
    assert evidence["tool"] == "metric_compare_periods"
    assert "group_by" not in evidence["arguments"]
    for which in ("baseline", "comparison"):
        got = evidence["result"]["total"][which]
        assert got == pytest.approx(result[which]["value"], rel=1e-9)


def test_every_accepted_finding_reproduces_from_its_recorded_sql(investigated):
    """Each accepted finding's numbers come back when its recorded SQL is re-run, and match what
    the finding claimed."""
    import duckdb

    exp, result, out = investigated
    con = duckdb.connect(str(out / "data.duckdb"), read_only=True)
    try:
        for f in result["findings"]:
            if f["status"] != "accepted":
                continue
            for which, value in rerun(con, result, f["sql"], f["params"]).items():
                assert value == pytest.approx(f["measured"][which], rel=1e-9)
                assert f["claimed"][which] == pytest.approx(value, rel=0.01)
    finally:
        con.close()
