"""Root-cause localization accuracy on the public RCA cases (Squeeze B0, RobustSpot RS, RiskLoc S).

``python -m benchmarks.rca --data /work/shared/benchmarks/rca --out benchmarks/results/rca.json``

Each case (``<case>.json`` + ``<case>.csv[.gz]``, see the data's README) is loaded with the
product's loader into a fresh DuckDB file in a temporary directory and investigated with
``tasks.engine.explain.explain_change``: metric from the case (``sum(value)``, or a ratio of two sums),
periods = the ``period`` column's ``baseline`` and ``comparison`` labels, dimensions = the case's,
``max_depth`` = the product's default (or ``--max-depth``), ``min_support`` = 0. The
prediction is the list of root-cause segments; it is scored element-level exact match, micro-F1
(see :mod:`benchmarks.rca_score`). Each case runs in a forked child with a time limit; a case
that crashes or times out counts as an empty prediction and is reported.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import multiprocessing
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._machine import machine_facts, machine_line
from benchmarks.rca_score import canonical_set, case_counts, micro_scores

DEFAULT_PREDICTOR = "tasks.engine.explain:explain_change"
TABLE = "cube"

# Best published micro-F1 per dataset, from the data's README (full datasets, authors' code).
PUBLISHED_BEST = {
    "B0": "RiskLoc 0.961",
    "RS": "RobustSpot 0.419",
    "S": "RiskLoc 0.507",
}

Predictor = Callable[[Path, Any], Any]


@dataclass(frozen=True)
class Case:
    """One labelled case: its metadata and the path of its leaf table."""

    case_id: str
    dataset: str
    group: str
    dimensions: tuple[str, ...]
    metric: dict[str, Any]
    root_causes: list[dict[str, Any]]
    csv: Path


# --------------------------------------------------------------------------------------------
# cases


def _case_csv(json_path: Path) -> Path | None:
    stem = json_path.name[: -len(".json")]
    for suffix in (".csv", ".csv.gz"):
        p = json_path.with_name(stem + suffix)
        if p.is_file():
            return p
    return None


def discover(
    data: Path,
    datasets: Sequence[str] | None = None,
    per_dataset: int | None = None,
    only: Sequence[str] = (),
) -> list[Case]:
    """The cases under ``data`` (one folder per dataset), sorted by id within each dataset.

    Args:
        data: The folder holding ``B0/``, ``RS/``, ``S/``...
        datasets: Dataset folders to use (all when None), in this order.
        per_dataset: Keep the first N cases of each dataset.
        only: Keep only cases whose id contains one of these strings.
    """
    names = list(datasets) if datasets else sorted(p.name for p in data.iterdir() if p.is_dir())
    cases: list[Case] = []
    for name in names:
        folder = data / name
        if not folder.is_dir():
            raise SystemExit(f"{folder}: no such dataset folder")
        found: list[Case] = []
        for jp in sorted(folder.glob("*.json")):
            meta = json.loads(jp.read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or "case_id" not in meta or "root_causes" not in meta:
                continue  # index.json and the like
            if only and not any(s in meta["case_id"] for s in only):
                continue
            csv = _case_csv(jp)
            if csv is None:
                raise SystemExit(f"{jp}: no .csv or .csv.gz beside it")
            found.append(
                Case(
                    case_id=meta["case_id"],
                    dataset=meta.get("dataset", name),
                    group=meta.get("group", name),
                    dimensions=tuple(meta["dimensions"]),
                    metric=meta["metric"],
                    root_causes=meta["root_causes"],
                    csv=csv,
                )
            )
        cases.extend(found[:per_dataset] if per_dataset else found)
    return cases


# --------------------------------------------------------------------------------------------
# question

_SUM = re.compile(r"^\s*sum\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$", re.IGNORECASE)


def _sum_column(text: str) -> str:
    m = _SUM.match(text)
    if not m:
        raise ValueError(f"unsupported metric part {text!r}: expected sum(column)")
    return m.group(1)


def metric_columns(metric: dict[str, Any]) -> tuple[str, str | None]:
    """``(numerator column, denominator column or None)`` of a case's metric, both sums."""
    kind = metric.get("type")
    if kind == "sum" and metric.get("column"):
        return metric["column"], None
    if kind == "ratio" and metric.get("numerator") and metric.get("denominator"):
        return metric["numerator"], metric["denominator"]
    formula = metric.get("formula", "")
    num, sep, den = formula.partition("/")
    return _sum_column(num), (_sum_column(den) if sep else None)


def build_question(case: Case, table: str, max_depth: int | None = None) -> Any:
    """The engine's Question for a case (imports the engine's models)."""
    from tasks.engine.spec import Aggregate, Metric, Periods, Question

    num, den = metric_columns(case.metric)
    metric = Metric(
        table=table,
        numerator=Aggregate(fn="sum", column=num),
        denominator=Aggregate(fn="sum", column=den) if den else None,
    )
    # no cap: the product's default depth (every column while the segments stay within budget)
    depth = None if max_depth is None else max(1, min(len(case.dimensions), max_depth, 6))
    return Question(
        metric=metric,
        periods=Periods(period_column="period", baseline="baseline", comparison="comparison"),
        dimensions=case.dimensions,
        max_depth=depth,
        min_support=0.0,
    )


# --------------------------------------------------------------------------------------------
# one case


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


def _segment(seg: Any) -> dict[str, Any]:
    """A root cause's ``{column: value}``, from a Segment model or a plain dict."""
    raw = seg.segment if hasattr(seg, "segment") else seg.get("segment", seg)
    return {str(k): _json_safe(v) for k, v in dict(raw).items()}


def _detail(seg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"segment": _segment(seg)}
    for key in ("contribution", "share", "effect", "significant", "p_value"):
        v = getattr(seg, key, None) if not isinstance(seg, dict) else seg.get(key)
        if v is not None:
            out[key] = _json_safe(v)
    return out


def _stats(explanation: Any) -> dict[str, Any] | None:
    stats = getattr(explanation, "stats", None)
    if not stats:
        return None
    text = json.dumps(stats, default=str)
    return json.loads(text) if len(text) <= 4000 else {"truncated": text[:4000]}


def load_case(case: Case, workdir: Path) -> tuple[Path, int]:
    """Load a case's CSV into ``workdir/case.duckdb`` as table ``cube``; ``(db, rows)``."""
    from tasks.ingest.load import LoadOptions, load_files

    suffix = ".csv.gz" if case.csv.name.endswith(".gz") else ".csv"
    named = workdir / f"{TABLE}{suffix}"  # the table is named after the file
    try:  # a hard link costs no copy; the loader refuses a symbolic link out of its folder
        os.link(case.csv.resolve(), named)
    except OSError:  # another file system
        shutil.copyfile(case.csv, named)
    db = workdir / "case.duckdb"
    report = load_files([named], db, LoadOptions())
    return db, report.tables[0].rows


def _new_record(case: Case) -> dict[str, Any]:
    return {
        "case_id": case.case_id,
        "dataset": case.dataset,
        "group": case.group,
        "dimensions": list(case.dimensions),
        "metric": case.metric.get("formula"),
        "truth": case.root_causes,
        "predicted": [],
        "error": None,
        "seconds_load": None,
        "seconds_explain": None,
    }


def run_case(
    case: Case,
    predict: Predictor,
    max_depth: int | None,
    workdir: Path,
    on_loaded: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Load, explain and score one case in this process; errors are recorded, not raised."""
    rec = _new_record(case)
    stage = "load"
    try:
        t0 = time.perf_counter()
        db, rows = load_case(case, workdir)
        rec["seconds_load"] = round(time.perf_counter() - t0, 4)
        rec["rows"] = rows
        if on_loaded is not None:
            on_loaded({"seconds_load": rec["seconds_load"], "rows": rows})
        stage = "question"
        question = build_question(case, TABLE, max_depth)
        rec["max_depth"] = question.max_depth  # None: the product default
        stage = "explain"
        t0 = time.perf_counter()
        explanation = predict(db, question)
        rec["seconds_explain"] = round(time.perf_counter() - t0, 4)
        stage = "result"
        causes = list(getattr(explanation, "root_causes", None) or [])
        rec["predicted"] = [_segment(s) for s in causes]
        rec["root_causes"] = [_detail(s) for s in causes]
        rec["explained_share"] = _json_safe(getattr(explanation, "explained_share", None))
        rec["engine_stats"] = _stats(explanation)
    except Exception as e:  # noqa: BLE001 - a crashing case is a result, not a harness failure
        rec["error"] = f"{stage}: {type(e).__name__}: {e}"[:2000]
        rec["traceback"] = traceback.format_exc()[-4000:]
    return _score(rec)


def _score(rec: dict[str, Any]) -> dict[str, Any]:
    c = case_counts(rec["predicted"], rec["truth"])
    rec.update(tp=c.tp, fp=c.fp, fn=c.fn, exact=c.exact)
    return rec


def _child(conn: Any, case: Case, predict: Predictor, max_depth: int | None, base: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="case-", dir=base) as tmp:
        rec = run_case(case, predict, max_depth, Path(tmp), lambda m: conn.send(("loaded", m)))
    conn.send(("done", rec))
    conn.close()


def run_case_isolated(
    case: Case, predict: Predictor, max_depth: int | None, timeout: float, base: Path
) -> dict[str, Any]:
    """:func:`run_case` in a forked child: a hang, a crash or a memory blow-up stays there.

    The child works in a folder under ``base``, which the caller removes at the end. A child
    that is killed at ``timeout`` seconds or dies leaves an empty prediction and an error.
    """
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, case, predict, max_depth, base), daemon=True)
    t0 = time.perf_counter()
    deadline = t0 + timeout
    proc.start()
    child.close()
    partial: dict[str, Any] = {}
    rec = None
    try:
        while rec is None and parent.poll(max(0.0, deadline - time.perf_counter())):
            kind, payload = parent.recv()
            if kind == "loaded":
                partial.update(payload)
            else:
                rec = payload
    except EOFError:
        pass
    proc.join(5 if rec is not None else 0.1)
    if proc.is_alive():
        proc.kill()
        proc.join()
    if rec is not None:
        return rec
    wall = round(time.perf_counter() - t0, 2)
    rec = _new_record(case)
    rec.update(partial)
    rec["seconds_wall"] = wall
    if time.perf_counter() >= deadline:
        rec["error"] = f"child: timeout after {timeout:g} s"
    else:
        rec["error"] = f"child: died with exit code {proc.exitcode}"
    return _score(rec)


# --------------------------------------------------------------------------------------------
# summary


def _seconds(values: list[float | None]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "mean": None, "max": None, "total": None}
    return {
        "median": round(statistics.median(vals), 4),
        "mean": round(statistics.fmean(vals), 4),
        "max": round(max(vals), 4),
        "total": round(sum(vals), 2),
    }


def error_kinds(recs: list[dict[str, Any]]) -> dict[str, int]:
    """Why predictions missed: each FP and FN by its relation to the other side.

    A false positive is a *descendant* of a label (too specific), an *ancestor* (too general),
    an unrelated *leaf* (a segment over every dimension: usually one noisy leaf), or
    *unrelated*. A false negative is *covered by a descendant* / *by an ancestor* that was
    predicted, or *missed* outright.
    """
    kinds: dict[str, int] = {}

    def bump(key: str) -> None:
        kinds[key] = kinds.get(key, 0) + 1

    for r in recs:
        pred, true = canonical_set(r["predicted"]), canonical_set(r["truth"])
        for p in pred - true:
            if any(p > t for t in true):
                bump("fp_descendant")
            elif any(p < t for t in true):
                bump("fp_ancestor")
            elif len(p) == len(r["dimensions"]):
                bump("fp_unrelated_leaf")
            else:
                bump("fp_unrelated")
        for t in true - pred:
            if any(p > t for p in pred):
                bump("fn_descendant_predicted")
            elif any(p < t for p in pred):
                bump("fn_ancestor_predicted")
            else:
                bump("fn_missed")
        if not pred:
            bump("cases_empty_prediction")
    return dict(sorted(kinds.items()))


def _summary_of(recs: list[dict[str, Any]]) -> dict[str, Any]:
    s = micro_scores((r["predicted"], r["truth"]) for r in recs)
    s["errors"] = sum(1 for r in recs if r["error"])
    s["error_kinds"] = error_kinds(recs)
    s["seconds_load"] = _seconds([r["seconds_load"] for r in recs])
    s["seconds_explain"] = _seconds([r["seconds_explain"] for r in recs])
    return s


def half(case_id: str) -> str:
    """The fixed tuning split: half A when the last hex digit of the MD5 of the case id is even,
    else B. Rules are chosen on one half and confirmed on the other."""
    return "A" if int(hashlib.md5(case_id.encode()).hexdigest()[-1], 16) % 2 == 0 else "B"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Micro scores and timings per dataset, per half of each dataset, per group (setting) and
    over all cases."""
    by_ds: dict[str, list[dict[str, Any]]] = {}
    by_half: dict[str, list[dict[str, Any]]] = {}
    by_group: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_ds.setdefault(r["dataset"], []).append(r)
        by_half.setdefault(f"{r['dataset']}/{half(r['case_id'])}", []).append(r)
        by_group.setdefault(f"{r['dataset']}/{r['group']}", []).append(r)
    return {
        "by_dataset": {k: _summary_of(v) for k, v in by_ds.items()},
        "by_half": {k: _summary_of(v) for k, v in sorted(by_half.items())},
        "by_group": {k: _summary_of(v) for k, v in sorted(by_group.items())},
        "all": _summary_of(records),
    }


def half_table(summary: dict[str, Any]) -> str:
    """F1, precision and recall per half of each dataset, as markdown."""
    lines = [
        "| dataset / half | cases | TP | FP | FN | precision | recall | F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summary["by_half"].items():
        lines.append(
            f"| {name} | {s['n_cases']} | {s['tp']} | {s['fp']} | {s['fn']} "
            f"| {_f(s['precision'])} | {_f(s['recall'])} | {_f(s['f1'])} |"
        )
    return "\n".join(lines)


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def markdown_table(summary: dict[str, Any], facts: dict[str, Any] | None = None) -> str:
    """The per-dataset table, as markdown."""
    lines = [
        "| dataset | cases | TP | FP | FN | precision | recall | **F1** | exact sets | errors "
        "| explain s/case (median / max) | load s/case (median) | best published (full set) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = list(summary["by_dataset"].items()) + [("all", summary["all"])]
    for name, s in rows:
        ex, ld = s["seconds_explain"], s["seconds_load"]
        lines.append(
            f"| {name} | {s['n_cases']} | {s['tp']} | {s['fp']} | {s['fn']} "
            f"| {_f(s['precision'])} | {_f(s['recall'])} | **{_f(s['f1'])}** "
            f"| {_f(s['exact_set_accuracy'], 2)} | {s['errors']} "
            f"| {_f(ex['median'], 2)} / {_f(ex['max'], 2)} | {_f(ld['median'], 2)} "
            f"| {PUBLISHED_BEST.get(name, '')} |"
        )
    if facts:
        lines.append("")
        lines.append(f"Machine: {machine_line(facts)}.")
    return "\n".join(lines)


def group_table(summary: dict[str, Any]) -> str:
    """Micro-F1 per setting (B0's cuboid layer x number of elements), as markdown."""
    lines = ["| setting | cases | TP | FP | FN | F1 |", "|---|---|---|---|---|---|"]
    for name, s in summary["by_group"].items():
        lines.append(
            f"| {name} | {s['n_cases']} | {s['tp']} | {s['fp']} | {s['fn']} | {_f(s['f1'])} |"
        )
    return "\n".join(lines)


def _elements(elements: list[dict[str, Any]]) -> str:
    """``a=a1&b=b2; c=c3``, sorted, for reading misses."""
    parts = sorted("&".join(f"{k}={v}" for k, v in sorted(e)) for e in canonical_set(elements))
    return "; ".join(parts) if parts else "(none)"


def misses(records: list[dict[str, Any]], limit: int | None = None) -> str:
    """One line per case that was not an exact match: truth vs prediction (and the error)."""
    out = []
    for r in records:
        if r["exact"] and not r["error"]:
            continue
        line = f"- {r['case_id']}: truth {_elements(r['truth'])} | predicted {_elements(r['predicted'])}"
        if r["error"]:
            line += f" | ERROR {r['error'].splitlines()[0][:200]}"
        out.append(line)
    if limit is not None and len(out) > limit:
        out = out[:limit] + [f"- ... {len(out) - limit} more in the JSON"]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# command line


def resolve_predictor(spec: str) -> Predictor:
    """``module:function`` to the function (default: the engine's ``explain_change``)."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr or "explain_change")
    except (ImportError, AttributeError) as e:
        raise SystemExit(f"predictor {spec}: cannot be imported ({e})") from None


def _write(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n")
    tmp.replace(out)


def _run_one(case: Case, predict: Predictor, args: argparse.Namespace, base: Path) -> dict:
    if args.in_process:
        with tempfile.TemporaryDirectory(prefix="case-", dir=base) as tmp:
            return run_case(case, predict, args.max_depth, Path(tmp))
    return run_case_isolated(case, predict, args.max_depth, args.timeout, base)


def _print_case(i: int, n: int, rec: dict[str, Any]) -> None:
    mark = "ok " if rec["exact"] and not rec["error"] else ("ERR" if rec["error"] else "   ")
    error = f"  {rec['error'].splitlines()[0][:160]}" if rec["error"] else ""
    print(
        f"[{i}/{n}] {mark} {rec['case_id']}: TP {rec['tp']} FP {rec['fp']} FN {rec['fn']}  "
        f"load {_f(rec['seconds_load'], 2)} s  explain {_f(rec['seconds_explain'], 2)} s{error}",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data", type=Path, required=True, help="folder of dataset folders")
    ap.add_argument("--datasets", help="comma-separated dataset folders, e.g. B0,RS,S (all)")
    ap.add_argument("--cases", type=int, help="first N cases of each dataset")
    ap.add_argument("--case", action="append", default=[], help="only case ids containing this")
    ap.add_argument("--max-depth", type=int, help="cap on max_depth (default: number of dims)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case (600)")
    ap.add_argument("--predictor", default=DEFAULT_PREDICTOR, help="module:function(db, question)")
    ap.add_argument("--in-process", action="store_true", help="no forked child per case (debug)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/rca.json"))
    ap.add_argument("--quiet", action="store_true", help="no line per case")
    args = ap.parse_args(argv)

    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()] if args.datasets else None
    cases = discover(args.data, datasets, args.cases, args.case)
    if not cases:
        raise SystemExit("no cases found")
    # Import the loader and the engine once here, not in every forked child.
    import tasks.engine.spec  # noqa: F401
    import tasks.ingest.load  # noqa: F401

    predict = resolve_predictor(args.predictor)
    facts = machine_facts("pydantic", "prefect")
    run = {
        "argv": sys.argv if argv is None else ["benchmarks.rca", *argv],
        "data": str(args.data),
        "predictor": args.predictor,
        "max_depth_cap": args.max_depth,
        "timeout": args.timeout,
        "machine": facts,
    }
    records: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="md-rca-"))
    try:
        for i, case in enumerate(cases, 1):
            rec = _run_one(case, predict, args, base)
            records.append(rec)
            if not args.quiet:
                _print_case(i, len(cases), rec)
            _write(args.out, {"run": run, "summary": summarize(records), "cases": records})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    run["seconds_total"] = round(time.perf_counter() - t_all, 2)
    summary = summarize(records)
    _write(args.out, {"run": run, "summary": summary, "cases": records})

    print()
    print(markdown_table(summary, facts))
    print()
    print(half_table(summary))
    if len(summary["by_group"]) > len(summary["by_dataset"]):
        print()
        print(group_table(summary))
    print()
    print("Misses by kind (fp_descendant = too specific, fp_ancestor = too general):")
    for name, s in summary["by_dataset"].items():
        kinds = ", ".join(f"{k} {v}" for k, v in s["error_kinds"].items()) or "none"
        print(f"- {name}: {kinds}")
    text = misses(records, limit=40)
    if text:
        print()
        print("Not exact (truth | predicted):")
        print(text)
    print(f"\nwrote {args.out} ({len(records)} cases, {run['seconds_total']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
