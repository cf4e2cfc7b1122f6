"""The ``drilldown`` command line.

Every command exits non-zero with a one-line error on bad input. ``drilldown tool`` prints
JSON on stdout: the tool result, or ``{"error": {"code": ..., "message": ...}}`` with exit code 2
for arguments the caller can fix and 1 for anything else.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

app = typer.Typer(
    name="drilldown",
    help="Explain why a metric moved: load data into DuckDB, then query it through safe tools.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

_CONTROL = {i: f"\\x{i:02x}" for i in list(range(0x20)) + [0x7F] if i not in (0x09,)}


def printable(text: object) -> str:
    """Text safe for a terminal: control characters (escape sequences) shown, not executed."""
    return str(text).translate(_CONTROL)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line error to stderr and exit."""
    typer.echo(f"error: {printable(' '.join(message.split()))}", err=True)
    raise typer.Exit(code)


def emit_json(payload: Any) -> None:
    """Print JSON to stdout (control characters are escaped by the encoder)."""
    typer.echo(json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False))


@app.command()
def load(
    data: Annotated[list[Path], typer.Argument(help="CSV, CSV.gz or Parquet files or folders.")],
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to create or update.")],
    max_rows: Annotated[int | None, typer.Option(help="Refuse files with more data rows.")] = None,
    max_bytes: Annotated[
        int | None, typer.Option(help="Refuse files larger than this many bytes (after gunzip).")
    ] = None,
    encoding: Annotated[
        str | None, typer.Option(help="Source encoding when not UTF-8, e.g. cp1252 or latin-1.")
    ] = None,
    delimiter: Annotated[
        str | None, typer.Option(help="Field delimiter (default: detect).")
    ] = None,
    decimal_comma: Annotated[
        bool | None,
        typer.Option(
            "--decimal-comma/--no-decimal-comma", help="Read 1,5 as 1.5 (default: detect)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the load report as JSON.")] = False,
) -> None:
    """Load files into a DuckDB file, one table per file, strictly (all rows or an error)."""
    from sql_tools._errors import SqlToolError
    from tasks.load import LoadOptions, load_files

    overrides = {
        "max_rows": max_rows,
        "max_bytes": max_bytes,
        "encoding": encoding,
        "delimiter": delimiter,
        "decimal_comma": decimal_comma,
    }
    try:
        options = LoadOptions(**{k: v for k, v in overrides.items() if v is not None})
        report = load_files(data, db, options)
    except SqlToolError as exc:
        fail(exc.message)
    except ValueError as exc:  # option validation
        fail(f"invalid option: {exc}", 2)
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    for t in report.tables:
        typer.echo(
            f"{t.status:9} {printable(t.table)}: {t.rows:,} rows, {len(t.columns)} columns"
            f"  <- {printable(t.source)}"
        )
        for w in t.warnings:
            typer.echo(f"          warning: {printable(w)}")
    for s in report.skipped:
        typer.echo(f"skipped   {printable(s)} (not CSV, CSV.gz or Parquet)")
    typer.echo(f"database  {printable(report.db)}")


@app.command()
def tool(
    name: Annotated[str, typer.Argument(help="Tool name, e.g. metric_compare_periods.")],
    db: Annotated[Path, typer.Option("--db", help="DuckDB file written by `drilldown load`.")],
    args: Annotated[
        str, typer.Option("--args", help="Arguments as a JSON object; '-' reads stdin.")
    ] = "{}",
    timeout: Annotated[float | None, typer.Option(help="Per-query time limit in seconds.")] = None,
) -> None:
    """Run one SQL tool and print its JSON result."""
    from sql_tools import Limits, SqlToolError, ToolContext, ToolInputError, call
    from sql_tools._context import limit_address_space

    raw = sys.stdin.read() if args == "-" else args
    try:
        limits = Limits(timeout_s=timeout) if timeout is not None else Limits()
    except ValueError:
        emit_json(ToolInputError("--timeout must be a positive number of seconds").to_dict())
        raise typer.Exit(2) from None
    limit_address_space(limits.address_space_bytes)
    try:
        with ToolContext(db, limits) as ctx:
            result = call(ctx, name, raw)
            emit_json(result.model_dump(mode="json"))
    except ToolInputError as exc:
        emit_json(exc.to_dict())
        raise typer.Exit(2) from None
    except SqlToolError as exc:
        emit_json(exc.to_dict())
        raise typer.Exit(1) from None


@app.command()
def tools(
    db: Annotated[
        Path | None, typer.Option("--db", help="With a database: enums of its live names.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the Anthropic tool definitions.")
    ] = False,
) -> None:
    """List the SQL tools (or print their definitions as given to Claude)."""
    from sql_tools import TOOLS, SqlToolError, ToolContext, anthropic_tools

    if not as_json:
        for t in TOOLS:
            typer.echo(f"{t.name:24} {t.summary}")
        return
    try:
        if db is None:
            emit_json(anthropic_tools())
        else:
            with ToolContext(db) as ctx:
                emit_json(anthropic_tools(ctx))
    except SqlToolError as exc:
        fail(exc.message)


@app.command()
def mcp(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file written by `drilldown load`.")],
) -> None:
    """Serve the SQL tools over MCP (stdio), read-only, until stdin closes."""
    from sql_tools import SqlToolError
    from tasks import mcp_server

    try:
        mcp_server.serve(db)
    except SqlToolError as exc:
        fail(exc.message)


def _investigate(
    data: list[Path],
    *,
    metric: str,
    baseline: str,
    comparison: str,
    out: Path,
    db: Path | None = None,
    table: str | None = None,
    time_column: str | None = None,
    period_column: str | None = None,
    grain: str | None = None,
    dimensions: str | None = None,
    filters: list[str] | None = None,
    max_depth: int = 3,
    min_support: float | None = None,
    metrics_file: Path | None = None,
    offline: bool = True,
    model: str | None = None,
    remember: bool = True,
) -> None:
    import os

    from sql_tools._context import ToolContext
    from sql_tools._errors import SqlToolError
    from tasks.agent.config import AgentConfig, make_client
    from tasks.agent.run import investigate as run_agent
    from tasks.agent.run import result_sections, write_ledger
    from tasks.engine import analyze
    from tasks.engine.parse import build_question
    from tasks.engine.report import render
    from tasks.load import LoadOptions, load_files

    try:
        out.mkdir(parents=True, exist_ok=True)
        try:
            data = _fetch_uploads(data, out)
        except ValueError as exc:  # StorageError: bad location, missing bucket, mismatch
            fail(str(exc))
        if len(data) == 1 and data[0].suffix == ".duckdb" and db is None:
            db = data[0]
        else:
            db = db or out / "data.duckdb"
            report = load_files(data, db, LoadOptions())
            for t in report.tables:
                typer.echo(f"{t.status:9} {printable(t.table)}: {t.rows:,} rows", err=True)
        with ToolContext(db) as ctx:
            question = build_question(
                ctx.schema,
                metric=metric,
                table=table,
                time_column=time_column,
                period_column=period_column,
                baseline=baseline,
                comparison=comparison,
                grain=grain,
                dimensions=dimensions,
                filters=filters or [],
                max_depth=max_depth,
                min_support=min_support,
                metrics_file=metrics_file,
            )
            analysis = analyze(ctx, question)
            result = analysis.explanation
            memory = _Memory(ctx, question, result) if remember else None
            history = memory.recall() if memory else None
            if history:
                result.similar_investigations = history["similar"]
            config = AgentConfig.from_env(model=model)
            client = None
            if not offline and os.environ.get("ANTHROPIC_API_KEY"):
                client = make_client(config)
            elif not offline:
                typer.echo("ANTHROPIC_API_KEY is not set: investigating offline", err=True)
            mode = "offline planner" if client is None else config.model
            typer.echo(f"investigating hypotheses ({mode})", err=True)
            agent, ledger = run_agent(
                ctx,
                question,
                analysis,
                client=client,
                config=config,
                history=history,
                on_outcome=lambda o: typer.echo(
                    f"  {o.hypothesis.id} {o.status:12} {printable(o.hypothesis.title)}", err=True
                ),
            )
            sections = result_sections(agent, ledger)
            result.hypotheses, result.findings = sections["hypotheses"], sections["findings"]
            result.stats["agent"] = sections["agent"]
            write_ledger(out, agent, ledger)
    except SqlToolError as exc:
        fail(exc.message, 2 if exc.code != "internal" else 1)
    except OSError as exc:
        fail(f"{exc.filename or ''}: {exc.strerror or exc}")
    tmp = out / "result.json.tmp"
    tmp.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(out / "result.json")
    report_md = render(result, db=str(db))
    (out / "report.md").write_text(report_md, encoding="utf-8")
    if memory is not None:
        memory.save(result.model_dump(mode="json"), ledger, report_md)
    c = result.change
    verdict = "significant" if c.significant else "not significant"
    rel = f"{c.relative * 100:+.1f}%" if c.relative is not None else "n/a"
    typer.echo(f"{printable(question.metric.expression)}: {rel} ({verdict}, p={c.p_value:.2g})")
    for rc in result.root_causes:
        seg = ", ".join(f"{k}={v}" for k, v in rc.segment.items())
        share = f"{rc.share * 100:.0f}%" if rc.share is not None else "n/a"
        typer.echo(f"  root cause: {printable(seg)}  ({rc.effect}, {share} of the change)")
    if result.global_shift is not None:
        typer.echo(f"  everything moved evenly ({result.global_shift.effect})")
    for d in result.data_quality:
        typer.echo(f"  data quality: {printable(d.message)}")
    typer.echo(f"wrote {printable(out / 'report.md')} and {printable(out / 'result.json')}")


def _fetch_uploads(data: list[Path], out: Path) -> list[Path]:
    """``supabase://bucket/prefix`` locations downloaded (and verified) into OUT/uploads."""
    local: list[Path] = []
    for p in data:
        text = str(p)
        if not text.startswith("supabase:"):
            local.append(p)
            continue
        from tasks.storage import download_uploads

        url = "supabase://" + text[len("supabase:") :].lstrip("/")
        got = download_uploads(url, out / "uploads")
        typer.echo(f"downloaded {len(got)} file(s) from {printable(url)}", err=True)
        local += got
    return local


class _Memory:
    """The investigation store for one run: recall before hypotheses, save at the end. A store
    that cannot be opened or written is reported, never fatal: the outputs are already written."""

    def __init__(self, ctx: Any, question: Any, result: Any) -> None:
        from tasks import persist

        self.q, self.data = question, persist.fingerprint(ctx)
        self.run_id = persist.run_id(self.data, persist.question_dict(question))
        self._pre = result.model_dump(mode="json")

    def _store(self) -> Any:
        from tasks.store import store_from_config

        return store_from_config()

    def recall(self) -> dict[str, Any] | None:
        from tasks import persist
        from tasks.store import StoreError

        try:
            with self._store() as store:
                similar, dismissed = persist.recall(store, self.q, self._pre, exclude=self.run_id)
        except (StoreError, OSError) as exc:
            typer.echo(f"warning: past investigations unavailable: {printable(exc)}", err=True)
            return None
        if similar:
            typer.echo(f"{len(similar)} similar past investigation(s) found", err=True)
        return {"similar": similar, "dismissed": dismissed}

    def save(self, result: dict[str, Any], ledger: Any, report_md: str) -> None:
        from tasks import persist
        from tasks.store import StoreError

        evidence = [e.model_dump(mode="json") for e in ledger.entries]
        rec = persist.record(self.run_id, self.data, self.q, result, evidence, report_md)
        try:
            with self._store() as store:
                store.save_investigation(rec)
        except (StoreError, OSError) as exc:
            typer.echo(f"warning: investigation not remembered: {printable(exc)}", err=True)
            return
        typer.echo(f"remembered as {self.run_id}", err=True)


@app.command()
def investigate(
    data: Annotated[
        list[Path], typer.Argument(help="CSV/CSV.gz/Parquet files or folders, or one .duckdb file.")
    ],
    metric: Annotated[
        str,
        typer.Option(
            help="sum(x), count(*), count(distinct x), avg(x), a ratio of two, or a metrics.yaml name."
        ),
    ],
    baseline: Annotated[
        str, typer.Option(help="YYYY-MM-DD:YYYY-MM-DD (inclusive), or a period label.")
    ],
    comparison: Annotated[str, typer.Option(help="Same form as --baseline.")],
    table: Annotated[
        str | None, typer.Option(help="Table holding the metric (default: inferred).")
    ] = None,
    time_column: Annotated[
        str | None, typer.Option(help="Date column for date ranges (default: detected).")
    ] = None,
    period_column: Annotated[
        str | None, typer.Option(help="Column whose labels name the periods.")
    ] = None,
    grain: Annotated[
        str | None, typer.Option(help="'day': per-day value averaged over the period.")
    ] = None,
    dimensions: Annotated[
        str | None, typer.Option(help="Columns to search, a,b,users.c (default: all dimensions).")
    ] = None,
    filter_: Annotated[
        list[str] | None,
        typer.Option("--filter", help="Row filter such as country=US (repeatable)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for report.md and result.json.")] = Path(
        "drilldown-out"
    ),
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file to load into (default: OUT/data.duckdb).")
    ] = None,
    max_depth: Annotated[int, typer.Option(help="Most columns combined in one segment.")] = 3,
    min_support: Annotated[
        float | None, typer.Option(help="Smallest volume share of a segment.")
    ] = None,
    metrics_file: Annotated[
        Path | None, typer.Option(help="metrics.yaml with named metrics.")
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            help="Investigate with the offline planner (no network); the default without "
            "ANTHROPIC_API_KEY."
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="Anthropic model (default claude-sonnet-5-5).")
    ] = None,
    remember: Annotated[
        bool,
        typer.Option(help="Recall similar past investigations and remember this one."),
    ] = True,
) -> None:
    """Explain why a metric moved between two periods: report.md and result.json in --out."""
    _investigate(
        data,
        metric=metric,
        baseline=baseline,
        comparison=comparison,
        out=out,
        db=db,
        table=table,
        time_column=time_column,
        period_column=period_column,
        grain=grain,
        dimensions=dimensions,
        filters=filter_,
        max_depth=max_depth,
        min_support=min_support,
        metrics_file=metrics_file,
        offline=offline,
        model=model,
        remember=remember,
    )


@app.command()
def history(
    text: Annotated[str, typer.Argument(help="What happened, in your words.")],
    limit: Annotated[int, typer.Option(help="How many to list.")] = 5,
) -> None:
    """Past investigations similar to TEXT: score, date, metric, periods, root causes, run id."""
    from tasks.store import StoreError, store_from_config
    from tasks.store.history import format_history, similar_investigations

    if limit < 1:
        fail("--limit must be at least 1", 2)
    try:
        with store_from_config() as store:
            rows = similar_investigations(store, text, k=limit)
    except StoreError as exc:
        fail(str(exc))
    for line in format_history(rows).splitlines():
        typer.echo(printable(line))


@app.command()
def sync() -> None:
    """Send investigations kept locally while Supabase was unreachable."""
    from tasks.store import StoreError, flush_outbox

    try:
        result = flush_outbox()
    except StoreError as exc:
        fail(str(exc))
    typer.echo(printable(result.summary()))
    if result.remaining:
        raise typer.Exit(1)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Folder for report.md and result.json.")] = Path(
        "drilldown-demo"
    ),
) -> None:
    """Investigate the bundled demo data offline: why did revenue fall in the last week?"""
    root = Path(__file__).resolve().parent.parent / "data" / "demo"
    if not root.is_dir():
        fail(f"demo data not found at {root}")
    _investigate(
        [root / "events.csv", root / "users.csv"],
        metric="sum(revenue)",
        table="events",
        time_column="date",
        baseline="2024-03-18:2024-03-24",
        comparison="2024-03-25:2024-03-31",
        out=out,
    )
    typer.echo(f"\nThe report: {printable(out / 'report.md')}")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
