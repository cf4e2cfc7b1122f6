"""Start-up and demo time of the command line, against another checkout in the same run.

``python -m benchmarks.startup --before /path/to/other/checkout`` times ``drilldown investigate
--help``, ``drilldown demo`` (offline, the bundled data) and one ``drilldown tool
metric_describe`` call on the demo's database, alternating between this checkout and
the other one so that both see the same machine, and checks that both demos give the same answer
(result.json with timings and run ids aside, floats to 9 digits; report.md). The other checkout
is run with this interpreter and the other checkout as working directory (its own modules win);
``--before-module`` names its command-line module if it is not ``drilldown.cli``.
Writes ``benchmarks/results/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VOLATILE = ("elapsed", "_ms", "date", "score", "run_id")


def timed(cwd: Path, module: str, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, check=True, capture_output=True, text=True
    )
    return time.perf_counter() - start


def stable(o: Any) -> Any:
    """result.json without what differs run to run (timings, run ids, float noise)."""
    if isinstance(o, dict):
        return {k: stable(v) for k, v in o.items() if not any(t in k for t in VOLATILE)}
    if isinstance(o, list):
        return [stable(x) for x in o]
    return float(f"{o:.9g}") if isinstance(o, float) else o


def same_answer(a: Path, b: Path) -> bool:
    ra, rb = (json.loads((d / "result.json").read_text()) for d in (a, b))
    for r in (ra, rb):
        r.pop("similar_investigations", None)
    ma, mb = ((d / "report.md").read_text().replace(str(d), "OUT") for d in (a, b))
    return stable(ra) == stable(rb) and ma == mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="the other checkout")
    ap.add_argument("--before-module", default="drilldown.cli")
    ap.add_argument("--rounds", type=int, default=7, help="--help runs per side")
    ap.add_argument("--demos", type=int, default=5, help="demo runs per side")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    args = ap.parse_args()
    sides = {
        "before": (args.before.resolve(), args.before_module),
        "after": (ROOT, "drilldown.cli"),
    }
    kinds = ("help", "demo", "tool")
    times: dict[str, dict[str, list[float]]] = {s: {k: [] for k in kinds} for s in sides}
    work = Path(tempfile.mkdtemp(prefix="drilldown-startup-"))
    try:
        for _ in range(args.rounds):
            for side, (cwd, module) in sides.items():
                times[side]["help"].append(timed(cwd, module, "investigate", "--help"))
        for _ in range(args.demos):
            for side, (cwd, module) in sides.items():
                out = work / side
                shutil.rmtree(out, ignore_errors=True)
                times[side]["demo"].append(timed(cwd, module, "demo", "--out", str(out)))
        identical = same_answer(work / "before", work / "after")
        for _ in range(args.rounds):
            for side, (cwd, module) in sides.items():
                db = str(work / side / "data.duckdb")
                times[side]["tool"].append(
                    timed(cwd, module, "tool", "metric_describe", "--db", db)
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {"identical_demo_answer": identical, "sides": {}}
    for side, t in times.items():
        report["sides"][side] = {
            k: {"median_s": round(statistics.median(v), 3), "min_s": round(min(v), 3), "runs": v}
            for k, v in t.items()
        }
    for k in kinds:
        b, a = (report["sides"][s][k]["median_s"] for s in ("before", "after"))
        report[f"{k}_ratio_after_before"] = round(a / b, 3)
        print(f"{k:5} before {b:.3f} s, after {a:.3f} s (median), ratio {a / b:.3f}")
    print(f"same demo answer: {identical}")
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
