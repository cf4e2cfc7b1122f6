"""Report: result.json, report.md, report.html with its charts, and the evidence ledger files.

One report model (:mod:`tasks.report.model`) is built from the result and rendered three ways:
report.md, report.html and the run's markdown artifact (report.md without the chart links,
which point at files the artifact does not have).

Every file is written through :func:`tasks.outdir.write_file`: a new private file renamed over
the name, no link followed. ``result.json`` is written last: when it exists, every other output
is complete, and a crash never leaves a half-written one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sql_tools.output import dumps, mask_secrets
from tasks.agent.ledger import Ledger
from tasks.agent.models import LedgerEntry
from tasks.engine.result import Explanation
from tasks.report.files import CHARTS, write_report_files
from tasks.report.model import build
from tasks.outdir import write_file
from tasks.report.render import markdown as render
from tasks.run import Run


def write_report(
    run: Run, out: str, result: dict[str, Any], entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """Write the outputs into ``out``; return ``{"paths": [...], "report_md": str,
    "artifact_md": str}``."""
    folder = Path(out)
    report = build(Explanation.model_validate(result), run.db)
    charts = write_report_files(result, folder, run.db, run.ctx, report)  # html, charts
    drawn = {p.name for p in charts if p.parent.name == "charts"}
    links = [(f"charts/{name}", alt) for name, alt in CHARTS.items() if name in drawn]
    report_md = mask_secrets(render(report, links))
    write_file(folder, "report.md", report_md)
    ledger = Ledger()
    ledger.entries = [LedgerEntry.model_validate(e) for e in entries]
    titles = {h["id"]: h["title"] for h in result.get("hypotheses", [])}
    ledger.write(folder, titles)
    write_file(folder, "result.json", dumps(result, indent=2))  # last: every output is there
    paths = [folder / "result.json", folder / "report.md", folder / "evidence.jsonl", *charts]
    paths_text = [str(p) for p in paths]
    artifact_md = mask_secrets(render(report))
    return {"paths": paths_text, "report_md": report_md, "artifact_md": artifact_md}
