"""Peak memory and time of ``drilldown investigate`` on wide files and many dimensions.

``python -m benchmarks.wide`` investigates CSV files of 40, 120, 250, 300 and 480 three-value
columns x 420 rows (a cause planted in one column), and a DuckDB file of 2,000 such columns all
named with ``--dimensions``, each in a fresh process whose address space is capped
(``--address-space``, GiB); it records the exit code, the first line of any error, the wall time
and the resident peak (``ru_maxrss`` of the child, from ``os.wait4``), and whether the planted
cause came first. Writes ``benchmarks/results/wide.json`` and prints a markdown table.
The tests build their files with the same helpers (``tests/engine/test_resources.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
WEEKS = ("--baseline", "2024-03-04:2024-03-17", "--comparison", "2024-03-18:2024-03-31")
ROWS = 420


def wide_csv(path: Path, columns: int, rows: int, planted: int) -> None:
    """date, ``columns`` three-value columns c0.., purchases; in the second fortnight nothing is
    bought where column ``c{planted}`` is "a"."""
    rng = random.Random(7)
    lines = [",".join(["date", *[f"c{j}" for j in range(columns)], "purchases"])]
    for i in range(rows):
        day = date(2024, 3, 4) + timedelta(days=i % 28)
        values = [rng.choice("abc") for _ in range(columns)]
        bought = rng.randint(5, 15)
        if day >= date(2024, 3, 18) and values[planted] == "a":
            bought = 0
        lines.append(",".join([day.isoformat(), *values, str(bought)]))
    path.write_text("\n".join(lines) + "\n")


def wide_duckdb(path: Path, columns: int, rows: int, planted: int) -> None:
    """The same shape as :func:`wide_csv` as table ``wide`` of a DuckDB file written by DuckDB
    itself (no loader, so no profiles: the product must guess each column's values)."""
    cols = ", ".join(f"chr(97 + (hash(i, {j}) % 3)::INT) AS c{j}" for j in range(columns))
    with duckdb.connect(str(path)) as con:
        con.execute(
            f"CREATE TABLE wide AS SELECT DATE '2024-03-04' + (i % 28)::INT AS date, {cols}, "
            f"CASE WHEN i % 28 >= 14 AND hash(i, {planted}) % 3 = 0 THEN 0 ELSE 5 + i % 11 END "
            f"AS purchases FROM range({rows}) r(i)"
        )


@dataclass
class Run:
    """One capped ``drilldown investigate``: exit code, stderr, resident peak (kB), seconds."""

    code: int
    stderr: str
    peak_kb: int
    seconds: float


def investigate_capped(args: list[str], out: Path, address_space: int, cwd: Path = ROOT) -> Run:
    """``drilldown investigate ARGS --offline --out OUT`` in a child whose address space is
    capped at ``address_space`` bytes, run from ``cwd`` (its modules win)."""
    cmd = [sys.executable, "-m", "drilldown.cli", "investigate", *args]
    cmd += ["--offline", "--no-remember", "--no-prefect", "--out", str(out)]
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=cap
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return Run(proc.returncode, err.read(), usage.ru_maxrss, seconds)


def _case(work: Path, columns: int, address_space: int, cwd: Path) -> dict[str, object]:
    planted = columns // 2
    if columns > 500:  # more columns than the loader takes: a DuckDB file and --dimensions
        data = work / f"wide{columns}.duckdb"
        wide_duckdb(data, columns, ROWS, planted)
        dims = ["--dimensions", ",".join(f"c{j}" for j in range(columns))]
    else:
        data = work / f"wide{columns}.csv"
        wide_csv(data, columns, ROWS, planted)
        dims = []
    out = work / f"out{columns}"
    run = investigate_capped(
        [str(data), "--metric", "sum(purchases)", *dims, *WEEKS], out, address_space, cwd
    )
    first = None
    if run.code == 0:
        causes = json.loads((out / "result.json").read_text())["root_causes"]
        first = bool(causes) and causes[0]["segment"] == {f"c{planted}": "a"}
    errors = [line for line in run.stderr.splitlines() if line.startswith(("error:", "Trace"))]
    return {
        "columns": columns,
        "rows": ROWS,
        **{k: v for k, v in asdict(run).items() if k != "stderr"},
        "peak_mb": round(run.peak_kb / 1024),
        "error": errors[0][:200] if errors else None,
        "planted_first": first,
    }


def main() -> None:
    """Run every case and write the results."""
    from benchmarks._machine import machine_facts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", default="40,120,250,300,480,2000")
    ap.add_argument("--address-space", type=float, default=4.0, help="GiB")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to run")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "wide.json")
    a = ap.parse_args()
    cap = int(a.address_space * 1024**3)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [_case(Path(tmp), int(c), cap, a.checkout) for c in a.columns.split(",")]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine_facts("duckdb"), "runs": runs}
    a.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| columns | exit | s | peak MB | planted first | error |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['columns']} | {r['code']} | {r['seconds']:.1f} | {r['peak_mb']} | "
            f"{r['planted_first']} | {r['error'] or ''} |"
        )


if __name__ == "__main__":
    main()
