"""Write ``event_rows/``: one row per visit, no id column, so identical rows are normal.

    python data/scenarios/pattern_event_rows.py           # rewrite event_rows/ here
    python data/scenarios/pattern_event_rows.py OUTDIR    # the same bytes in OUTDIR/event_rows

A ticket shop's visit log over 2024-03-04..2024-03-31: each row is one visit, ``date``,
``platform``, ``country`` and ``purchases`` (1 when the visit bought, else 0). With three platforms,
six countries and a 0/1 outcome a day has at most 36 different rows, so almost every row has an
identical twin: that is what event data without an id looks like, not a load error.

Planted: from 2024-03-25 a checkout bug on Android cuts its chance to buy to 0.6 times what it was.
The right answer is ``platform = android`` (rate), and no data problem.

:func:`rows` also builds variants for tests: ``android_factor=1.0`` for a world where nothing
changes, and ``loaded_twice`` for days whose whole file was loaded a second time.

Standard library only: ``random.Random`` seeded with a fixed string, gzip with a zero timestamp
and no file name, so every run writes the same bytes.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

from generate import csv_text, gzip_bytes, write_expected

NAME = "event_rows"
HERE = Path(__file__).resolve().parent
START, DAYS = date(2024, 3, 4), 28  # a Monday, four weeks
BASELINE = (date(2024, 3, 18), date(2024, 3, 24))
COMPARISON = (date(2024, 3, 25), date(2024, 3, 31))
COLUMNS = ["date", "platform", "country", "purchases"]
ANDROID_FACTOR = 0.6

PLATFORMS = {"ios": (0.38, 0.050), "android": (0.42, 0.045), "web": (0.20, 0.065)}  # share, buy
COUNTRIES = {"US": (0.30, 1.0), "GB": (0.14, 1.05), "DE": (0.16, 0.95), "FR": (0.12, 0.9),
             "ES": (0.12, 0.85), "IT": (0.16, 0.8)}  # fmt: skip
VISITS = 1500  # on an average day
WEEKDAY = [0.95, 0.93, 0.96, 1.00, 1.12, 1.06, 0.98]  # visits, Monday first


def rows(
    android_factor: float = ANDROID_FACTOR,
    loaded_twice: Iterable[date] = (),
    busier: Iterable[date] = (),
) -> list[list]:
    """The visit log, in load order: day by day, then the days whose file was loaded again
    (``loaded_twice``). ``busier`` days get twice the visits (a real rush, not a load error)."""
    rush = set(busier)
    rng = random.Random(f"metric-drilldown/scenarios/{NAME}")
    platforms, countries = list(PLATFORMS), list(COUNTRIES)
    out: list[list] = []
    for d in range(DAYS):
        day = START + timedelta(days=d)
        shock = math.exp(rng.gauss(0, 0.04))
        visits = round(VISITS * WEEKDAY[day.weekday()] * shock * (2 if day in rush else 1))
        for _ in range(visits):
            platform = rng.choices(platforms, [v[0] for v in PLATFORMS.values()])[0]
            country = rng.choices(countries, [v[0] for v in COUNTRIES.values()])[0]
            chance = PLATFORMS[platform][1] * COUNTRIES[country][1]
            if platform == "android" and day >= COMPARISON[0]:
                chance *= android_factor
            out.append([day.isoformat(), platform, country, int(rng.random() < chance)])
    again = {d.isoformat() for d in loaded_twice}
    return out + [r for r in out if r[0] in again]


def csv_bytes(data: list[list]) -> bytes:
    return gzip_bytes(csv_text(COLUMNS, data))


def purchases(data: list[list], lo: date, hi: date, platform: str | None = None) -> int:
    return sum(
        r[3] for r in data if lo.isoformat() <= r[0] <= hi.isoformat() and platform in (None, r[1])
    )


def change(data: list[list], platform: str | None = None) -> dict:
    b, c = purchases(data, *BASELINE, platform), purchases(data, *COMPARISON, platform)
    return {"baseline": b, "comparison": c, "relative": round(c / b - 1, 4)}


def expected(data: list[list]) -> dict:
    weeks = [(START + timedelta(days=7 * w), START + timedelta(days=7 * w + 6)) for w in range(3)]
    history = [
        round(purchases(data, *weeks[w + 1]) / purchases(data, *weeks[w]) - 1, 4) for w in range(2)
    ]
    unique = len({tuple(r) for r in data})
    return {
        "scenario": NAME,
        "metric": "sum(purchases)",
        "table": "events",
        "grain": None,
        "time_column": "date",
        "baseline": f"{BASELINE[0]}:{BASELINE[1]}",
        "comparison": f"{COMPARISON[0]}:{COMPARISON[1]}",
        "dimensions": None,
        "significant": True,
        "root_causes": [{"segment": {"platform": "android"}, "effect": "rate"}],
        "effects": {"platform=android": "rate"},
        "global_shift": False,
        "data_quality": [],
        "missing_dates": [],
        "story": "A checkout bug on Android from 2024-03-25 cuts its chance to buy to 0.6 times "
        "what it was. The log has one row per visit and no id, so identical rows are normal: no "
        "row was loaded twice.",
        "planted": {"android_purchase_chance": ANDROID_FACTOR},
        "realized": {
            "rows": len(data),
            "distinct_rows": unique,
            "total": change(data),
            "segment_metric": {"platform=android": change(data, "android")},
            "history_week_over_week": history,
        },
    }


def write(out: Path) -> dict:
    data = rows()
    folder = out / NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.csv.gz").write_bytes(csv_bytes(data))
    facts = expected(data)
    write_expected(folder, facts)
    return facts


if __name__ == "__main__":
    facts = write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    real = facts["realized"]
    print(
        f"{NAME}: {real['rows']:,} rows ({real['distinct_rows']:,} distinct), total "
        f"{real['total']['relative']:+.1%}, android "
        f"{real['segment_metric']['platform=android']['relative']:+.1%}"
    )
