"""prefect.yaml on a real Prefect server: the README's "Running on Prefect" steps, end to end.

A local server (SQLite under a temporary PREFECT_HOME), the process work pool, `prefect deploy
--all`, a worker, then `prefect deployment run investigate/default --watch`. The run must complete
with its artifacts, the scheduler must create runs for the weekly review, and the weekly review's
metrics must run as runs of review-metric/default that the worker takes. Every process is
stopped in the end, whatever happens.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

# Slow end to end (a Prefect server, a worker and deployments run end to end):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
IOS_52 = {"platform": "ios", "app_version": "5.2"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"{what}: nothing after {timeout:.0f} s")


def _stop(proc: subprocess.Popen[bytes], signals: list[signal.Signals], wait: float) -> None:
    """Send each signal in turn until the process exits; then kill its process group."""
    for sig in signals:
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything it left behind (its own session)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


class Prefect:
    """The prefect CLI against one server, with the environment the README sets up."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = _free_port()
        self.api = f"http://127.0.0.1:{self.port}/api"
        inherited = {
            k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE")
        }
        self.env = {
            **inherited,
            "PREFECT_HOME": str(tmp / "prefect-home"),  # profiles.toml and the server's database
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DRILLDOWN_PROJECT_DIR": str(ROOT),
            "DRILLDOWN_STORE_PATH": str(tmp / "store.duckdb"),
            "COLUMNS": "250",
        }
        self.procs: list[tuple[subprocess.Popen[bytes], list[signal.Signals], float]] = []
        self.timings: dict[str, float] = {}

    def start(self, name: str, *args: str, stop: list[signal.Signals], wait: float) -> Path:
        log = self.tmp / f"{name}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [PREFECT, *args], cwd=self.tmp, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.procs.append((proc, stop, wait))
        return log

    def run(self, *args: str, timeout: float) -> str:
        t0 = time.monotonic()
        done = subprocess.run(
            [PREFECT, *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=timeout,
        )  # fmt: skip
        self.timings[" ".join(args[:3])] = round(time.monotonic() - t0, 1)
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"prefect {' '.join(args)} failed:\n{out[-3000:]}"
        return out

    def api_call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.api + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def healthy(self) -> bool:
        try:
            return self.api_call("/health") is True
        except OSError:
            return False

    def stop_all(self) -> None:
        for proc, signals, wait in reversed(self.procs):
            _stop(proc, signals, wait)


@pytest.fixture
def prefect(tmp_path: Path) -> Iterator[Prefect]:
    p = Prefect(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()
        print("timings (s):", p.timings)


def test_deployments_run_on_a_real_server(prefect: Prefect, tmp_path: Path) -> None:
    # a profile holds the API address: every later command, the worker and its runs use it
    prefect.run("profile", "create", "local", timeout=60)
    prefect.run(
        "-p", "local", "config", "set", f"PREFECT_API_URL={prefect.api}",
        "PREFECT_SERVER_ANALYTICS_ENABLED=false", timeout=60,
    )  # fmt: skip
    t0 = time.monotonic()
    server_log = prefect.start(
        "server", "-p", "local", "server", "start", "--host", "127.0.0.1", "--port",
        str(prefect.port), stop=[signal.SIGTERM], wait=20,
    )  # fmt: skip
    _wait(f"server health (log: {server_log})", prefect.healthy, timeout=120)
    prefect.timings["server start"] = round(time.monotonic() - t0, 1)
    assert "Connected to Prefect server" in prefect.run("profile", "use", "local", timeout=60)

    prefect.run("work-pool", "create", "local-process", "--type", "process", timeout=120)
    out = prefect.run("--no-prompt", "deploy", "--all", timeout=180)
    assert "investigate/default" in out and "weekly-review/weekly" in out
    assert "review-metric/default" in out
    worker_log = prefect.start(
        "worker", "worker", "start", "--pool", "local-process",
        stop=[signal.SIGINT, signal.SIGINT], wait=15,
    )  # fmt: skip

    runs = tmp_path / "runs"
    try:
        default = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"][0]
        request = {**default["parameters"]["request"], "out": str(runs)}  # given whole
        out = prefect.run(
            "deployment", "run", "investigate/default",
            "--params", json.dumps({"request": request}),
            "--watch", "--watch-interval", "1", "--watch-timeout", "300", timeout=360,
        )  # fmt: skip
    except (AssertionError, subprocess.TimeoutExpired):
        print(worker_log.read_text()[-5000:])
        raise
    assert "Completed" in out, out[-3000:]
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)  # type: ignore[union-attr]

    # the run: completed, its answer in `out`, its artifacts on the server
    flow_run = prefect.api_call(f"/flow_runs/{run_id}")
    assert flow_run["state"]["type"] == "COMPLETED"
    assert flow_run["parameters"]["request"]["out"] == str(runs)
    result = json.loads((runs / "result.json").read_text())
    assert [c["segment"] for c in result["root_causes"]] == [IOS_52]
    artifacts = prefect.api_call(
        "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}}
    )
    kinds = {a["key"]: a["type"] for a in artifacts}
    assert kinds == {
        "investigation-report": "markdown",
        "investigation-findings": "table",
        "investigation-progress": "progress",
    }
    progress = next(a for a in artifacts if a["type"] == "progress")
    assert progress["data"] == 100.0
    listed = prefect.run("artifact", "ls", timeout=120)
    assert "investigation-report" in listed and "investigation-findings" in listed

    # the weekly review: deployed with its schedule, and the scheduler creates its runs
    weekly = prefect.api_call("/deployments/name/weekly-review/weekly")
    [schedule] = weekly["schedules"]
    assert schedule["schedule"]["cron"] == "0 8 * * 1"
    assert schedule["schedule"]["timezone"] == "UTC" and schedule["active"]
    assert weekly["parameters"]["metrics_file"] == "metrics.yaml"

    def scheduled() -> list[dict[str, Any]]:
        return prefect.api_call(
            "/flow_runs/filter",
            {
                "deployments": {"id": {"any_": [weekly["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
            },
        )

    t1 = time.monotonic()
    upcoming = _wait("scheduled runs of weekly-review/weekly", scheduled, timeout=150, every=3)
    prefect.timings["scheduled runs appear"] = round(time.monotonic() - t1, 1)
    for r in upcoming:
        start = r["expected_start_time"]
        assert start.endswith(("T08:00:00Z", "T08:00:00+00:00")), start
    listed = prefect.run(
        "flow-run", "ls", "--flow-name", "weekly-review", "--state-type", "SCHEDULED", timeout=120
    )
    assert "weekly-review" in listed

    # the weekly review, now: the demo week, each metric a run of review-metric/default taken
    # by the worker, revenue investigated as a subflow of its run
    weekly_out = tmp_path / "weekly"
    out = prefect.run(
        "deployment", "run", "weekly-review/weekly", "--param", f"out={weekly_out}",
        "--watch", "--watch-interval", "1", "--watch-timeout", "300", timeout=360,
    )  # fmt: skip
    assert "Completed" in out, out[-3000:]
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)  # type: ignore[union-attr]
    result = json.loads((weekly_out / "revenue" / "2024-03-25" / "result.json").read_text())
    assert [c["segment"] for c in result["root_causes"]] == [IOS_52]
    [summary] = prefect.api_call(
        "/artifacts/filter",
        {"artifacts": {"flow_run_id": {"any_": [run_id]}, "key": {"any_": ["weekly-review"]}}},
    )
    assert "1 of 3 metrics moved" in summary["data"]
    assert "through the deployment `review-metric/default`" in summary["data"]
    per_metric = prefect.api_call("/deployments/name/review-metric/default")
    children = prefect.api_call(
        "/flow_runs/filter", {"flow_runs": {"parent_flow_run_id": {"any_": [run_id]}}}
    )
    assert sorted(c["name"] for c in children) == ["active_users", "revenue", "sessions"]
    assert {c["deployment_id"] for c in children} == {per_metric["id"]}
    assert {c["state"]["type"] for c in children} == {"COMPLETED"}
