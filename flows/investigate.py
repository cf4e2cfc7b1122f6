"""The ``investigate`` flow: :func:`flows.investigation.investigation` as a Prefect flow run
(``prefect deployment run investigate/default``, or ``drilldown investigate --prefect``), every
step a Prefect task (:mod:`flows.steps`) with its retry and cache policy, the run's progress,
report and findings as artifacts. :class:`Request` and :func:`investigation` are those of
:mod:`flows.investigation`.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.investigation import Request, investigation

__all__ = ["Request", "investigate", "investigation"]


@flow(name="investigate")
def investigate(
    data: list[str],
    metric: str,
    baseline: str,
    comparison: str,
    table: str | None = None,
    time_column: str | None = None,
    period_column: str | None = None,
    grain: str | None = None,
    dimensions: list[str] | None = None,
    filters: list[str] | None = None,
    out: str = "drilldown-out",
    db: str | None = None,
    offline: bool = False,
    model: str | None = None,
    remember: bool = True,
    max_depth: int | None = None,
    min_support: float | None = None,
    metrics_file: str | None = None,
    source: str | None = None,
    load_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Explain why ``metric`` moved from ``baseline`` to ``comparison`` (date ranges
    ``YYYY-MM-DD:YYYY-MM-DD`` on ``time_column``, or labels of ``period_column``) and write
    result.json, report.md and the evidence ledger into ``out``. ``data`` holds CSV/Parquet
    paths or folders, ``supabase://bucket/prefix`` locations, one ``.duckdb`` file, or one
    ``postgresql://`` URL whose tables are read where they are (Prefect records a flow's
    parameters: give that URL without its password, and the password through ``PGPASSWORD``
    or a pgpass file where the flow runs). Without ANTHROPIC_API_KEY, or
    with ``offline``, the offline planner investigates. ``source`` names where the data comes
    from, so that investigations of its later versions share memory with this one.
    ``load_options`` say how CSV files are read (``LoadOptions``' fields: ``encoding``,
    ``delimiter``, ``decimal_comma``, ``date_format``, ``max_rows``, ``max_bytes``)."""
    return investigation(Request(**locals()))  # every parameter, and only those
