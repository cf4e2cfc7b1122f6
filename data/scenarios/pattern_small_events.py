"""Small event tables, one row per event and no id column: ``python pattern_small_events.py [OUTDIR]``.

Three scenarios that test the noise model where the shopping-app world of ``generate.py`` does
not: few cells, many identical rows, values with little spread. Two weeks each (baseline
2024-03-18..24, comparison 2024-03-25..31), standard library only, seeded, gzip without a
timestamp, so the bytes are the same on every run.

* ``uneven_drop``: one column ``store`` with six values; in the second week four of them lose
  65%, 45%, 35% and 30% of their orders and two stay as they were. The answer is the four
  stores, not an even shift of everything.
* ``binary_events``: rows ``date, platform, country, converted`` with ``converted`` 0 or 1;
  one cell (``android``, ``FR``) has a third fewer events in the second week. Identical rows are
  ordinary here: no duplicate-rows finding, and the other cells stay within the noise.
* ``flat_many``: one column ``sku`` with fourteen values, thirty-five rows per value per day,
  amounts near 12.0 with little spread; four skus fall by 60%, 50%, 40% and 35% in the second
  week, the other ten stay flat. All four are named.
"""

from __future__ import annotations

import random
import sys
from datetime import date, timedelta
from pathlib import Path

from generate import csv_text, write_expected, write_gzip

HERE = Path(__file__).resolve().parent
START = date(2024, 3, 18)
DAYS = 14
BASELINE = "2024-03-18:2024-03-24"
COMPARISON = "2024-03-25:2024-03-31"


def _days() -> list[date]:
    return [START + timedelta(days=i) for i in range(DAYS)]


def _write(folder: Path, header: list[str], rows: list[list], expected: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_gzip(folder / "events.csv.gz", csv_text(header, rows))
    expected = {
        "scenario": folder.name,
        "generator": Path(__file__).name,
        "table": "events",
        "grain": None,
        "time_column": "date",
        "baseline": BASELINE,
        "comparison": COMPARISON,
        "dimensions": None,
        "global_shift": False,
        "data_quality": [],
        "missing_dates": [],
        **expected,
    }
    expected["effects"] = {
        ",".join(f"{k}={v}" for k, v in c["segment"].items()): c["effect"]
        for c in expected["root_causes"]
    }
    expected["significant"] = bool(expected["root_causes"])
    expected["realized"] = {"rows": len(rows)}
    write_expected(folder, expected)


def uneven_drop(out: Path) -> None:
    rng = random.Random("uneven_drop")
    stores = ["north", "south", "east", "west", "harbor", "airport"]
    drop = {"north": 0.65, "east": 0.45, "harbor": 0.35, "airport": 0.30}
    rows = []
    for day in _days():
        second = day >= START + timedelta(days=7)
        for s in stores:
            for _ in range(30):
                keep = 1.0 - (drop.get(s, 0.0) if second else 0.0)
                orders = sum(1 for _ in range(3) if rng.random() < 0.5 * keep)
                rows.append([day.isoformat(), s, orders])
    _write(
        out / "uneven_drop",
        ["date", "store", "orders"],
        rows,
        {
            "metric": "sum(orders)",
            "root_causes": [{"segment": {"store": s}, "effect": "rate"} for s in drop],
            "story": "four of six stores lose 30-65% of their orders; two stay flat",
            "planted": {"drop": drop},
        },
    )


def binary_events(out: Path) -> None:
    rng = random.Random("binary_events")
    platforms = ["ios", "android"]
    countries = ["US", "DE", "FR"]
    rows = []
    for day in _days():
        second = day >= START + timedelta(days=7)
        for p in platforms:
            for c in countries:
                n = 180
                if second and (p, c) == ("android", "FR"):
                    n = 120
                for _ in range(n):
                    rows.append([day.isoformat(), p, c, 1 if rng.random() < 0.3 else 0])
    _write(
        out / "binary_events",
        ["date", "platform", "country", "converted"],
        rows,
        {
            "metric": "sum(converted)",
            "root_causes": [
                {"segment": {"platform": "android", "country": "FR"}, "effect": "rate"}
            ],
            "story": "android in FR loses a third of its events in the second week",
            "planted": {"cell": "android/FR", "events_per_day": [180, 120]},
        },
    )


def flat_many(out: Path) -> None:
    rng = random.Random("flat_many")
    skus = [f"sku{i:02d}" for i in range(1, 15)]
    drop = {"sku03": 0.60, "sku07": 0.50, "sku11": 0.40, "sku13": 0.35}
    rows = []
    for day in _days():
        second = day >= START + timedelta(days=7)
        for s in skus:
            for _ in range(35):
                amount = 12.0 + rng.gauss(0.0, 0.3)
                if second:
                    amount *= 1.0 - drop.get(s, 0.0)
                rows.append([day.isoformat(), s, f"{amount:.2f}"])
    _write(
        out / "flat_many",
        ["date", "sku", "amount"],
        rows,
        {
            "metric": "sum(amount)",
            "root_causes": [{"segment": {"sku": s}, "effect": "rate"} for s in drop],
            "story": "four of fourteen skus fall by 35-60%; the other ten stay flat",
            "planted": {"drop": drop},
        },
    )


SCENARIOS = (uneven_drop, binary_events, flat_many)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else HERE
    for make in SCENARIOS:
        make(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
