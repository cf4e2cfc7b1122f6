"""Write ``segment_outage/``: one platform's events were not collected on one comparison day.

    python data/scenarios/pattern_segment_outage.py           # rewrite segment_outage/ here
    python data/scenarios/pattern_segment_outage.py OUTDIR    # the same in OUTDIR/segment_outage

A meal-kit shop's daily orders: one row per customer and day with an order session, over
2024-03-04..2024-03-31. Nothing changes in the business. The web collector was down on Wednesday
2024-03-27, so ``platform = web`` has no rows that day while iOS and Android do; web revenue in the
comparison week looks about a seventh lower and total revenue a few percent lower. The right answer
is a data problem: the segment's missing day, not a change in how web customers buy.

:func:`rows` also builds variants for tests: other outage days, a real web drop
(``web_factor``), growth of everyone's sessions, and data that ends early (``last_day``).

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

NAME = "segment_outage"
HERE = Path(__file__).resolve().parent
START, DAYS = date(2024, 3, 4), 28  # a Monday, four weeks
BASELINE = (date(2024, 3, 18), date(2024, 3, 24))
COMPARISON = (date(2024, 3, 25), date(2024, 3, 31))
OUTAGE_DAY = date(2024, 3, 27)
OUTAGE_SEGMENT = {"platform": "web"}
CUSTOMERS = 4000
FIRST_ID = 500001
COLUMNS = ["date", "customer_id", "platform", "region", "channel", "orders", "revenue"]

PLATFORMS = {"ios": (0.30, 1.0), "android": (0.30, 0.85), "web": (0.40, 1.25)}  # weight, basket
REGIONS = {"north": 0.24, "south": 0.22, "east": 0.20, "west": 0.19, "central": 0.15}
CHANNELS = {"direct": 0.45, "search": 0.25, "social": 0.18, "partner": 0.12}
WEEKDAY = [1.00, 0.97, 0.98, 1.02, 1.10, 0.90, 0.86]  # order sessions, Monday first


def pick(rng: random.Random, table: dict) -> str:
    weights = [v[0] if isinstance(v, tuple) else v for v in table.values()]
    return rng.choices(list(table), weights=weights)[0]


def rows(
    outage: Iterable[date] = (OUTAGE_DAY,),
    web_factor: float = 1.0,
    growth: float = 1.0,
    last_day: date | None = None,
) -> list[list]:
    """The order log. The defaults write the scenario; tests build variants: other ``outage``
    days of the web collector, web revenue times ``web_factor`` and everyone's sessions times
    ``growth`` in the comparison week, no rows after ``last_day``."""
    rng = random.Random(f"metric-drilldown/scenarios/{NAME}")
    customers = []
    for i in range(CUSTOMERS):
        platform = pick(rng, PLATFORMS)
        customers.append(
            (
                FIRST_ID + i,
                platform,
                pick(rng, REGIONS),
                pick(rng, CHANNELS),
                min(0.8, 0.25 * math.exp(rng.gauss(0, 0.5))),  # chance of a session on a day
                PLATFORMS[platform][1] * 38.0 * math.exp(rng.gauss(0, 0.3)),  # usual basket
            )
        )
    lost = set(outage)
    out = []
    for d in range(DAYS):
        day = START + timedelta(days=d)
        shock = math.exp(rng.gauss(0, 0.03))  # the whole shop's day
        if day >= COMPARISON[0]:
            shock *= growth
        for cid, platform, region, channel, active, basket in customers:
            if rng.random() >= active * WEEKDAY[day.weekday()] * shock:
                continue
            orders = 1 + (rng.random() < 0.15)
            revenue = sum(basket * math.exp(rng.gauss(0, 0.35)) for _ in range(orders))
            if platform == "web" and day >= COMPARISON[0]:
                revenue *= web_factor
            if (platform == "web" and day in lost) or (last_day and day > last_day):
                continue  # drawn like any other day, then lost by the collector
            out.append([day.isoformat(), cid, platform, region, channel, orders, round(revenue, 2)])
    return out


def csv_bytes(data: list[list]) -> bytes:
    """The log as gzipped CSV (zero timestamp, no file name)."""
    return gzip_bytes(csv_text(COLUMNS, ([*r[:-1], f"{r[-1]:.2f}"] for r in data)))


def total(rows: list[list], lo: date, hi: date, segment: dict | None = None) -> float:
    col = {c: i for i, c in enumerate(COLUMNS)}
    return sum(
        r[col["revenue"]]
        for r in rows
        if lo.isoformat() <= r[0] <= hi.isoformat()
        and all(r[col[k]] == v for k, v in (segment or {}).items())
    )


def change(rows: list[list], segment: dict | None = None) -> dict:
    b, c = total(rows, *BASELINE, segment), total(rows, *COMPARISON, segment)
    return {"baseline": round(b, 2), "comparison": round(c, 2), "relative": round(c / b - 1, 4)}


def expected(rows: list[list]) -> dict:
    weeks = [(START + timedelta(days=7 * w), START + timedelta(days=7 * w + 6)) for w in range(3)]
    history = [round(total(rows, *weeks[w + 1]) / total(rows, *weeks[w]) - 1, 4) for w in range(2)]
    return {
        "scenario": NAME,
        "metric": "sum(revenue)",
        "table": "events",
        "grain": None,
        "time_column": "date",
        "baseline": f"{BASELINE[0]}:{BASELINE[1]}",
        "comparison": f"{COMPARISON[0]}:{COMPARISON[1]}",
        "dimensions": None,
        "significant": True,
        "root_causes": [{"segment": OUTAGE_SEGMENT, "effect": "data_quality"}],
        "effects": {"platform=web": "data_quality"},
        "global_shift": False,
        "data_quality": ["segment_missing_days"],
        "missing_dates": [OUTAGE_DAY.isoformat()],
        "story": "Nothing changed in the business; the web collector was down on 2024-03-27 (a "
        "Wednesday in the comparison week), so platform = web has no rows that day and web "
        "revenue looks about a seventh lower.",
        "planted": {"mechanism": "rows of platform = web on 2024-03-27 removed"},
        "realized": {
            "rows": len(rows),
            "total": change(rows),
            "segment_metric": {"platform=web": change(rows, OUTAGE_SEGMENT)},
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
        f"{NAME}: {real['rows']:,} rows, total {real['total']['relative']:+.1%}, web "
        f"{real['segment_metric']['platform=web']['relative']:+.1%}"
    )
