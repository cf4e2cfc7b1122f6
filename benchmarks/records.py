"""Before/after records: everything the product answers, written so two commits compare file by file.

``python -m benchmarks.records write --data ../shared/benchmarks/rca --out DIR [--only PART,...]``
``python -m benchmarks.records compare DIR_BEFORE DIR_AFTER``

``write`` runs the product on fixed inputs and writes one folder per part, one file per case:

* ``scenarios``: every planted scenario of ``data/scenarios`` investigated offline through the
  CLI (``drilldown investigate ... --offline --no-remember``, HOME a fresh temporary folder):
  its ``result.json``, ``report.md``, exit code, printed text and the names of the files it wrote.
* ``rca``: every public root-cause case under ``--data`` run by :mod:`benchmarks.rca`'s own
  machinery: the prediction, the scored counts and the engine's whole answer.
* ``families``: :mod:`benchmarks.families`' answer per draw on the report seed range,
  :data:`FAMILY_DRAWS` draws per family (named segments, global shift, significance, drivers).
* ``golden``: the SQL text of every golden statement (``tests/sql_tools/test_golden_sql.py``) in
  every dialect, and of every construct of ``tests/sql_tools/test_dialects.py``.

What varies from run to run is replaced by a fixed token (:func:`normalise`): timings, run ids,
the run's dates and times, and temporary paths. ``compare`` prints, per part, ``identical`` or
the first differences, and exits 1 when anything differs. ``DIR/run.json`` (the commit, the
settings and each part's wall time) is written beside the parts and not compared.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "data" / "scenarios"
PARTS = ("scenarios", "rca", "families", "golden")
FAMILY_DRAWS = 15  # draws per family on the report range: fixed, so records stay comparable
FAMILY_RANGE = "report"
CASE_TIMEOUT = 900.0  # seconds per scenario, case or draw
# The product stops a query after 15 s of wall time: on a loaded machine a case can fail on
# that alone. Such a case is run again, up to this many times, before its failure is recorded.
RETRIES = 3
TIME_LIMIT = ("exceeded the time limit", "exceeded maximum execution time")  # tools' and DuckDB's


def hit_time_limit(text: str | None) -> bool:
    return any(marker in (text or "") for marker in TIME_LIMIT)


def retried(label: str, attempt: int) -> None:
    print(
        f"{label}: a query hit the time limit, attempt {attempt + 2} of {RETRIES + 1}", flush=True
    )


# --------------------------------------------------------------------------------------------
# what varies from run to run

VARYING_KEYS = (
    "elapsed_ms",
    "query_ms",
    "[a-z_]*_ms",
    "ms",
    "seconds[a-z_]*",
    "[a-z_]*_seconds",
    "run_id",
    "created_at",
    "started_at",
    "finished_at",
    "generated_at",
    "digest",  # a hash of a query's rows: it follows their last digits (below)
)
_KEY_VALUE = re.compile(
    r'("(?:' + "|".join(VARYING_KEYS) + r')"\s*:\s*)(-?\d[\d.eE+-]*|"[^"\n]*"|null)'
)
_CLOCK = r"(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"
_DURATION = re.compile(r"\(\d+(?:\.\d+)? ?(ms|s)\)")  # a log line's "(422 ms)"
# DuckDB sums doubles in parallel, in an order that varies: a sum's last digits differ from run
# to run (35740.28 / 35740.280000000006). ``compare`` holds two numbers equal within TOLERANCE.
TOLERANCE = 1e-9
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def run_days() -> set[str]:
    """Today and yesterday (UTC and local): the dates a run may stamp."""
    now = [datetime.now(UTC), datetime.now()]
    return {(d - timedelta(days=k)).date().isoformat() for d in now for k in (0, 1)}


def normalise(text: str, paths: dict[str, str] | None = None) -> str:
    """``text`` with what varies between two runs of the same commit replaced by fixed tokens:
    the given paths (longest first) by their names, the values of :data:`VARYING_KEYS` in JSON,
    durations in parentheses, UUIDs, and the dates of the run (with their times of day)."""
    for path, token in sorted((paths or {}).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, token)
    text = _KEY_VALUE.sub(lambda m: m.group(1) + '"<varies>"', text)
    text = _DURATION.sub(r"(<varies> \1)", text)
    text = _UUID.sub("<uuid>", text)
    for day in sorted(run_days()):  # a date of the run, with its time of day if it has one
        text = re.sub(re.escape(day) + _CLOCK, "<run time>", text)
    return text


def close(a: str, b: str) -> bool:
    """The texts are equal once each pair of numbers is read as equal within :data:`TOLERANCE`
    (relative, or absolute near zero)."""
    if _NUMBER.split(a) != _NUMBER.split(b):
        return False
    pairs = zip(_NUMBER.findall(a), _NUMBER.findall(b), strict=True)
    return all(
        x == y or abs(float(x) - float(y)) <= TOLERANCE * max(1.0, abs(float(x)), abs(float(y)))
        for x, y in pairs
    )


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n"


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def run_parallel(
    fn: Callable[..., Any], items: Sequence[Any], jobs: int, processes: bool
) -> Iterator[Any]:
    """``fn(item)`` for every item, ``jobs`` at a time (forked processes or threads), in order,
    each yielded as soon as it and those before it are done."""
    if jobs <= 1:
        yield from map(fn, items)
        return
    if processes:
        ctx = multiprocessing.get_context("fork")
        pool: concurrent.futures.Executor = concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=ctx
        )
    else:
        pool = concurrent.futures.ThreadPoolExecutor(jobs)
    with pool:
        yield from pool.map(fn, items)


# --------------------------------------------------------------------------------------------
# scenarios: the CLI, as a user runs it


TEXT_OUTPUTS = (".json", ".md", ".html", ".jsonl", ".log")  # the charts and the data are left out


def scenario_names() -> list[str]:
    return sorted(p.parent.name for p in SCENARIOS.glob("*/expected.json"))


def investigate_args(name: str, out: Path) -> list[str]:
    """The command line tests/engine/test_scenarios.py runs, offline and remembering nothing."""
    exp = json.loads((SCENARIOS / name / "expected.json").read_text())
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
        "--no-remember",
        "--out",
        str(out),
    ]
    if exp.get("grain"):
        args += ["--grain", exp["grain"]]
    if exp.get("dimensions"):
        args += ["--dimensions", ",".join(exp["dimensions"])]
    return args


def _clean_env(home: Path) -> dict[str, str]:
    """The caller's environment without the product's own settings or keys, HOME in ``home``."""
    drop = ("DRILLDOWN_", "ANTHROPIC_", "PREFECT_", "SUPABASE_", "DATABASE_URL", "PG")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_HOME=str(home / ".prefect"),
        DRILLDOWN_STORE_PATH=str(home / "store.duckdb"),
        TZ="UTC",
    )
    return env


def record_scenario(name: str) -> dict[str, str]:
    """One scenario investigated in a fresh temporary HOME: ``{file name: normalised text}``."""
    with tempfile.TemporaryDirectory(prefix=f"records-{name}-") as tmp:
        home, out = Path(tmp) / "home", Path(tmp) / "out"
        home.mkdir()
        args = investigate_args(name, out)
        for attempt in range(RETRIES + 1):
            shutil.rmtree(out, ignore_errors=True)
            proc = subprocess.run(
                [sys.executable, "-m", "drilldown.cli", *args],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=_clean_env(home),
                timeout=CASE_TIMEOUT,
            )
            if proc.returncode == 0 or not hit_time_limit(proc.stderr) or attempt == RETRIES:
                break
            retried(f"scenarios/{name}", attempt)
        paths = {str(out): "<out>", str(home): "<home>", tmp: "<tmp>", str(ROOT): "<root>"}
        files = {
            "command.json": dump({"args": args, "exit_code": proc.returncode}),
            "stdout.txt": proc.stdout,
            "stderr.txt": proc.stderr,
        }
        written = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.is_dir() else []
        files["written.json"] = dump(written)
        for rel in written:
            path = out / rel
            if path.is_file() and path.suffix in TEXT_OUTPUTS:
                files[rel] = path.read_text(encoding="utf-8")
        return {f"{name}/{k}": normalise(v, paths) for k, v in files.items()}


def write_scenarios(out: Path, args: argparse.Namespace) -> int:
    names = scenario_names()
    for files in run_parallel(record_scenario, names, args.jobs, processes=False):
        for rel, text in files.items():
            write_text(out / rel, text)
    return len(names)


# --------------------------------------------------------------------------------------------
# rca: the public root-cause cases, through benchmarks.rca


_ANSWERS: list[Any] = []


def _explain_and_keep(db: Path, question: Any) -> Any:
    """The benchmark's predictor, keeping the engine's whole answer for the record."""
    from benchmarks.rca import resolve_predictor

    explanation = resolve_predictor("tasks.engine.explain:explain_change")(db, question)
    _ANSWERS.append(explanation)
    return explanation


def _answer_json(explanation: Any) -> Any:
    if hasattr(explanation, "model_dump_json"):
        return json.loads(explanation.model_dump_json())
    return json.loads(json.dumps(explanation, default=str))


def record_rca_case(case: Any) -> tuple[str, str]:
    """``(file name, normalised record)`` of one case, run by :func:`benchmarks.rca.run_case`."""
    from benchmarks.rca import run_case

    with tempfile.TemporaryDirectory(prefix="records-rca-") as tmp:
        for attempt in range(RETRIES + 1):
            _ANSWERS.clear()
            work = Path(tmp) / str(attempt)
            work.mkdir()
            rec = run_case(case, _explain_and_keep, None, work)
            if not hit_time_limit(rec.get("error")) or attempt == RETRIES:
                break
            retried(f"rca/{case.case_id}", attempt)
        answer = _answer_json(_ANSWERS[-1]) if _ANSWERS else None
        rec = {k: v for k, v in rec.items() if k != "engine_stats"}
        if rec.get("traceback"):  # the frames name files of this checkout: the last line tells
            rec["traceback"] = rec["traceback"].strip().splitlines()[-1]
        text = dump({"record": rec, "answer": answer})
        paths = {str(work): "<tmp>", str(ROOT): "<root>", str(case.csv.parent): "<data>"}
        return f"{case.dataset}/{case.case_id}.json", normalise(text, paths)


def write_rca(out: Path, args: argparse.Namespace) -> int:
    from benchmarks.rca import discover

    # import the loader and the engine once, before the workers fork
    import tasks.engine.explain  # noqa: F401
    import tasks.ingest.load  # noqa: F401

    cases = discover(args.data)
    for rel, text in run_parallel(record_rca_case, cases, args.jobs, processes=True):
        write_text(out / rel, text)
    return len(cases)


# --------------------------------------------------------------------------------------------
# families: benchmarks.families' answers on the report range


FAMILY_KEPT = ("family", "seed", "question", "planted", "got", "exact", "reasons")
FAMILY_KEPT += ("missed_evidence", "error")


def write_families(out: Path, args: argparse.Namespace) -> int:
    from benchmarks.families import FAMILIES, RANGES, run_many

    first = RANGES[FAMILY_RANGE]
    tasks = [(f, first + i) for f in FAMILIES for i in range(FAMILY_DRAWS)]
    settings = {"range": FAMILY_RANGE, "draws_per_family": FAMILY_DRAWS, "families": FAMILIES}
    write_text(out / "settings.json", dump(settings))
    todo = tasks
    for attempt in range(RETRIES + 1):
        again = []
        for rec in run_many(todo, args.jobs, CASE_TIMEOUT):
            if hit_time_limit(rec.get("error")) and attempt < RETRIES:
                retried(f"families/{rec['family']}/{rec['seed']}", attempt)
                again.append((rec["family"], rec["seed"]))
                continue
            kept = {k: rec.get(k) for k in FAMILY_KEPT}
            write_text(out / rec["family"] / f"{rec['seed']}.json", normalise(dump(kept)))
        todo = again
        if not todo:
            break
    return len(tasks)


# --------------------------------------------------------------------------------------------
# golden: the SQL text of every golden statement, per dialect


def write_golden(out: Path, args: argparse.Namespace) -> int:
    from sql_tools import ToolContext
    from sql_tools.dialects import DIALECTS, DialectError, render
    from tasks.ingest.load import load_files
    from tests.sql_tools import test_dialects, test_golden_sql

    n = 0
    with tempfile.TemporaryDirectory(prefix="records-golden-") as tmp:
        paths = []
        for name in ("sales.csv", "customers.csv", "visits.csv"):
            shutil.copy(test_golden_sql.DATA / name, Path(tmp) / name)
            paths.append(Path(tmp) / name)
        db = Path(tmp) / "shop.duckdb"
        load_files(paths, db)
        with ToolContext(db) as ctx:
            for name, (_, build) in test_golden_sql.CASES.items():
                query = build(test_golden_sql.SchemaOnly(ctx))  # type: ignore[arg-type]
                for dialect in DIALECTS:
                    text = test_golden_sql.golden_text(name, query, dialect)
                    write_text(out / "statements" / f"{name}.{dialect}.sql", text)
                    n += 1
    for case in test_dialects.CASES:
        name, tree = case[0], case[1]
        lines = []
        for dialect in DIALECTS:
            try:
                lines.append(f"-- {dialect}\n{render(tree, dialect)}")
            except DialectError as exc:
                lines.append(f"-- {dialect}\n-- not rendered: {exc}")
        slug = re.sub(r"\W+", "_", name).strip("_")
        write_text(out / "constructs" / f"{slug}.sql", "\n".join(lines) + "\n")
        n += 1
    return n


WRITERS: dict[str, Callable[[Path, argparse.Namespace], int]] = {
    "scenarios": write_scenarios,
    "rca": write_rca,
    "families": write_families,
    "golden": write_golden,
}


def git_commit() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or "unknown"


def write(args: argparse.Namespace) -> int:
    parts = [p.strip() for p in args.only.split(",")] if args.only else list(PARTS)
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise SystemExit(f"unknown part(s) {unknown}: choose from {', '.join(PARTS)}")
    if "rca" in parts and not (args.data and args.data.is_dir()):
        raise SystemExit("the rca part needs --data, the folder of B0/, RS/, S/")
    args.out.mkdir(parents=True, exist_ok=True)
    run_file = args.out / "run.json"
    run = json.loads(run_file.read_text()) if run_file.is_file() else {}
    run.update(commit=git_commit(), root=str(ROOT), jobs=args.jobs, data=str(args.data))
    run.setdefault("seconds", {})
    run.setdefault("cases", {})
    for part in parts:
        folder = args.out / part
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        t0 = time.perf_counter()
        n = WRITERS[part](folder, args)
        run["seconds"][part] = round(time.perf_counter() - t0, 1)
        run["cases"][part] = n
        write_text(run_file, dump(run))
        print(f"{part}: {n} cases in {run['seconds'][part]} s -> {folder}", flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# compare


def _files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}


def compare_part(before: Path, after: Path, show: int = 3, lines: int = 40) -> list[str]:
    """What differs between two records of one part (empty when identical)."""
    if not before.is_dir() or not after.is_dir():
        missing = [str(d) for d in (before, after) if not d.is_dir()]
        return [f"not recorded: {', '.join(missing)}"]
    a, b = _files(before), _files(after)
    out = [f"only before: {name}" for name in sorted(a.keys() - b.keys())]
    out += [f"only after: {name}" for name in sorted(b.keys() - a.keys())]
    changed, noise = [], 0
    for n in sorted(a.keys() & b.keys()):
        x, y = a[n].read_bytes(), b[n].read_bytes()
        if x != y and close(x.decode(errors="replace"), y.decode(errors="replace")):
            noise += 1
        elif x != y:
            changed.append(n)
    if noise:
        out.insert(0, f"(and {noise} file(s) equal within {TOLERANCE:g}: last digits of sums)")
    if changed:
        out.append(f"{len(changed)} file(s) differ")
    for name in changed[:show]:
        diff = difflib.unified_diff(
            a[name].read_text(errors="replace").splitlines(),
            b[name].read_text(errors="replace").splitlines(),
            fromfile=f"before/{name}",
            tofile=f"after/{name}",
            lineterm="",
            n=2,
        )
        out.extend(list(diff)[:lines])
    if len(changed) > show:
        out.append(f"... and {len(changed) - show} more: {', '.join(changed[show : show + 20])}")
    return out


def compare(args: argparse.Namespace) -> int:
    before, after = args.before, args.after
    parts = [p for p in PARTS if (before / p).is_dir() or (after / p).is_dir()]
    if not parts:
        raise SystemExit(f"no records in {before} or {after}")
    differs = False
    for part in parts:
        found = compare_part(before / part, after / part)
        noise = [line for line in found if line.startswith("(and ")]
        found = [line for line in found if not line.startswith("(and ")]
        differs = differs or bool(found)
        n = len(_files(before / part)) if (before / part).is_dir() else 0
        print(f"{part}: {'DIFFERS' if found else 'identical'} ({n} files before) {''.join(noise)}")
        for line in found:
            print(f"  {line}")
    return 1 if differs else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="record this checkout's answers into a folder")
    w.add_argument("--data", type=Path, help="folder of the rca datasets (B0/, RS/, S/)")
    w.add_argument("--out", type=Path, required=True, help="folder to write the records into")
    w.add_argument("--only", help=f"comma-separated parts (all): {','.join(PARTS)}")
    w.add_argument("--jobs", type=int, default=2, help="cases run at once (2)")
    c = sub.add_parser("compare", help="compare two record folders; exit 1 when they differ")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.command == "write":
        args.data = args.data.resolve() if args.data else None
        return write(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
