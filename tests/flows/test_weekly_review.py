"""The weekly review: measures every metric of metrics.yaml, investigates only what moved, skips
weeks without new data and weeks already reviewed.

Flow runs go through a temporary Prefect server (``prefect_harness``); the investigations are
remembered in the session's test store (tests/conftest.py)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import yaml

from flows.review_metric import Thresholds, measurement
from flows.weekly_review import ReviewConfig, read_review, render_summary, review_periods
from tests.support.fake_storage import FakeStorage
from tests.support.prefect_runs import child_runs, markdown_artifact

# Slow end to end (the weekly review's flows on a Prefect server):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "metrics.yaml"
NOISE = ROOT / "data" / "scenarios" / "pure_noise"
DEMO = ROOT / "data" / "demo"
IOS_52 = {"platform": "ios", "app_version": "5.2"}


def _run(**kwargs: Any) -> tuple[UUID, dict[str, Any]]:
    """Run the flow; its flow run id and its summary."""
    from flows.weekly_review import weekly_review

    state = weekly_review(offline=True, return_state=True, **kwargs)
    assert state.is_completed(), state.message
    return state.state_details.flow_run_id, state.result()


def _summary_artifact(run_id: UUID) -> str:
    return markdown_artifact(run_id, "weekly-review")


@pytest.fixture(scope="module")
def demo_review(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory):
    """The example metrics.yaml on the demo data, as of Monday 2024-04-01."""
    out = tmp_path_factory.mktemp("weekly") / "runs"
    run_id, summary = _run(metrics_file=str(EXAMPLE), as_of=date(2024, 4, 1), out=str(out))
    return out, run_id, summary


# --------------------------------------------------------------------------------------------
# Through Prefect
# --------------------------------------------------------------------------------------------


def test_demo_week_investigates_revenue_only(demo_review):
    out, run_id, summary = demo_review
    assert summary["status"] == "reviewed"
    assert (summary["baseline"], summary["comparison"]) == (
        "2024-03-18:2024-03-24",
        "2024-03-25:2024-03-31",
    )
    rows = {r["metric"]: r for r in summary["metrics"]}
    assert list(rows) == ["revenue", "sessions", "active_users"]
    assert summary["moved"] == ["revenue"]
    assert rows["revenue"]["change"]["relative"] == pytest.approx(-0.215, abs=0.001)
    assert not rows["sessions"]["moved"] and not rows["active_users"]["moved"]
    assert "investigation" not in rows["sessions"]

    inv = rows["revenue"]["investigation"]
    assert inv["state"] == "COMPLETED"
    assert Path(inv["out"]) == out / "revenue" / "2024-03-25"
    assert inv["root_causes"] == [IOS_52]
    result = json.loads((Path(inv["out"]) / "result.json").read_text())
    assert [c["segment"] for c in result["root_causes"]] == [IOS_52]
    assert result["metric"]["name"] == "revenue"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["metrics", "revenue"]

    # each metric is a flow run of its own, a child of the review, run in this process (no
    # deployment of review-metric here); the investigation is a child of its metric's run
    children = {r.name: r for r in child_runs(run_id)}
    assert sorted(children) == ["active_users", "revenue", "sessions"]
    assert summary["metric_deployment"] is None and summary["failed"] == []
    for name, row in rows.items():
        run = children[name]
        assert row["flow_run_id"] == str(run.id) and row["state"] == "COMPLETED"
        assert run.state.is_completed() and run.deployment_id is None
        assert row["flow_run_url"].endswith(f"/runs/flow-run/{run.id}")
        assert run.parameters["request"]["metric"] == name
    [investigation] = child_runs(rows["revenue"]["flow_run_id"])
    assert str(investigation.id) == inv["flow_run_id"] and investigation.state.is_completed()
    assert child_runs(rows["sessions"]["flow_run_id"]) == []
    assert inv["flow_run_url"].endswith(f"/runs/flow-run/{inv['flow_run_id']}")

    md = _summary_artifact(run_id)
    assert "1 of 3 metrics moved" in md and "failed" not in md
    assert "| revenue |" in md and "yes: significant" in md and "-21.5%" in md
    assert inv["flow_run_url"] in md and "platform = ios, app\\_version = 5.2" in md
    assert all(f"[completed]({r['flow_run_url']})" in md for r in rows.values())
    assert "in the review's process" in md
    state = json.loads((out / "weekly-review-state.json").read_text())
    assert state["last_reviewed"] == "2024-03-25"
    assert state["reviewed"]["2024-03-25"]["moved"] == ["revenue"]


def test_the_investigations_remember_the_review_data_by_its_locations(demo_review):
    from tasks.store import store_from_config

    _, _, summary = demo_review
    run_id = summary["metrics"][0]["investigation"]["run_id"]
    with store_from_config() as store:
        remembered = store.get_investigation(run_id)
    assert remembered is not None
    assert remembered.data_source == f"{DEMO / 'events.csv'}, {DEMO / 'users.csv'}"


def test_same_week_again_is_skipped(demo_review):
    out, _, _ = demo_review
    run_id, summary = _run(metrics_file=str(EXAMPLE), as_of=date(2024, 4, 3), out=str(out))
    assert summary["status"] == "skipped"
    assert summary["reason"] == "week 2024-03-25 was already reviewed on this data"
    assert summary["metrics"] == [] and child_runs(run_id) == []
    assert "Skipped: week 2024-03-25 was already reviewed" in _summary_artifact(run_id)


def test_week_without_data_is_skipped(prefect_harness, tmp_path):
    run_id, summary = _run(metrics_file=str(EXAMPLE), as_of=date(2024, 5, 1), out=str(tmp_path))
    assert summary["status"] == "skipped"
    assert summary["comparison"] == "2024-04-22:2024-04-28"
    assert summary["reason"] == (
        "no new data: the data ends on 2024-03-31, before the end of the week under review "
        "(2024-04-28)"
    )
    assert child_runs(run_id) == []
    assert not (tmp_path / "weekly-review-state.json").exists()


def _metrics_file(folder: Path, data: list[str], metrics: list[str], **extra: Any) -> Path:
    """The example metrics.yaml with a US-only revenue metric, reviewing ``metrics`` of
    ``data``."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metrics"]["us_revenue"] = {**doc["metrics"]["revenue"], "filters": ["country=US"]}
    doc["review"].update(data=data, metrics=metrics, **extra)
    path = folder / "metrics.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_metric_whose_filtered_rows_have_not_arrived_has_no_new_data(prefect_harness, tmp_path):
    # the week of 2024-03-25 arrived without its US rows
    lines = (DEMO / "events.csv").read_text().splitlines()
    header = lines[0].split(",")
    day, country = header.index("date"), header.index("country")
    kept = [
        line for line in lines[1:]
        if not (line.split(",")[day] >= "2024-03-25" and line.split(",")[country] == "US")
    ]  # fmt: skip
    events = tmp_path / "events.csv"
    events.write_text("\n".join([lines[0], *kept]) + "\n")
    data = [str(events), str(DEMO / "users.csv")]

    only_us = _metrics_file(tmp_path, data, ["us_revenue"])
    out = tmp_path / "runs"
    run_id, summary = _run(metrics_file=str(only_us), as_of=date(2024, 4, 1), out=str(out))
    assert summary["status"] == "skipped"
    assert summary["reason"] == (
        "no new data: the data ends on 2024-03-24 (counting only rows the metrics' filters "
        "keep), before the end of the week under review (2024-03-31)"
    )
    assert child_runs(run_id) == []

    both = _metrics_file(tmp_path, data, ["sessions", "us_revenue"])
    _, summary = _run(metrics_file=str(both), as_of=date(2024, 4, 1), out=str(out))
    rows = {r["metric"]: r for r in summary["metrics"]}
    assert rows["sessions"]["latest_date"] == "2024-03-31" and "change" in rows["sessions"]
    assert rows["us_revenue"]["latest_date"] == "2024-03-24"
    assert rows["us_revenue"]["reason"] == "no data through 2024-03-31"
    assert "investigation" not in rows["us_revenue"]


def test_data_in_supabase_storage_is_reviewed(prefect_harness, tmp_path, monkeypatch):
    with FakeStorage(tmp_path / "buckets") as storage:
        for name in ("events.csv", "users.csv"):
            storage.put("uploads", f"acme/{name}", (DEMO / name).read_bytes())
        monkeypatch.setenv("SUPABASE_URL", storage.url)
        monkeypatch.setenv("SUPABASE_KEY", storage.key)
        metrics = _metrics_file(tmp_path, ["supabase://uploads/acme"], ["revenue", "sessions"])
        out = tmp_path / "runs"
        _, summary = _run(metrics_file=str(metrics), as_of=date(2024, 4, 1), out=str(out))
        assert summary["status"] == "reviewed" and summary["moved"] == ["revenue"]
        inv = summary["metrics"][0]["investigation"]
        assert inv["state"] == "COMPLETED" and inv["root_causes"] == [IOS_52]
        # downloaded once, verified, and the investigation read the same files
        assert storage.downloads("acme/events.csv") == 1
        assert storage.downloads("acme/users.csv") == 1


def test_nothing_moved_stays_quiet(prefect_harness, tmp_path):
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["review"]["data"] = [str(NOISE / "events.csv.gz"), str(NOISE / "users.csv")]
    metrics_file = tmp_path / "metrics.yaml"
    metrics_file.write_text(yaml.safe_dump(doc))
    out = tmp_path / "runs"
    run_id, summary = _run(metrics_file=str(metrics_file), as_of=date(2024, 4, 1), out=str(out))
    assert summary["status"] == "reviewed" and summary["moved"] == []
    assert [r["moved"] for r in summary["metrics"]] == [False, False, False]
    # nothing was planted: each metric is within the noise, or significant by less than 5%
    for r in summary["metrics"]:
        expected = "significant but under 5%" if r["change"]["significant"] else "within the noise"
        assert r["reason"] == expected, r
        assert not r["change"]["significant"] or abs(r["change"]["relative"]) < 0.05, r
    children = child_runs(run_id)
    assert len(children) == 3 and all(c.state.is_completed() for c in children)
    assert all(child_runs(c.id) == [] for c in children)  # nothing investigated
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["metrics"]
    assert "Nothing moved" in _summary_artifact(run_id)
    # the same week again: skipped, unless forced
    again = dict(metrics_file=str(metrics_file), as_of=date(2024, 4, 2), out=str(out))
    assert _run(**again)[1]["status"] == "skipped"
    assert _run(**again, force=True)[1]["status"] == "reviewed"


def test_a_failed_investigation_fails_its_metric_and_the_review_and_leaves_the_week_open(
    prefect_harness, tmp_path, monkeypatch
):
    from prefect import flow

    import flows.investigate
    from flows.weekly_review import weekly_review

    @flow(name="investigate")
    def broken(request: Any) -> dict[str, Any]:
        raise RuntimeError("disk full")

    monkeypatch.setattr(flows.investigate, "investigate", broken)
    state = weekly_review(
        metrics_file=str(EXAMPLE), as_of=date(2024, 4, 1), out=str(tmp_path), offline=True,
        return_state=True,
    )  # fmt: skip
    assert state.is_failed()
    assert state.message == (
        "1 of 3 metrics failed: revenue (investigation failed: RuntimeError: disk full). The "
        "others were reviewed; the week of 2024-03-25 stays open for a rerun."
    )
    # the summary is the failed run's data: the metric was measured, its investigation failed
    summary = state.result(raise_on_failure=False)
    assert summary["failed"] == ["revenue"] and summary["moved"] == ["revenue"]
    rows = {r["metric"]: r for r in summary["metrics"]}
    assert rows["revenue"]["state"] == "FAILED"
    assert rows["revenue"]["error"] == "investigation failed: RuntimeError: disk full"
    assert rows["revenue"]["change"]["relative"] == pytest.approx(-0.215, abs=0.001)
    assert rows["revenue"]["investigation"]["state"] == "FAILED"
    assert [rows[m]["state"] for m in ("sessions", "active_users")] == ["COMPLETED"] * 2

    children = {r.name: r for r in child_runs(state.state_details.flow_run_id)}
    assert children["revenue"].state.is_failed()
    assert children["sessions"].state.is_completed()
    [sub] = child_runs(children["revenue"].id)
    assert sub.state.is_failed()
    md = _summary_artifact(state.state_details.flow_run_id)
    assert "**1 of 3 metrics failed: revenue.**" in md
    assert f"[failed]({rows['revenue']['flow_run_url']})" in md
    assert "flow run](" in md and "The investigation failed: RuntimeError: disk full" in md
    assert not (tmp_path / "weekly-review-state.json").exists()


# --------------------------------------------------------------------------------------------
# Plain functions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("as_of", "days", "baseline", "comparison"),
    [
        ("2024-04-01", 7, ("2024-03-18", "2024-03-24"), ("2024-03-25", "2024-03-31")),  # Monday
        ("2024-04-07", 7, ("2024-03-18", "2024-03-24"), ("2024-03-25", "2024-03-31")),  # Sunday
        ("2024-04-08", 7, ("2024-03-25", "2024-03-31"), ("2024-04-01", "2024-04-07")),
        ("2024-04-01", 14, ("2024-03-04", "2024-03-17"), ("2024-03-18", "2024-03-31")),
        ("2024-04-01", 1, ("2024-03-30", "2024-03-30"), ("2024-03-31", "2024-03-31")),
    ],
)
def test_periods_end_on_the_last_sunday_before_as_of(as_of, days, baseline, comparison):
    got = review_periods(date.fromisoformat(as_of), ReviewConfig(data=["x"], period_days=days))
    assert [tuple(d.isoformat() for d in p) for p in got] == [baseline, comparison]


def test_example_metrics_file(tmp_path):
    review = read_review(EXAMPLE, tmp_path)
    assert review.metrics == ["revenue", "sessions", "active_users"]
    assert review.data == [str(ROOT / "data/demo/events.csv"), str(ROOT / "data/demo/users.csv")]
    assert review.config.min_relative_change == 0.05 and review.config.period_days == 7
    # the metrics section alone, in the format --metric NAME --metrics-file reads
    only = yaml.safe_load(Path(review.metrics_only_file).read_text())
    assert only == {"metrics": yaml.safe_load(EXAMPLE.read_text())["metrics"]}
    assert read_review(EXAMPLE, tmp_path, period_days=14).config.period_days == 14
    # the data's name in the memory: its locations, unless the file names it
    assert review.source == ", ".join(review.data)
    named = _metrics_file(tmp_path, ["supabase://uploads/acme"], ["revenue"], source="acme")
    assert read_review(named, tmp_path).source == "acme"
    unnamed = _metrics_file(tmp_path, ["supabase://uploads/acme", "x.csv"], ["revenue"])
    assert read_review(unnamed, tmp_path).data == [
        "supabase://uploads/acme", str(tmp_path / "x.csv")]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("metrics:\n  r: {expression: sum(revenue)}\n", "expected two top-level keys"),
        ("metrics:\n  r: {expression: sum(revenue)}\nreview: {}\n", "review.data: Field required"),
        (
            "metrics:\n  r: {expression: sum(revenue)}\nreview: {data: [a.csv], alpah: 0.1}\n",
            "review.alpah: Extra inputs are not permitted",
        ),
        (
            "metrics:\n  r: {expression: sum(revenue)}\nreview: {data: [a.csv], metrics: [x]}\n",
            "review.metrics names 'x'; the metrics are 'r'",
        ),
        (
            "metrics:\n  r: {expression: sum(revenue) +}\nreview: {data: [a.csv]}\n",
            "metric 'r': invalid metric",
        ),
        ("metrics: [unclosed\n", "invalid YAML"),
    ],
)
def test_bad_metrics_files(tmp_path, text, fragment):
    path = tmp_path / "metrics.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        read_review(path, tmp_path / "out")
    assert str(path) in str(err.value) and fragment in str(err.value)
    assert "out/metrics" not in str(err.value)


def _explained(relative: float | None, p: float | None) -> dict[str, Any]:
    change = {"absolute": -1.0, "relative": relative, "significant": p is not None and p < 0.05}
    return {
        "metric": {"expression": "sum(x)"},
        "baseline": {"value": 10.0},
        "comparison": {"value": 9.0},
        "change": {**change, "p_value": p},
    }


@pytest.mark.parametrize(
    ("relative", "p", "moved", "reason"),
    [
        (-0.2, 0.001, True, "significant and beyond the threshold"),
        (0.2, 0.3, False, "within the noise"),
        (-0.01, 0.001, False, "significant but under 5%"),
        (None, 0.001, True, "significant and beyond the threshold"),  # from zero
        (-0.2, None, False, "within the noise"),
    ],
)
def test_only_significant_moves_beyond_the_threshold_are_investigated(relative, p, moved, reason):
    got = measurement(_explained(relative, p), Thresholds())
    assert (got["moved"], got["reason"]) == (moved, reason)
    strict = measurement(_explained(relative, p), Thresholds(alpha=0.0001))
    assert not strict["moved"]


def test_summary_escapes_data_text():
    summary = {
        "status": "reviewed", "week": "2024-03-25", "baseline": "a", "comparison": "b",
        "thresholds": {"min_relative_change": 0.05, "alpha": 0.05},
        "metrics": [{
            "metric": "revenue", "baseline": 1.0, "comparison": 2.0, "moved": True,
            "reason": "significant and beyond the threshold",
            "change": {"relative": 1.0, "p_value": 0.001},
            "investigation": {
                "out": "o", "flow_run_url": None, "state": "COMPLETED",
                "root_causes": [{"country": "[x](https://evil.example)"}],
            },
        }],
    }  # fmt: skip
    md = render_summary(summary)
    assert "](https" not in md and "hxxps" in md and "country = \\[x\\]" in md
