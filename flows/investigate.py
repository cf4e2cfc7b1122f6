"""The ``investigate`` flow: :func:`tasks.investigation.investigation` as a Prefect flow run
(``prefect deployment run investigate/default``, or ``drilldown investigate --prefect``), on the
flow's :class:`Road`: every step its Prefect task (:mod:`flows.steps`, with its retry and cache
policy), the hypotheses mapped over their task, progress in the run's log and a progress
artifact, the report and the findings as artifacts.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prefect import flow
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.futures import as_completed
from prefect.logging import get_run_logger
from prefect.utilities.annotations import unmapped

from flows import steps
from sql_tools.output import printable
from tasks.investigation import Road, investigation
from tasks.request import Request
from tasks.run import Run

__all__ = ["FLOW_ROAD", "Request", "investigate"]


@flow(name="investigate")
def investigate(request: Request) -> dict[str, Any]:
    """Explain why ``request.metric`` moved from ``baseline`` to ``comparison`` (date ranges
    ``YYYY-MM-DD:YYYY-MM-DD`` on ``time_column``, or labels of ``period_column``) and write
    result.json, report.md and the evidence ledger into ``out``. ``data`` holds CSV/Parquet
    paths or folders, ``supabase://bucket/prefix`` locations, one ``.duckdb`` file, or one
    ``postgresql://`` URL whose tables are read where they are (Prefect records a flow's
    parameters: give that URL without its password, and the password through ``PGPASSWORD``
    or a pgpass file where the flow runs). Without ANTHROPIC_API_KEY, or with ``offline``,
    the offline planner investigates. ``source`` names where the data comes from, so that
    investigations of its later versions share memory with this one. ``load_options`` say how
    CSV files are read (``LoadOptions``' fields: ``encoding``, ``delimiter``,
    ``decimal_comma``, ``date_format``, ``max_rows``, ``max_bytes``)."""
    return investigation(request, road=FLOW_ROAD)


@dataclass(frozen=True)
class FlowRoad(Road):
    """The steps as Prefect tasks inside a flow run."""

    def completed(
        self, run: Run, items: list[dict[str, Any]], offline: bool, model: str | None
    ) -> Iterator[tuple[int, Any]]:
        futures = self.investigate_hypothesis.map(
            unmapped(run), items, unmapped(offline), unmapped(model)
        )
        for fut in as_completed(futures):
            yield futures.index(fut), fut

    def say(self, message: str) -> None:
        get_run_logger().info(printable(message))

    def tracker(self, total: int) -> Callable[[int], None]:
        artifact = create_progress_artifact(
            progress=0.0, key="investigation-progress", description="Hypotheses investigated"
        )
        return lambda n: update_progress_artifact(artifact, progress=100.0 * n / max(total, 1))

    def publish(self, report_md: str, result: dict[str, Any]) -> None:
        """The report (report.md without its chart links, rendered from the same report model)
        as a markdown artifact and the findings as a table artifact."""
        create_markdown_artifact(markdown=report_md, key="investigation-report",
                                 description="report.md")  # fmt: skip
        rows = [
            {
                "segment": printable(", ".join(f"{k}={v}" for k, v in f["segment"].items()))
                or "everything",
                "category": f["category"],
                "status": f["status"],
                "share": None if f.get("share") is None else round(f["share"], 4),
                "p_value": f.get("p_value"),
                "critique": f.get("critique") or "",
            }
            for f in result["findings"]
        ]
        create_table_artifact(table=rows or [{"segment": "no findings"}],
                              key="investigation-findings",
                              description="Findings, accepted and dismissed")  # fmt: skip


FLOW_ROAD = FlowRoad(
    load=steps.load, decompose=steps.decompose, recall_history=steps.recall_history,
    hypothesize=steps.hypothesize, investigate_hypothesis=steps.investigate_hypothesis,
    verify_findings=steps.verify_findings, write_report=steps.write_report,
    remember=steps.remember,
)  # fmt: skip
