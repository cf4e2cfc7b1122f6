"""Regenerate the demo dataset (deterministic): ``python data/demo/generate.py``.

Four weeks of app events for 800 users plus a users table. App version 5.2 has been out on
iOS and Android for the whole period. Planted cause: on 2024-03-25 a payment change breaks
checkout in iOS 5.2 only; those users buy far less in the last week (2024-03-25..2024-03-31)
than in the week before (2024-03-18..2024-03-24). iOS 5.1, Android 5.2 and web move only by
noise, so the cause is the pair platform=ios, app_version=5.2, not either value alone. See data/README.md and expected.json.
"""

from __future__ import annotations

import csv
import random
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).parent
START = date(2024, 3, 4)
DAYS = 28
BREAKAGE = date(2024, 3, 25)
COUNTRIES = ["US", "DE", "BR", "IN", "GB"]
PLANS = ["free", "plus", "pro"]
CHANNELS = ["organic", "ads", "referral"]


def main() -> None:
    rng = random.Random(20240325)
    users = []
    for uid in range(1001, 1801):
        platform = rng.choices(["ios", "android", "web"], [0.4, 0.4, 0.2])[0]
        users.append(
            {
                "user_id": uid,
                "plan": rng.choices(PLANS, [0.6, 0.3, 0.1])[0],
                "signup_channel": rng.choice(CHANNELS),
                "signup_date": (START - timedelta(days=rng.randint(10, 400))).isoformat(),
                "platform": platform,
                "country": rng.choices(COUNTRIES, [0.35, 0.2, 0.15, 0.2, 0.1])[0],
                "activity": rng.uniform(0.45, 0.9),
                "version": "web" if platform == "web" else rng.choice(["5.1", "5.2"]),
            }
        )
    rows = []
    for d in range(DAYS):
        day = START + timedelta(days=d)
        for u in users:
            if rng.random() > u["activity"]:
                continue
            version = u["version"]
            sessions = 1 + int(rng.expovariate(0.6))
            rate = {"free": 0.05, "plus": 0.09, "pro": 0.14}[u["plan"]]
            if u["platform"] == "ios" and version == "5.2" and day >= BREAKAGE:
                rate *= 0.25  # the broken checkout
            purchases = sum(rng.random() < rate for _ in range(sessions))
            revenue = round(sum(rng.uniform(8, 30) for _ in range(purchases)), 2)
            rows.append(
                [
                    day.isoformat(),
                    u["user_id"],
                    u["platform"],
                    version,
                    u["country"],
                    sessions,
                    purchases,
                    f"{revenue:.2f}",
                ]
            )
    with open(HERE / "events.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(
            [
                "date",
                "user_id",
                "platform",
                "app_version",
                "country",
                "sessions",
                "purchases",
                "revenue",
            ]
        )
        w.writerows(rows)
    with open(HERE / "users.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["user_id", "plan", "signup_channel", "signup_date"])
        for u in users:
            w.writerow([u["user_id"], u["plan"], u["signup_channel"], u["signup_date"]])


if __name__ == "__main__":
    main()
