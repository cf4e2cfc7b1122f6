"""A mix shift in a session log: ``python pattern_mix_channel.py [OUTDIR]`` writes ``mix_channel/``.

One row per session (``date, channel, platform, plan, country, sessions, purchases``; ``sessions``
is 1, ``purchases`` 0 or 1) over two weeks, baseline 2024-03-18..24, comparison 2024-03-25..31.
Each channel converts at its own rate, and the platform, plan and country shift that rate a
little; none of these rates changes. In the second week a social campaign brings 2.4 times as
many social sessions, so social's share of sessions grows and ``sum(purchases) / sum(sessions)`` falls. The answer is ``channel = social``, effect ``mix``,
and nothing else: its crossings with the other columns and the other channels' shrinking shares
are consequences. Standard library only, seeded, gzip without a timestamp.
"""

from __future__ import annotations

import random
import sys
from datetime import date, timedelta
from pathlib import Path

from generate import csv_text, write_expected, write_gzip

HERE = Path(__file__).resolve().parent
START = date(2024, 3, 18)
CHANNELS = {
    "organic": (1500, 0.11),
    "search": (900, 0.08),
    "social": (500, 0.025),
    "email": (350, 0.16),
}
PLATFORMS = {"ios": (0.4, 1.1), "android": (0.45, 0.95), "web": (0.15, 0.9)}
PLANS = {"free": (0.75, 0.9), "pro": (0.25, 1.3)}
COUNTRIES = {"US": (0.5, 1.05), "GB": (0.3, 1.0), "DE": (0.2, 0.9)}
CAMPAIGN = 2.4


def _pick(rng: random.Random, table: dict[str, tuple[float, float]]) -> tuple[str, float]:
    x, acc = rng.random(), 0.0
    for value, (weight, lift) in table.items():
        acc += weight
        if x < acc:
            return value, lift
    value = next(reversed(table))
    return value, table[value][1]


def main(argv: list[str]) -> int:
    out = (Path(argv[0]) if argv else HERE) / "mix_channel"
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random("metric-drilldown/scenarios/mix_channel")
    rows = []
    for i in range(14):
        day = START + timedelta(days=i)
        second = i >= 7
        for channel, (per_day, rate) in CHANNELS.items():
            n = per_day * (CAMPAIGN if second and channel == "social" else 1.0)
            for _ in range(int(rng.gauss(n, n**0.5))):
                platform, p_lift = _pick(rng, PLATFORMS)
                plan, q_lift = _pick(rng, PLANS)
                country, c_lift = _pick(rng, COUNTRIES)
                bought = 1 if rng.random() < rate * p_lift * q_lift * c_lift else 0
                rows.append([day.isoformat(), channel, platform, plan, country, 1, bought])
    header = ["date", "channel", "platform", "plan", "country", "sessions", "purchases"]
    write_gzip(out / "events.csv.gz", csv_text(header, rows))
    expected = {
        "scenario": "mix_channel",
        "generator": Path(__file__).name,
        "metric": "sum(purchases) / sum(sessions)",
        "table": "events",
        "grain": None,
        "time_column": "date",
        "baseline": "2024-03-18:2024-03-24",
        "comparison": "2024-03-25:2024-03-31",
        "dimensions": None,
        "significant": True,
        "root_causes": [{"segment": {"channel": "social"}, "effect": "mix"}],
        "effects": {"channel=social": "mix"},
        "global_shift": False,
        "data_quality": [],
        "missing_dates": [],
        "story": "a social campaign multiplies social sessions by 2.4; every rate stays the same",
        "planted": {"channels": {k: list(v) for k, v in CHANNELS.items()}, "campaign": CAMPAIGN},
        "realized": {"rows": len(rows)},
    }
    write_expected(out, expected)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
