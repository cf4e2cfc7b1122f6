"""Regenerate the synthetic scenarios (deterministic): ``python data/scenarios/generate.py [OUTDIR]``.

Seven datasets, one folder each, made by one generator of a shopping app's daily activity. Each
folder holds ``events.csv.gz`` (one row per user, day and traffic channel), ``users.csv`` (joined
by ``user_id``) and ``expected.json``: the metric, the periods and the cause that was planted.
Only the planted effect differs between scenarios; everything else is the same noisy world
(each scenario draws its own noise from its own fixed seed). See ``README.md`` in this folder.

    python data/scenarios/generate.py              # rewrite the committed files next to this script
    python data/scenarios/generate.py /tmp/out     # write the same bytes somewhere else
    python data/scenarios/generate.py --noise 20   # print week-over-week noise of the unchanged world

Only the standard library is used (``random`` seeded with a fixed string per scenario, gzip with a
zero timestamp), so the output is the same on every run.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = date(2024, 3, 4)  # a Monday
DAYS = 28
BASELINE = (date(2024, 3, 18), date(2024, 3, 24))
COMPARISON = (date(2024, 3, 25), date(2024, 3, 31))
WEEKS = [(START + timedelta(days=7 * w), START + timedelta(days=7 * w + 6)) for w in range(4)]
N_USERS = 4500
FIRST_USER_ID = 100001

# --- the world ----------------------------------------------------------------------------------
# Every table is {value: weight} or {value: (weight, multiplier)}.
PLATFORMS = {"ios": 0.38, "android": 0.44, "web": 0.18}
VERSIONS = {  # the app version a user runs (fixed for the four weeks); web has no version
    "ios": {"8.1": 0.12, "8.2": 0.30, "8.3": 0.58},
    "android": {"8.0": 0.08, "8.1": 0.14, "8.2": 0.26, "8.3": 0.52},
    "web": {"web": 1.0},
}
DEVICES = {  # (weight, order value multiplier)
    "ios": {"phone": (0.72, 1.0), "tablet": (0.28, 1.15)},
    "android": {"phone": (0.88, 1.0), "tablet": (0.12, 1.15)},
    "web": {"desktop": (0.72, 1.1), "phone": (0.28, 1.0)},
}
COUNTRIES = {  # (weight, price level)
    "US": (0.28, 1.00),
    "GB": (0.09, 0.95),
    "DE": (0.11, 0.90),
    "FR": (0.07, 0.90),
    "BR": (0.16, 0.70),
    "IN": (0.15, 0.35),
    "JP": (0.07, 1.05),
    "MX": (0.07, 0.60),
}
CHANNELS = {  # traffic source of a session: (weight, conversion multiplier)
    "organic": (0.46, 1.00),
    "paid_search": (0.20, 1.15),
    "paid_social": (0.12, 0.35),
    "email": (0.22, 1.25),
}
HOME_CHANNEL_SHARE = 0.7  # share of a user's sessions that come from their usual channel
SEGMENTS = {"consumer": 0.62, "prosumer": 0.28, "business": 0.10}
PLANS_BY_SEGMENT = {
    "consumer": {"free": 0.68, "plus": 0.22, "pro": 0.10},
    "prosumer": {"free": 0.45, "plus": 0.30, "pro": 0.25},
    "business": {"free": 0.25, "plus": 0.30, "pro": 0.45},
}
PLANS = {"free": (0.11, 22.0), "plus": (0.16, 26.0), "pro": (0.24, 32.0)}  # (conversion, order $)
SIGNUP_CHANNELS = {"organic": 0.42, "paid_search": 0.22, "paid_social": 0.21, "referral": 0.15}
DOW_ACTIVITY = (1.00, 1.01, 1.02, 1.00, 0.95, 0.86, 0.89)  # Monday..Sunday
DOW_CONVERSION = (0.97, 0.97, 0.98, 1.00, 1.03, 1.06, 1.04)

# --- the noise ----------------------------------------------------------------------------------
ACTIVITY_MEDIAN, ACTIVITY_SIGMA, ACTIVITY_CAP = 0.28, 0.55, 0.75  # per-user chance to be active
SESSIONS_MEDIAN, SESSIONS_SIGMA = 1.0, 0.5  # per-user mean extra sessions (Poisson) per active day
USER_CONVERSION_SIGMA = 0.45  # per-user conversion multiplier, lognormal
USER_BASKET_SIGMA = 0.25  # per-user order value multiplier, lognormal
ORDER_SIGMA = 0.40  # per-order value, lognormal around the user's mean
DAY_ACTIVITY_SIGMA = 0.02  # whole-app daily shock to activity
COUNTRY_DAY_SIGMA = 0.04  # country-by-day shock to activity (local holidays, weather, news)
DAY_CONVERSION_SIGMA = 0.025  # whole-app daily shock to conversion

COLUMNS = [
    "date",
    "user_id",
    "platform",
    "app_version",
    "country",
    "device",
    "channel",
    "sessions",
    "purchases",
    "revenue",
]


@dataclass(frozen=True)
class User:
    user_id: int
    platform: str
    app_version: str
    device: str
    country: str
    plan: str
    segment: str
    signup_channel: str
    signup_date: date
    home_channel: str
    activity: float
    sessions: float
    conversion: float
    basket: float


@dataclass(frozen=True)
class Effect:
    """A planted multiplier from the first comparison day on, for the users (and channel) it hits."""

    what: str  # "activity", "conversion" or "price"
    factor: float
    where: Callable[[User], bool]


@dataclass(frozen=True)
class Scenario:
    name: str
    metric: str
    story: str
    root_causes: list[dict] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    significant: bool = True
    grain: str | None = None
    global_shift: bool = False
    data_quality: list[str] = field(default_factory=list)
    campaign: tuple[float, float] | None = None  # extra paid_social sessions: (chance, mean extra)
    missing_dates: tuple[date, ...] = ()
    planted: dict = field(default_factory=dict)


def everyone(_: User) -> bool:
    return True


SCENARIOS = [
    Scenario(
        name="release_loss",
        metric="count(distinct user_id)",
        grain="day",
        story=(
            "From 2024-03-25 Android app 8.3 crashes on launch for about a third of its users: "
            "each day 35% of the Android 8.3 users who would have opened the app do not show up; "
            "iOS 8.3 and the other Android versions are untouched."
        ),
        root_causes=[{"segment": {"platform": "android", "app_version": "8.3"}, "effect": "rate"}],
        effects=[
            Effect("activity", 0.65, lambda u: u.platform == "android" and u.app_version == "8.3")
        ],
        planted={"segment_change": -0.35, "mechanism": "daily active chance x0.65"},
    ),
    Scenario(
        name="pricing_join",
        metric="sum(revenue)",
        story=(
            "From 2024-03-25 a pricing change gives every order of pro-plan users 40% off; "
            "the plan is only in users.csv, and nothing else changes (order counts included)."
        ),
        root_causes=[{"segment": {"users.plan": "pro"}, "effect": "rate"}],
        effects=[Effect("price", 0.60, lambda u: u.plan == "pro")],
        planted={"segment_change": -0.40, "mechanism": "order value x0.60 for plan=pro"},
    ),
    Scenario(
        name="mix_shift",
        metric="sum(purchases) / sum(sessions)",
        story=(
            "From 2024-03-25 a paid-social retargeting campaign adds paid_social sessions on about "
            "30% of active user-days (1.7 each on average, roughly tripling paid_social traffic); "
            "they convert at paid_social's usual low rate, so every channel's own conversion is "
            "unchanged while the overall conversion falls (a mix effect)."
        ),
        root_causes=[{"segment": {"channel": "paid_social"}, "effect": "mix"}],
        campaign=(0.30, 0.7),
        planted={
            "segment_rate_change": 0.0,
            "mechanism": "extra paid_social sessions: chance 0.30 per active user-day, "
            "1 + Poisson(0.7) sessions, converting at the paid_social rate",
        },
    ),
    Scenario(
        name="two_causes",
        metric="sum(revenue)",
        story=(
            "From 2024-03-25 two unrelated failures: a payment-provider outage in Brazil makes 60% "
            "of checkouts in BR fail, and a layout bug hides the checkout button on iOS tablets "
            "(all versions, every country) so their conversion falls by 40%."
        ),
        root_causes=[
            {"segment": {"country": "BR"}, "effect": "rate"},
            {"segment": {"platform": "ios", "device": "tablet"}, "effect": "rate"},
        ],
        effects=[
            Effect("conversion", 0.40, lambda u: u.country == "BR"),
            Effect("conversion", 0.60, lambda u: u.platform == "ios" and u.device == "tablet"),
        ],
        planted={
            "country=BR": {"segment_change": -0.60, "mechanism": "conversion x0.40"},
            "platform=ios, device=tablet": {
                "segment_change": -0.40,
                "mechanism": "conversion x0.60",
            },
        },
    ),
    Scenario(
        name="pure_noise",
        metric="sum(revenue)",
        significant=False,
        story="Nothing was planted: the comparison week differs from the baseline week only by noise.",
        planted={"mechanism": "none"},
    ),
    Scenario(
        name="growth",
        metric="sum(revenue)",
        global_shift=True,
        story=(
            "From 2024-03-25 every user is 15% more likely to be active each day (a market-wide "
            "seasonal lift), so every segment grows by about the same 15%."
        ),
        effects=[Effect("activity", 1.15, everyone)],
        planted={"global_change": 0.15, "mechanism": "daily active chance x1.15 for everyone"},
    ),
    Scenario(
        name="missing_day",
        metric="sum(revenue)",
        data_quality=["missing_days"],
        story=(
            "Nothing changed in the business; the rows of 2024-03-28 (a Thursday in the comparison "
            "week) were never ingested, so the comparison week has six days of data and revenue "
            "looks about a seventh lower."
        ),
        missing_dates=(date(2024, 3, 28),),
        planted={"mechanism": "all rows of 2024-03-28 removed"},
    ),
]


# --- sampling -----------------------------------------------------------------------------------


def pick(rng: random.Random, table: dict) -> str:
    """One key of ``table``, weighted by its value (or the value's first item)."""
    keys = list(table)
    weights = [v[0] if isinstance(v, tuple) else v for v in table.values()]
    return rng.choices(keys, weights)[0]


def lognormal(rng: random.Random, sigma: float, median: float = 1.0) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


def mean_one(rng: random.Random, sigma: float) -> float:
    """Lognormal with mean 1."""
    return math.exp(rng.gauss(-sigma * sigma / 2, sigma))


def poisson(rng: random.Random, lam: float) -> int:
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def make_users(rng: random.Random) -> list[User]:
    users = []
    for i in range(N_USERS):
        platform = pick(rng, PLATFORMS)
        device = pick(rng, DEVICES[platform])
        country = pick(rng, COUNTRIES)
        segment = pick(rng, SEGMENTS)
        plan = pick(rng, PLANS_BY_SEGMENT[segment])
        basket = (
            PLANS[plan][1]
            * COUNTRIES[country][1]
            * DEVICES[platform][device][1]
            * mean_one(rng, USER_BASKET_SIGMA)
        )
        users.append(
            User(
                user_id=FIRST_USER_ID + i,
                platform=platform,
                app_version=pick(rng, VERSIONS[platform]),
                device=device,
                country=country,
                plan=plan,
                segment=segment,
                signup_channel=pick(rng, SIGNUP_CHANNELS),
                signup_date=START - timedelta(days=rng.randint(14, 900)),
                home_channel=pick(rng, CHANNELS),
                activity=min(ACTIVITY_CAP, lognormal(rng, ACTIVITY_SIGMA, ACTIVITY_MEDIAN)),
                sessions=lognormal(rng, SESSIONS_SIGMA, SESSIONS_MEDIAN),
                conversion=PLANS[plan][0] * mean_one(rng, USER_CONVERSION_SIGMA),
                basket=basket,
            )
        )
    return users


def simulate(sc: Scenario, seed: str) -> tuple[list[User], list[list]]:
    """Users and event rows (date, user_id, ..., sessions, purchases, revenue as a float)."""
    rng = random.Random(seed)
    users = make_users(rng)
    day_activity = [lognormal(rng, DAY_ACTIVITY_SIGMA) for _ in range(DAYS)]
    day_conversion = [lognormal(rng, DAY_CONVERSION_SIGMA) for _ in range(DAYS)]
    country_day = {c: [lognormal(rng, COUNTRY_DAY_SIGMA) for _ in range(DAYS)] for c in COUNTRIES}
    channels = list(CHANNELS)

    def factor(what: str, u: User, after: bool) -> float:
        f = 1.0
        if after:
            for e in sc.effects:
                if e.what == what and e.where(u):
                    f *= e.factor
        return f

    rows: list[list] = []
    for d in range(DAYS):
        day = START + timedelta(days=d)
        dow = day.weekday()
        after = day >= COMPARISON[0]
        for u in users:
            p = (
                u.activity
                * DOW_ACTIVITY[dow]
                * day_activity[d]
                * country_day[u.country][d]
                * factor("activity", u, after)
            )
            if rng.random() >= min(p, 0.99):
                continue
            counts = dict.fromkeys(channels, 0)
            for _ in range(1 + poisson(rng, u.sessions)):
                home = rng.random() < HOME_CHANNEL_SHARE
                counts[u.home_channel if home else pick(rng, CHANNELS)] += 1
            if sc.campaign and after and rng.random() < sc.campaign[0]:
                counts["paid_social"] += 1 + poisson(rng, sc.campaign[1])
            conversion = (
                u.conversion
                * DOW_CONVERSION[dow]
                * day_conversion[d]
                * factor("conversion", u, after)
            )
            price = u.basket * factor("price", u, after)
            for ch in channels:
                n = counts[ch]
                if not n:
                    continue
                rate = min(0.95, conversion * CHANNELS[ch][1])
                purchases = sum(rng.random() < rate for _ in range(n))
                revenue = sum(price * mean_one(rng, ORDER_SIGMA) for _ in range(purchases))
                rows.append(
                    [
                        day,
                        u.user_id,
                        u.platform,
                        u.app_version,
                        u.country,
                        u.device,
                        ch,
                        n,
                        purchases,
                        round(revenue, 2),
                    ]
                )
    rows = [r for r in rows if r[0] not in sc.missing_dates]
    return users, rows


# --- measuring what was planted (from the generated rows, for expected.json and --noise) -------


def metric_value(
    sc: Scenario, rows: Iterable[list], users: dict[int, User], start: date, end: date
) -> float:
    rows = [r for r in rows if start <= r[0] <= end]
    if sc.metric == "sum(revenue)":
        return sum(r[9] for r in rows)
    if sc.metric == "sum(purchases) / sum(sessions)":
        return sum(r[8] for r in rows) / max(1, sum(r[7] for r in rows))
    if sc.metric == "count(distinct user_id)":  # grain day: daily distinct users, averaged
        per_day = defaultdict(set)
        for r in rows:
            per_day[r[0]].add(r[1])
        return sum(len(s) for s in per_day.values()) / ((end - start).days + 1)
    raise ValueError(sc.metric)


def in_segment(segment: dict, row: list, users: dict[int, User]) -> bool:
    for col, value in segment.items():
        if col.startswith("users."):
            actual = getattr(users[row[1]], col.split(".", 1)[1])
        else:
            actual = row[COLUMNS.index(col)]
        if actual != value:
            return False
    return True


def change(sc: Scenario, rows: list[list], users: dict[int, User], segment: dict) -> dict:
    part = [r for r in rows if in_segment(segment, r, users)]
    before = metric_value(sc, part, users, *BASELINE)
    after = metric_value(sc, part, users, *COMPARISON)
    return {
        "baseline": round(before, 6),
        "comparison": round(after, 6),
        "relative": round(after / before - 1, 4),
    }


def realized(sc: Scenario, users: list[User], rows: list[list]) -> dict:
    by_id = {u.user_id: u for u in users}
    out = {
        "rows": len(rows),
        "total": change(sc, rows, by_id, {}),
        "history_week_over_week": [
            round(
                metric_value(sc, rows, by_id, *WEEKS[w + 1])
                / metric_value(sc, rows, by_id, *WEEKS[w])
                - 1,
                4,
            )
            for w in range(2)
        ],
    }
    if sc.root_causes:
        out["segment_metric"] = {
            seg_key(rc["segment"]): change(sc, rows, by_id, rc["segment"]) for rc in sc.root_causes
        }
    if sc.campaign:
        out["conversion_by_channel"] = {
            ch: change(sc, rows, by_id, {"channel": ch}) for ch in CHANNELS
        }
        sessions = {
            which: {
                ch: sum(r[7] for r in rows if r[6] == ch and lo <= r[0] <= hi) for ch in CHANNELS
            }
            for which, (lo, hi) in (("baseline", BASELINE), ("comparison", COMPARISON))
        }
        out["paid_social_session_share"] = {
            which: round(s["paid_social"] / sum(s.values()), 4) for which, s in sessions.items()
        }
    return out


def seg_key(segment: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in segment.items())


# --- writing ------------------------------------------------------------------------------------


def csv_text(header: list[str], rows: Iterable[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def gzip_bytes(text: str) -> bytes:
    """``text`` gzipped the same way every run (zero timestamp, no file name)."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    return raw.getvalue()


def write_gzip(path: Path, text: str) -> None:
    path.write_bytes(gzip_bytes(text))


def write_expected(folder: Path, facts: dict) -> None:
    """``folder/expected.json``: the scenario's question and what was planted."""
    text = json.dumps(facts, indent=2, ensure_ascii=False) + "\n"
    (folder / "expected.json").write_text(text, encoding="utf-8")


def expected(sc: Scenario, facts: dict) -> dict:
    return {
        "scenario": sc.name,
        "metric": sc.metric,
        "table": "events",
        "grain": sc.grain,
        "time_column": "date",
        "baseline": f"{BASELINE[0]}:{BASELINE[1]}",
        "comparison": f"{COMPARISON[0]}:{COMPARISON[1]}",
        "dimensions": None,
        "significant": sc.significant,
        "root_causes": sc.root_causes,
        "effects": {seg_key(rc["segment"]): rc["effect"] for rc in sc.root_causes},
        "global_shift": sc.global_shift,
        "data_quality": sc.data_quality,
        "missing_dates": [d.isoformat() for d in sc.missing_dates],
        "story": sc.story,
        "planted": sc.planted,
        "realized": facts,
    }


def generate(sc: Scenario, out: Path) -> dict:
    users, rows = simulate(sc, f"metric-drilldown/scenarios/{sc.name}")
    facts = realized(sc, users, rows)
    folder = out / sc.name
    folder.mkdir(parents=True, exist_ok=True)
    events = ([r[0].isoformat(), *r[1:9], f"{r[9]:.2f}"] for r in rows)
    write_gzip(folder / "events.csv.gz", csv_text(COLUMNS, events))
    (folder / "users.csv").write_text(
        csv_text(
            ["user_id", "plan", "signup_channel", "segment", "signup_date"],
            (
                [u.user_id, u.plan, u.signup_channel, u.segment, u.signup_date.isoformat()]
                for u in users
            ),
        ),
        encoding="utf-8",
    )
    write_expected(folder, expected(sc, facts))
    return facts


def noise(runs: int) -> None:
    """Week-over-week change (baseline -> comparison) of each metric in the unchanged world."""
    metrics = sorted({(s.metric, s.grain) for s in SCENARIOS})
    changes: dict[tuple, list[float]] = defaultdict(list)
    for i in range(runs):
        users, rows = simulate(Scenario("noise", "sum(revenue)", ""), f"noise/{i}")
        by_id = {u.user_id: u for u in users}
        for metric, grain in metrics:
            sc = Scenario("noise", metric, "", grain=grain)
            changes[(metric, grain)].append(change(sc, rows, by_id, {})["relative"])
    for (metric, grain), xs in changes.items():
        print(
            f"{metric:32} grain={grain!s:5} runs={runs} mean={statistics.mean(xs):+.4f} "
            f"sd={statistics.stdev(xs):.4f} max|x|={max(map(abs, xs)):.4f}"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=HERE, help="output folder")
    ap.add_argument("--only", action="append", help="scenario name (repeatable)")
    ap.add_argument("--noise", type=int, metavar="RUNS", help="measure noise, write nothing")
    args = ap.parse_args(argv)
    if args.noise:
        noise(args.noise)
        return
    for sc in SCENARIOS:
        if args.only and sc.name not in args.only:
            continue
        facts = generate(sc, args.out)
        print(f"{sc.name:14} {facts['rows']:6,} rows  total {facts['total']['relative']:+.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
