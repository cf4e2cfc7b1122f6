"""Generate the tied_columns scenario (deterministic): ``python data/scenarios/pattern_tied_columns.py [OUTDIR]``.

A product-analytics event log in which one set of rows answers to several names:

* the web app has no version, so every ``platform = web`` row has ``app_version = web`` and no
  other row does;
* every row's ``country`` is the user's ``country`` in ``users.csv`` (users never travel here), so
  ``country = X`` and the joined ``users.country = X`` are the same rows.

Planted from 2024-03-25: a broken payment form on the web app makes 65% of web checkouts fail.
The answer is one segment, named once, ``platform = web``; ``app_version = web`` and
``platform = web, app_version = web`` are other names of it (its aliases).

    python data/scenarios/pattern_tied_columns.py            # rewrite tied_columns/ next to this script
    python data/scenarios/pattern_tied_columns.py /tmp/out   # the same bytes in /tmp/out/tied_columns/

Only the standard library is used (``random`` seeded with a fixed string, gzip with a zero
timestamp), and the helpers of ``generate.py`` in this folder, so every run writes the same bytes.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from generate import (
    BASELINE,
    COMPARISON,
    DAYS,
    DOW_ACTIVITY,
    DOW_CONVERSION,
    START,
    WEEKS,
    csv_text,
    lognormal,
    mean_one,
    pick,
    poisson,
    seg_key,
    write_expected,
    write_gzip,
)

HERE = Path(__file__).resolve().parent
NAME = "tied_columns"
N_USERS = 4000
FIRST_USER_ID = 500001
COLUMNS = ["date", "user_id", "platform", "app_version", "country", "sessions", "screen_views"]
COLUMNS += ["checkouts"]

PLATFORMS = {"ios": (0.40, 1.10), "android": (0.40, 0.90), "web": (0.20, 1.00)}  # checkout mult.
VERSIONS = {
    "ios": {"6.3": 0.35, "6.4": 0.65},
    "android": {"6.2": 0.20, "6.3": 0.30, "6.4": 0.50},
    "web": {"web": 1.0},
}
COUNTRIES = {"US": 0.30, "GB": 0.14, "DE": 0.14, "FR": 0.10, "BR": 0.17, "IN": 0.15}
PLANS = {"free": (0.75, 1.0), "pro": (0.25, 1.8)}  # (weight, checkout multiplier)
CHECKOUT_RATE = 0.10  # per session, before the plan, platform and user multipliers
WEB_CHECKOUT_FACTOR = 0.35  # the plant: from the first comparison day, web checkouts x0.35

ACTIVITY_MEDIAN, ACTIVITY_SIGMA, ACTIVITY_CAP = 0.30, 0.50, 0.80
SESSIONS_MEDIAN, SESSIONS_SIGMA = 1.2, 0.5
USER_CHECKOUT_SIGMA = 0.40
DAY_ACTIVITY_SIGMA, COUNTRY_DAY_SIGMA, DAY_CHECKOUT_SIGMA = 0.02, 0.04, 0.025

CAUSE = {"platform": "web"}
ALIASES = [{"app_version": "web"}, {"platform": "web", "app_version": "web"}]


@dataclass(frozen=True)
class User:
    user_id: int
    platform: str
    app_version: str
    country: str
    plan: str
    activity: float
    sessions: float
    checkout: float


def make_users(rng: random.Random) -> list[User]:
    users = []
    for i in range(N_USERS):
        platform = pick(rng, PLATFORMS)
        plan = pick(rng, PLANS)
        users.append(
            User(
                user_id=FIRST_USER_ID + i,
                platform=platform,
                app_version=pick(rng, VERSIONS[platform]),
                country=pick(rng, COUNTRIES),
                plan=plan,
                activity=min(ACTIVITY_CAP, lognormal(rng, ACTIVITY_SIGMA, ACTIVITY_MEDIAN)),
                sessions=lognormal(rng, SESSIONS_SIGMA, SESSIONS_MEDIAN),
                checkout=CHECKOUT_RATE
                * PLANS[plan][1]
                * PLATFORMS[platform][1]
                * mean_one(rng, USER_CHECKOUT_SIGMA),
            )
        )
    return users


def simulate(seed: str) -> tuple[list[User], list[list]]:
    """Users and one event row per active user and day."""
    rng = random.Random(seed)
    users = make_users(rng)
    day_activity = [lognormal(rng, DAY_ACTIVITY_SIGMA) for _ in range(DAYS)]
    day_checkout = [lognormal(rng, DAY_CHECKOUT_SIGMA) for _ in range(DAYS)]
    country_day = {c: [lognormal(rng, COUNTRY_DAY_SIGMA) for _ in range(DAYS)] for c in COUNTRIES}
    rows: list[list] = []
    for d in range(DAYS):
        day = START + timedelta(days=d)
        dow = day.weekday()
        broken = day >= COMPARISON[0]
        for u in users:
            p = u.activity * DOW_ACTIVITY[dow] * day_activity[d] * country_day[u.country][d]
            if rng.random() >= min(p, 0.99):
                continue
            sessions = 1 + poisson(rng, u.sessions)
            views = sum(3 + poisson(rng, 4.0) for _ in range(sessions))
            rate = u.checkout * DOW_CONVERSION[dow] * day_checkout[d]
            if broken and u.platform == "web":
                rate *= WEB_CHECKOUT_FACTOR
            checkouts = sum(rng.random() < min(rate, 0.95) for _ in range(sessions))
            rows.append([day, u.user_id, u.platform, u.app_version, u.country])
            rows[-1] += [sessions, views, checkouts]
    return users, rows


def checkouts(rows: list[list], start: date, end: date, where: dict | None = None) -> int:
    return sum(
        r[7]
        for r in rows
        if start <= r[0] <= end and all(r[COLUMNS.index(k)] == v for k, v in (where or {}).items())
    )


def change(rows: list[list], where: dict | None = None) -> dict:
    before, after = checkouts(rows, *BASELINE, where), checkouts(rows, *COMPARISON, where)
    return {"baseline": before, "comparison": after, "relative": round(after / before - 1, 4)}


def realized(users: list[User], rows: list[list]) -> dict:
    """What the generated rows show: totals, the cause's move, and the ties themselves."""
    home = {u.user_id: u.country for u in users}
    rows_by: dict[str, int] = defaultdict(int)
    for r in rows:
        rows_by["platform=web"] += r[2] == "web"
        rows_by["app_version=web"] += r[3] == "web"
        rows_by["platform=web, app_version=web"] += r[2] == "web" and r[3] == "web"
        rows_by["country = users.country"] += r[4] == home[r[1]]
    weeks = [checkouts(rows, *w) for w in WEEKS]
    return {
        "rows": len(rows),
        "total": change(rows),
        "history_week_over_week": [round(weeks[w + 1] / weeks[w] - 1, 4) for w in range(2)],
        "segment_metric": {seg_key(CAUSE): change(rows, CAUSE)},
        "tied_rows": dict(rows_by),
    }


def expected(facts: dict) -> dict:
    return {
        "scenario": NAME,
        "metric": "sum(checkouts)",
        "table": "events",
        "grain": None,
        "time_column": "date",
        "baseline": f"{BASELINE[0]}:{BASELINE[1]}",
        "comparison": f"{COMPARISON[0]}:{COMPARISON[1]}",
        "dimensions": None,
        "significant": True,
        "root_causes": [{"segment": CAUSE, "effect": "rate", "aliases": ALIASES}],
        "effects": {seg_key(CAUSE): "rate"},
        "global_shift": False,
        "data_quality": [],
        "missing_dates": [],
        "story": (
            "From 2024-03-25 a broken payment form on the web app makes 65% of web checkouts "
            "fail. The web app has no version (app_version is 'web' on exactly the web rows) and "
            "each row's country is its user's country in users.csv, so the cause has three names "
            "and every country segment two; the answer names it once, platform = web."
        ),
        "planted": {
            seg_key(CAUSE): {
                "segment_change": round(WEB_CHECKOUT_FACTOR - 1, 2),
                "mechanism": f"checkout chance per session x{WEB_CHECKOUT_FACTOR}",
            },
            "ties": ["platform=web <-> app_version=web", "country <-> users.country"],
        },
        "realized": facts,
    }


def generate(out: Path) -> dict:
    users, rows = simulate(f"metric-drilldown/scenarios/{NAME}")
    facts = realized(users, rows)
    folder = out / NAME
    folder.mkdir(parents=True, exist_ok=True)
    events = ([r[0].isoformat(), *r[1:]] for r in rows)
    write_gzip(folder / "events.csv.gz", csv_text(COLUMNS, events))
    (folder / "users.csv").write_text(
        csv_text(["user_id", "country", "plan"], ([u.user_id, u.country, u.plan] for u in users)),
        encoding="utf-8",
    )
    write_expected(folder, expected(facts))
    return facts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=HERE, help="output folder")
    facts = generate(ap.parse_args(argv).out)
    print(f"{NAME:14} {facts['rows']:6,} rows  total {facts['total']['relative']:+.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
