"""A Prefect API for the tests that run flows: one temporary server (SQLite in a temporary
folder) for the session, started only when a test asks for ``prefect_harness``.

Heartbeats are off (each flow run would otherwise wait about a second for the heartbeat thread)
and task results are persisted under a temporary folder, never the user's ``~/.prefect``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Flows called in the test run against a temporary Prefect server."""
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_LOCAL_STORAGE_PATH,
        temporary_settings,
    )
    from prefect.testing.utilities import prefect_test_harness

    storage = tmp_path_factory.mktemp("prefect-results")
    with prefect_test_harness(server_startup_timeout=120):
        with temporary_settings(
            updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None, PREFECT_LOCAL_STORAGE_PATH: storage}
        ):
            yield
