"""Small sales files written the way real exports write them: month/day or day/month dates,
thousands separators, decimal commas, a legacy encoding. Each file has one planted cause (one
region's revenue falls in the second half), so an investigation of it has a known answer.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from tests.support.cli import drilldown

WEEK_1 = "2024-03-18:2024-03-24"
WEEK_2 = "2024-03-25:2024-03-31"
START = date(2024, 3, 18)
PLACES = ["Zürich", "Genève", "Bern", "Köln", "Malmö", "Besançon", "Ålesund"]


def us_date(d: date) -> str:
    return f"{d.month:02d}/{d.day:02d}/{d.year}"


def eu_date(d: date, sep: str = "/") -> str:
    return f"{d.day:02d}{sep}{d.month:02d}{sep}{d.year}"


def comma_thousands(x: float) -> str:
    return f"{x:,.2f}"


def dot_thousands_decimal_comma(x: float) -> str:
    return f"{x:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")


def space_thousands_decimal_comma(x: float) -> str:
    return f"{x:,.2f}".replace(",", " ").replace(".", ",")


@dataclass
class Sales:
    """A written file and what it holds."""

    path: Path
    rows: list[tuple[date, str, float]]
    dropped: str
    """The region whose revenue falls in the second half."""

    def total(self, first: date, last: date) -> float:
        return sum(v for d, _, v in self.rows if first <= d <= last)


def sales(
    path: Path,
    seed: int,
    *,
    day: Callable[[date], str] = str,
    amount: Callable[[float], str] = comma_thousands,
    delimiter: str = ",",
    encoding: str = "utf-8",
    days: int = 14,
    start: date = START,
) -> Sales:
    """``days`` days of orders in 3 to 5 regions, amounts of at least 1,000 so that every
    amount has a thousands group; one region's amounts fall by 70% from the middle day on.
    The header is ``Order Date``, ``Region``, ``Revenue``."""
    rng = random.Random(seed)
    regions = rng.sample(PLACES, rng.randint(3, 5))
    dropped = rng.choice(regions)
    level = {r: rng.uniform(8_000, 9_000) if r == dropped else rng.uniform(2_000, 5_000)
             for r in regions}  # fmt: skip
    per_day = rng.randint(2, 4)
    rows: list[tuple[date, str, float]] = []
    for i in range(days):
        d = start + timedelta(days=i)
        for region in regions:
            cut = 0.3 if i >= days // 2 and region == dropped else 1.0
            for _ in range(per_day):
                value = round(level[region] * cut * rng.uniform(0.95, 1.05), 2)
                rows.append((d, region, max(value, 1_000.0)))
    q = '"' if delimiter in amount(1234.5) else ""
    lines = [delimiter.join(["Order Date", "Region", "Revenue"])]
    lines += [delimiter.join([day(d), r, f"{q}{amount(v)}{q}"]) for d, r, v in rows]
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return Sales(path, rows, dropped)


def investigate(
    data: Path, out: Path, *options: str, metric: str = "sum(revenue)",
    baseline: str = WEEK_1, comparison: str = WEEK_2,
) -> subprocess.CompletedProcess[str]:
    """``drilldown investigate`` offline, without memory."""
    return drilldown(
        "investigate", str(data), "--metric", metric, "--baseline", baseline,
        "--comparison", comparison, "--offline", "--no-remember", "--out", str(out), *options,
    )  # fmt: skip


def one_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line of a run that exited 2."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]
