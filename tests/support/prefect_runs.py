"""What a Prefect server holds about a run, read back through the client as a user's script
would (child runs, artifacts), and a flow served from a separate process as ``flow.serve()``
serves it on a user's machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parents[2]


def child_runs(run_id: UUID | str) -> list[Any]:
    """The flow runs whose parent is ``run_id`` (subflows, and deployment runs started as
    subflows)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        flt = FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run_id]))
        return client.read_flow_runs(flow_run_filter=flt)


def markdown_artifact(run_id: UUID | str, key: str) -> str:
    """The one markdown artifact ``key`` of the run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[key]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]),
            )
        )
    assert len(found) == 1, found
    return found[0].data


def most_at_once(runs: list[Any]) -> int:
    """The largest number of ``runs`` that were running at the same moment (from the start and
    end times the server recorded)."""
    edges = sorted(
        [(r.start_time, 1) for r in runs if r.start_time]
        + [(r.end_time, -1) for r in runs if r.end_time]
    )
    now = peak = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        now += step
        peak = max(peak, now)
    return peak


@contextmanager
def served(entrypoint: str, name: str, env: dict[str, str], log: Path) -> Iterator[str]:
    """Serve the flow at ``entrypoint`` (``module:flow``) as deployment ``name`` from a separate
    process with ``env`` added to this one's, its output in ``log``; yields ``flow-name/name``
    once the server has it, stops the process (and the runs it started) in the end and deletes
    the deployment."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    module, attr = entrypoint.split(":")
    code = f"from {module} import {attr} as f; f.serve(name={name!r}, print_starting_message=False)"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    deployment_id = None
    try:
        with get_client(sync_client=True) as client:
            flow_name = _flow_name(entrypoint)
            deadline = time.monotonic() + 120
            while deployment_id is None:
                assert proc.poll() is None, f"serving {entrypoint} exited: {log.read_text()}"
                assert time.monotonic() < deadline, f"{flow_name}/{name} was never served"
                try:
                    deployment_id = client.read_deployment_by_name(f"{flow_name}/{name}").id
                except ObjectNotFound:
                    time.sleep(0.5)
        yield f"{flow_name}/{name}"
    finally:
        for sig in (signal.SIGINT, signal.SIGINT):
            if proc.poll() is None:
                proc.send_signal(sig)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        if deployment_id is not None:
            forget_deployment(deployment_id)


def forget_deployment(deployment_id: UUID) -> None:
    """Delete the deployment, so that later flows in the session do not find it."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.delete_deployment(deployment_id)


def _flow_name(entrypoint: str) -> str:
    import importlib

    module, attr = entrypoint.split(":")
    return getattr(importlib.import_module(module), attr).name
