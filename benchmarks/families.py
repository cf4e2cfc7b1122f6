"""Exact-answer rate of the engine on randomized families of product-shaped cases.

``python -m benchmarks.families [--families k_of_n,even_shift] [--draws 50] [--range tune|report]``

A *family* is one shape of change (a few values of one column moved, a mix shift, two
overlapping causes, an even shift, nothing at all...). Each *draw* of a family is a fresh,
seeded world and plant: which values exist and how common they are, which dimension and values
carry the cause, the effect sizes, the direction and the metric are all random. The engine is run
on the draw as a user runs it (CSV files loaded with the product's loader, the question built with
the product's parser, every categorical column searched) and the answer is scored *exact* or not.

Worlds (every family but ``preaggregated``): ``events.csv`` has one row per active user and day
over 28 days from 2024-03-04 (``date``, ``user_id``, ``platform``, ``app_version`` nested in the
platform, ``country``, ``device``, ``sessions``, ``purchases``, ``revenue``); ``users.csv``
(``user_id``, ``channel``, ``plan``, ``age_group``) is joined by ``user_id``. Each user has a
daily chance to be active, a mean number of sessions, a conversion rate and an order value, all
drawn with wide spread; days carry day-of-week effects and day-level and country-by-day shocks,
and counts are Poisson / binomial, so segments are noisy the way real ones are. The baseline is
2024-03-18..24, the comparison 2024-03-25..31. Plants change the comparison week's *generating
process* for the users of a segment (their chance to be active, their conversion, their order
value, or their sessions per day); aggregates are never edited.

Every planted cause is *visible*: its expected effect on the metric (the expected total with all
plants minus the expected total without this one) is at least 6 standard deviations of the
segment's week-over-week change in the unplanted world (measured by simulating the two weeks of
the same world again with fresh noise, :data:`REPLICATES` times) and at least 5% of the absolute
expected total change; effect sizes, and if needed the segments, are drawn again until it is.

The families (metric: ``sum(revenue)``, ``sum(sessions)``, ``count(*)`` or daily
``count(distinct user_id)``, one drawn per draw, unless said otherwise):

* ``k_of_n``: k of the n values of one column (1 <= k < n) move in one direction, each by its
  own factor (-40%..-10% or +10%..+60%); the rest is flat. Answer: those k one-column segments.
* ``mix_low`` / ``mix_high``: ``sum(purchases) / sum(sessions)``; the values of a ``users``
  column convert differently, one value converting below (above) average gets 2-3x its share of
  sessions, and no value's own conversion changes. Answer: that value, effect ``mix``.
* ``overlapping``: ``A=a & B=b`` and ``A=a & C=c`` move, each by its own factor, one direction
  (their overlap by both). Answer: the two segments.
* ``two_plus_one``: a two-column segment and a one-column segment on a third column, each its
  own factor and direction. Answer: the two segments.
* ``even_shift``: everything moves by one factor (-30%..-8% or +8%..+30%). Answer: no root
  cause, a global shift, a significant change.
* ``noise_only``: nothing moves. Answer: no root cause, no global shift.
* ``offsetting``: two one-column segments move in opposite directions, the net expected change
  at most 30% of the gross. Answer: the two segments.
* ``preaggregated``: one row per cell of four dimensions (about 1,000-9,000 cells) and period
  label (``2024-01`` / ``2024-02`` style), ``sum(revenue)`` or ``sum(revenue) / sum(orders)``,
  lognormal noise (sigma 0.03-0.1) per cell and period; 1-2 causes of one or two columns, and
  in half the draws an even shift of everything by 3%..10% too. Answer: the causes, and a
  global shift exactly when one was planted.

Scoring: the reported root causes, as sets of ``(column, value)`` pairs, must equal the planted
ones one to one; a reported cause matches a planted one when its segment or one of its aliases
names it (``users.channel`` and ``channel`` are the same column when the base table has no
``channel`` of its own). A global shift must be reported exactly when one was planted, the change
must be significant for ``even_shift``, and the mix families' cause must have effect ``mix``.
Each planted cause not named is told by what the engine's answer says of its evidence (under
the bound, explained by the named causes, or left out by them: :func:`missed_evidence`).

Seeds: ``--range tune`` uses seeds ``0..N-1``, ``--range report`` seeds ``100000..100000+N-1``;
choices made while looking at the tune range are confirmed on the report range.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import multiprocessing.connection
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._machine import machine_facts, machine_line
from benchmarks.rca_score import value_text

FAMILIES = (
    "k_of_n",
    "mix_low",
    "mix_high",
    "overlapping",
    "two_plus_one",
    "even_shift",
    "noise_only",
    "offsetting",
    "preaggregated",
)
RANGES = {"tune": 0, "report": 100_000}

START = date(2024, 3, 4)  # a Monday
DAYS = 28
BASE_DAY, CMP_DAY = 14, 21  # first day of the baseline and of the comparison week
BASELINE = "2024-03-18:2024-03-24"
COMPARISON = "2024-03-25:2024-03-31"
DATES = [(START + timedelta(days=d)).isoformat() for d in range(DAYS)]

MIN_Z = 6.0  # a planted effect is at least this many noise standard deviations
MIN_SHARE = 0.05  # ... and at least this share of the absolute total change
REPLICATES = 24  # unplanted re-simulations of the two weeks, to measure the noise
MAX_WORLDS = 40  # worlds tried before a draw gives up

# metric key -> (expression, grain)
METRICS = {
    "revenue": ("sum(revenue)", None),
    "sessions": ("sum(sessions)", None),
    "rows": ("count(*)", None),
    "dau": ("count(distinct user_id)", "day"),
    "conversion": ("sum(purchases) / sum(sessions)", None),
}
ADDITIVE = ("revenue", "sessions", "rows", "dau")

EVENT_COLUMNS = [
    "date",
    "user_id",
    "platform",
    "app_version",
    "country",
    "device",
    "sessions",
    "purchases",
    "revenue",
]
USER_COLUMNS = ["user_id", "channel", "plan", "age_group"]
EVENT_DIMS = ("platform", "app_version", "country", "device")
USER_DIMS = ("users.channel", "users.plan", "users.age_group")
DIMS = EVENT_DIMS + USER_DIMS

COUNTRY_POOL = ["US", "GB", "DE", "FR", "BR", "IN", "JP", "MX", "CA", "ES", "IT", "AU"]
CHANNEL_POOL = ["organic", "paid_search", "paid_social", "email", "referral", "affiliate"]
AGE_POOL = ["18-24", "25-34", "35-44", "45-54", "55+"]
PLANS = ["free", "plus", "pro"]
DOW_ACTIVITY = (1.00, 1.01, 1.02, 1.00, 0.95, 0.86, 0.89)  # Monday..Sunday
DOW_CONVERSION = (0.97, 0.97, 0.98, 1.00, 1.03, 1.06, 1.04)
WHATS = ("activity", "conversion", "price", "depth")
QUANTITIES = ("rows", "sessions", "purchases", "revenue")


class Redraw(Exception):
    """The drawn plant is not visible enough (or degenerate): draw again."""


# --------------------------------------------------------------------------------------------
# random helpers


def _shares(rng: np.random.Generator, n: int, alpha: float, floor: float) -> np.ndarray:
    """``n`` random shares summing to 1, none below about ``floor``."""
    w = np.maximum(rng.dirichlet([alpha] * n), floor)
    return w / w.sum()


def _mean_one(rng: np.random.Generator, sigma: float, size: Any = None) -> Any:
    """Lognormal noise with mean 1."""
    return np.exp(rng.normal(-sigma * sigma / 2, sigma, size))


def _factor(rng: np.random.Generator, direction: int) -> float:
    """A segment's factor: -40%..-10% down, +10%..+60% up."""
    return float(rng.uniform(0.60, 0.90) if direction < 0 else rng.uniform(1.10, 1.60))


def _rng_streams(family: str, seed: int, n: int) -> list[np.random.Generator]:
    ss = np.random.SeedSequence([zlib.crc32(family.encode()), seed])
    return [np.random.default_rng(s) for s in ss.spawn(n)]


def _seg_text(segment: dict[str, Any]) -> str:
    return "&".join(f"{k}={v}" for k, v in sorted(segment.items())) or "(all)"


# --------------------------------------------------------------------------------------------
# the world of users


@dataclass
class World:
    """Users with fixed attributes and habits, and the noise levels of their days."""

    n: int
    codes: dict[str, np.ndarray]  # dimension ref -> value index per user
    labels: dict[str, list[str]]  # dimension ref -> value labels
    act: np.ndarray  # daily chance to be active
    lam: np.ndarray  # mean extra sessions per active day (Poisson)
    conv_user: np.ndarray  # per-user conversion multiplier (mean one)
    conv_base: float
    conv_mult: dict[str, np.ndarray]  # dimension ref -> conversion multiplier per value
    basket: np.ndarray  # mean order value
    dow_act: np.ndarray
    dow_conv: np.ndarray
    day_act_sigma: float
    country_day_sigma: float
    day_conv_sigma: float
    order_sigma: float = 0.4
    first_user_id: int = 100001

    def conv(self) -> np.ndarray:
        c = self.conv_base * self.conv_user
        for ref, mult in self.conv_mult.items():
            c = c * mult[self.codes[ref]]
        return c

    def mask(self, segment: dict[str, str]) -> np.ndarray:
        m = np.ones(self.n, dtype=bool)
        for ref, value in segment.items():
            m &= self.codes[ref] == self.labels[ref].index(value)
        return m

    def values(self, ref: str) -> list[str]:
        """Values of a dimension that some user has."""
        present = np.bincount(self.codes[ref], minlength=len(self.labels[ref])) > 0
        return [v for v, p in zip(self.labels[ref], present, strict=True) if p]


def _assign(rng: np.random.Generator, n: int, weights: np.ndarray) -> np.ndarray:
    return rng.choice(len(weights), size=n, p=weights)


def make_world(rng: np.random.Generator) -> World:
    """A random product: which values exist, how common they are, and the users' habits."""
    n = int(rng.integers(2500, 6501))
    codes: dict[str, np.ndarray] = {}
    labels: dict[str, list[str]] = {}

    labels["platform"] = ["ios", "android", "web"]
    platform = _assign(rng, n, _shares(rng, 3, 5.0, 0.12))
    codes["platform"] = platform

    major = int(rng.integers(5, 13))
    top = int(rng.integers(4, 10))
    top_android = top - int(rng.integers(0, 2))
    versions = {
        0: [f"{major}.{m}" for m in range(top - int(rng.integers(1, 3)), top + 1)],
        1: [f"{major}.{m}" for m in range(top_android - int(rng.integers(1, 4)), top_android + 1)],
        2: ["web"],
    }
    names = sorted({v for vs in versions.values() for v in vs if v != "web"}, key=_version_key)
    labels["app_version"] = [*names, "web"]
    app_version = np.zeros(n, dtype=int)
    for p, vs in versions.items():
        idx = np.flatnonzero(platform == p)
        w = np.sort(_shares(rng, len(vs), 1.5, 0.06))  # the newest is the most common
        pick = _assign(rng, len(idx), w)
        app_version[idx] = np.array([labels["app_version"].index(v) for v in vs])[pick]
    codes["app_version"] = app_version

    labels["device"] = ["phone", "tablet", "desktop"]
    device = np.zeros(n, dtype=int)
    for p in (0, 1):
        idx = np.flatnonzero(platform == p)
        device[idx] = (rng.random(len(idx)) < rng.uniform(0.08, 0.35)).astype(int)
    idx = np.flatnonzero(platform == 2)
    device[idx] = np.where(rng.random(len(idx)) < rng.uniform(0.55, 0.85), 2, 0)
    codes["device"] = device

    k = int(rng.integers(6, 9))
    labels["country"] = sorted(rng.choice(COUNTRY_POOL, k, replace=False).tolist())
    codes["country"] = _assign(rng, n, _shares(rng, k, 1.2, 0.03))

    k = int(rng.integers(4, 6))
    labels["users.channel"] = sorted(rng.choice(CHANNEL_POOL, k, replace=False).tolist())
    codes["users.channel"] = _assign(rng, n, _shares(rng, k, 1.5, 0.05))

    labels["users.plan"] = list(PLANS)
    free = rng.uniform(0.45, 0.75)
    plus = (1 - free) * rng.uniform(0.4, 0.7)
    codes["users.plan"] = _assign(rng, n, np.array([free, plus, 1 - free - plus]))

    k = int(rng.integers(3, 5))
    labels["users.age_group"] = sorted(rng.choice(AGE_POOL, k, replace=False).tolist())
    codes["users.age_group"] = _assign(rng, n, _shares(rng, k, 2.0, 0.06))

    spread = rng.uniform(0.4, 0.6)
    act = np.minimum(0.75, rng.uniform(0.20, 0.32) * np.exp(rng.normal(0, spread, n)))
    lam = rng.uniform(0.5, 1.3) * np.exp(rng.normal(0, 0.5, n))
    conv_mult = {
        "users.plan": np.array([1.0, rng.uniform(1.15, 1.5), rng.uniform(1.5, 2.2)]),
        "users.channel": rng.uniform(0.5, 1.5, len(labels["users.channel"])),
    }
    price_country = rng.uniform(0.4, 1.1, len(labels["country"]))
    basket = (
        rng.uniform(15, 35)
        * np.array([1.0, 1.1, 1.3])[codes["users.plan"]]
        * price_country[codes["country"]]
        * np.array([1.0, 1.12, 1.1])[device]
        * _mean_one(rng, 0.25, n)
    )
    return World(
        n=n,
        codes=codes,
        labels=labels,
        act=act,
        lam=lam,
        conv_user=_mean_one(rng, 0.4, n),
        conv_base=float(rng.uniform(0.10, 0.18)),
        conv_mult=conv_mult,
        basket=basket,
        dow_act=np.array(DOW_ACTIVITY) * (1 + rng.normal(0, 0.01, 7)),
        dow_conv=np.array(DOW_CONVERSION) * (1 + rng.normal(0, 0.01, 7)),
        day_act_sigma=float(rng.uniform(0.01, 0.03)),
        country_day_sigma=float(rng.uniform(0.02, 0.05)),
        day_conv_sigma=float(rng.uniform(0.01, 0.03)),
    )


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


# --------------------------------------------------------------------------------------------
# plants, simulation, expectations, noise


@dataclass(frozen=True)
class Plant:
    """From the first comparison day, ``what`` is multiplied by ``factor`` for the segment's
    users."""

    segment: dict[str, str]
    what: str  # one of WHATS
    factor: float


@dataclass
class Cause:
    """One planted root cause: a segment and the plants that move it."""

    segment: dict[str, str]
    plants: list[Plant]
    effect: str = "rate"


def _multipliers(w: World, plants: Sequence[Plant]) -> dict[str, np.ndarray]:
    mult = {what: np.ones(w.n) for what in WHATS}
    for p in plants:
        mult[p.what][w.mask(p.segment)] *= p.factor
    return mult


def simulate(
    w: World, plants: Sequence[Plant], rng: np.random.Generator, days: Sequence[int]
) -> dict[str, np.ndarray]:
    """Event rows (day, user index, sessions, purchases, revenue) of ``days``."""
    mult = _multipliers(w, plants)
    conv0 = w.conv()
    country = w.codes["country"]
    n_countries = len(w.labels["country"])
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("day", "user", "s", "p", "r")}
    for d in days:
        dow = d % 7
        after = d >= CMP_DAY
        shock = _mean_one(rng, w.day_act_sigma) * _mean_one(rng, w.country_day_sigma, n_countries)
        p = w.act * w.dow_act[dow] * shock[country]
        if after:
            p = p * mult["activity"]
        active = np.flatnonzero(rng.random(w.n) < np.minimum(p, 0.99))
        lam = w.lam[active]
        if after:
            lam = np.maximum((1 + lam) * mult["depth"][active] - 1, 0)
        sessions = 1 + rng.poisson(lam)
        conv = conv0[active] * w.dow_conv[dow] * _mean_one(rng, w.day_conv_sigma)
        price = w.basket[active]
        if after:
            conv = conv * mult["conversion"][active]
            price = price * mult["price"][active]
        purchases = rng.binomial(sessions, np.minimum(conv, 0.95))
        k = np.maximum(purchases, 1)
        sigma = w.order_sigma / np.sqrt(k)
        revenue = purchases * price * np.exp(rng.normal(-sigma * sigma / 2, sigma))
        out["day"].append(np.full(len(active), d))
        out["user"].append(active)
        out["s"].append(sessions)
        out["p"].append(purchases)
        out["r"].append(np.round(revenue, 2))
    return {k: np.concatenate(v) for k, v in out.items()}


def expected_week(w: World, plants: Sequence[Plant]) -> dict[str, np.ndarray]:
    """Per user, the expected week of rows, sessions, purchases and revenue (plants applied)."""
    mult = _multipliers(w, plants)
    conv0 = w.conv()
    per_row = 1 + np.maximum((1 + w.lam) * mult["depth"] - 1, 0)
    rows = np.zeros(w.n)
    purchases = np.zeros(w.n)
    for dow in range(7):
        p = np.minimum(w.act * w.dow_act[dow] * mult["activity"], 0.99)
        c = np.minimum(conv0 * w.dow_conv[dow] * mult["conversion"], 0.95)
        rows += p
        purchases += p * per_row * c
    return {
        "rows": rows,
        "sessions": rows * per_row,
        "purchases": purchases,
        "revenue": purchases * w.basket * mult["price"],
    }


def quantity(metric: str, q: dict[str, np.ndarray]) -> np.ndarray:
    """An additive metric's per-user (or per-replicate, per-user) value from week totals."""
    if metric == "revenue":
        return q["revenue"]
    if metric == "sessions":
        return q["sessions"]
    if metric == "rows":
        return q["rows"]
    if metric == "dau":  # one row per active user and day: daily distinct users, averaged
        return q["rows"] / 7
    raise ValueError(metric)


def _week_totals(rows: dict[str, np.ndarray], n: int, first: int) -> dict[str, np.ndarray]:
    sel = (rows["day"] >= first) & (rows["day"] < first + 7)
    u = rows["user"][sel]
    return {
        "rows": np.bincount(u, minlength=n).astype(float),
        "sessions": np.bincount(u, weights=rows["s"][sel], minlength=n),
        "purchases": np.bincount(u, weights=rows["p"][sel], minlength=n),
        "revenue": np.bincount(u, weights=rows["r"][sel], minlength=n),
    }


@dataclass
class Noise:
    """Week totals per replicate and user of the unplanted world: ``base[q]`` and ``cmp[q]``,
    R x n arrays."""

    base: dict[str, np.ndarray]
    cmp: dict[str, np.ndarray]

    def sd(self, metric: str, mask: np.ndarray) -> float:
        """Standard deviation of a segment's week-over-week change of an additive metric."""
        after = quantity(metric, self.cmp)[:, mask].sum(1)
        delta = after - quantity(metric, self.base)[:, mask].sum(1)
        return float(np.std(delta, ddof=1))

    def _by_value(self, codes: np.ndarray, k: int, i: int) -> list[np.ndarray]:
        return [
            np.bincount(codes, weights=week[q][i], minlength=k)
            for week in (self.base, self.cmp)
            for q in ("sessions", "purchases")
        ]

    def contribution_sd(self, codes: np.ndarray, k: int, value: int) -> float:
        """Standard deviation of one value's contribution to the conversion's change."""
        reps = range(self.base["sessions"].shape[0])
        terms = [_contribution(*self._by_value(codes, k, i), value) for i in reps]
        return float(np.std(terms, ddof=1))

    def ratio_sd(self) -> float:
        """Standard deviation of the conversion's week-over-week change."""
        before = self.base["purchases"].sum(1) / self.base["sessions"].sum(1)
        after = self.cmp["purchases"].sum(1) / self.cmp["sessions"].sum(1)
        return float(np.std(after - before, ddof=1))


def _mix_term(s0: np.ndarray, p0: np.ndarray, s1: np.ndarray, value: int) -> float:
    """``(s' - s)(r - R)``: a value's part of the conversion's change due to its share alone."""
    rate = p0[value] / s0[value]
    total = p0.sum() / s0.sum()
    return float((s1[value] / s1.sum() - s0[value] / s0.sum()) * (rate - total))


def _contribution(
    s0: np.ndarray, p0: np.ndarray, s1: np.ndarray, p1: np.ndarray, value: int
) -> float:
    """``s'(r' - r) + (s' - s)(r - R)``: a value's part of the conversion's change (the parts
    of all values add up to the change)."""
    own = s1[value] / s1.sum() * (p1[value] / s1[value] - p0[value] / s0[value])
    return float(own + _mix_term(s0, p0, s1, value))


def measure_noise(w: World, rng: np.random.Generator, replicates: int = REPLICATES) -> Noise:
    """Simulate the two weeks of the unplanted world ``replicates`` times."""
    base: dict[str, list[np.ndarray]] = {k: [] for k in QUANTITIES}
    cmp: dict[str, list[np.ndarray]] = {k: [] for k in base}
    for _ in range(replicates):
        rows = simulate(w, [], rng, range(BASE_DAY, DAYS))
        for week, first in ((base, BASE_DAY), (cmp, CMP_DAY)):
            for k, v in _week_totals(rows, w.n, first).items():
                week[k].append(v)
    return Noise(
        base={k: np.vstack(v) for k, v in base.items()},
        cmp={k: np.vstack(v) for k, v in cmp.items()},
    )


# --------------------------------------------------------------------------------------------
# visibility of a plan


@dataclass
class Plan:
    """What a family planted in a world, and the facts that show it is visible."""

    metric: str
    causes: list[Cause]
    shift: list[Plant] = field(default_factory=list)  # an even move of everything
    global_shift: bool = False
    significant: bool | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def plants(self) -> list[Plant]:
        return [p for c in self.causes for p in c.plants] + list(self.shift)


def _total(w: World, metric: str, plants: Sequence[Plant], mask: np.ndarray | None = None) -> float:
    q = quantity(metric, expected_week(w, plants))
    return float(q.sum() if mask is None else q[mask].sum())


def check_visible(w: World, noise: Noise, plan: Plan) -> dict[str, Any]:
    """Facts of an additive plan; raises :class:`Redraw` unless every cause (and the shift) is
    at least :data:`MIN_Z` noise SDs and :data:`MIN_SHARE` of the absolute total change."""
    m = plan.metric
    everything = plan.plants
    before = _total(w, m, [])
    after = _total(w, m, everything)
    total = after - before
    causes = []
    for c in plan.causes:
        without = [p for p in everything if all(p is not q for q in c.plants)]
        effect = after - _total(w, m, without)
        mask = w.mask(c.segment)
        sd = noise.sd(m, mask)
        z = abs(effect) / sd if sd > 0 else math.inf
        if z < MIN_Z or abs(effect) < MIN_SHARE * abs(total):
            raise Redraw(f"{_seg_text(c.segment)}: z {z:.1f}, effect {effect:.4g} of {total:.4g}")
        seg_before = _total(w, m, [], mask)
        causes.append(
            {
                "segment": c.segment,
                "plants": [{"what": p.what, "factor": round(p.factor, 4)} for p in c.plants],
                "expected_effect": round(effect, 4),
                "noise_sd": round(sd, 4),
                "z": round(z, 1),
                "share_of_total": round(effect / total, 3) if total else None,
                "volume_share": round(seg_before / before, 4),
                "expected_relative": round(_total(w, m, everything, mask) / seg_before - 1, 4),
            }
        )
    facts: dict[str, Any] = {
        "expected_total_relative": round(total / before, 4),
        "causes": causes,
    }
    if plan.shift:
        shift_effect = after - _total(w, m, [p for c in plan.causes for p in c.plants])
        sd = noise.sd(m, np.ones(w.n, dtype=bool))
        z = abs(shift_effect) / sd
        if z < MIN_Z:
            raise Redraw(f"shift: z {z:.1f}")
        facts["shift"] = {
            "what": plan.shift[0].what,
            "factor": round(plan.shift[0].factor, 4),
            "expected_effect": round(shift_effect, 4),
            "noise_sd": round(sd, 4),
            "z": round(z, 1),
        }
    return facts


# --------------------------------------------------------------------------------------------
# segment choices


def _mechanism(rng: np.random.Generator, metric: str) -> str:
    """How a plant moves the metric: revenue through activity, conversion or order value; the
    counts through activity."""
    if metric == "revenue":
        return str(rng.choice(["activity", "conversion", "price"]))
    return "activity"


def _volume(w: World, metric: str) -> np.ndarray:
    return quantity(metric, expected_week(w, []))


def _simpler_union(w: World, ref: str, values: Sequence[str]) -> bool:
    """True when the rows of ``ref in values`` are also fewer values of another column (say
    every iOS version: that is ``platform=ios``)."""
    union = np.zeros(w.n, dtype=bool)
    for v in values:
        union |= w.mask({ref: v})
    for other in DIMS:
        if other == ref:
            continue
        inside = [v for v in w.values(other) if union[w.mask({other: v})].all()]
        if not inside or len(inside) >= len(values):
            continue
        cover = np.zeros(w.n, dtype=bool)
        for v in inside:
            cover |= w.mask({other: v})
        if np.array_equal(cover, union):
            return True
    return False


def _is_single(w: World, mask: np.ndarray) -> bool:
    """True when ``mask`` is exactly the users of one value of some column."""
    for ref in DIMS:
        for v in w.values(ref):
            if np.array_equal(w.mask({ref: v}), mask):
                return True
    return False


def _random_value(rng: np.random.Generator, w: World, ref: str) -> str:
    return str(rng.choice(w.values(ref)))


def _pair(
    rng: np.random.Generator, w: World, vol: np.ndarray, a_ref: str, a_val: str, b_ref: str
) -> dict[str, str]:
    """A two-column segment ``{a_ref: a_val, b_ref: b}`` that is a real intersection: not a
    single value of any column, and at most 70% of either parent."""
    b_val = _random_value(rng, w, b_ref)
    seg = {a_ref: a_val, b_ref: b_val}
    inter = w.mask(seg)
    v = vol[inter].sum()
    if v < 0.01 * vol.sum() or _is_single(w, inter):
        raise Redraw("pair too small or a single value")
    for parent in ({a_ref: a_val}, {b_ref: b_val}):
        if v > 0.7 * vol[w.mask(parent)].sum():
            raise Redraw("pair is most of a parent")
    return seg


def _nested_or_same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool((a <= b).all() or (b <= a).all())


# --------------------------------------------------------------------------------------------
# families on the world of users


def _visible(
    w: World,
    noise: Noise,
    metric: str,
    what: str,
    segments: Sequence[dict[str, str]],
    factor: Callable[[], float],
) -> Plan | None:
    """A plan of one cause per segment, each moved by a fresh ``factor()``, drawn again up to
    :data:`EFFECT_TRIES` times until every cause is visible (:func:`check_visible`); None when
    none was."""
    for _ in range(EFFECT_TRIES):
        plan = Plan(metric, [Cause(s, [Plant(s, what, factor())]) for s in segments])
        try:
            plan.facts = check_visible(w, noise, plan)
        except Redraw:
            continue
        return plan
    return None


EFFECT_TRIES = 6


def plan_k_of_n(rng: np.random.Generator, w: World, noise: Noise, setup: dict[str, Any]) -> Plan:
    """k of a column's n values move, each by its own factor, one direction; the rest is flat."""
    metric, what, ref = setup["metric"], setup["what"], setup["column"]
    values = w.values(ref)
    if len(values) < 3:
        raise Redraw(f"{ref} has fewer than 3 values")
    for _ in range(30):
        k = int(rng.integers(1, len(values)))
        chosen = sorted(rng.choice(values, k, replace=False).tolist())
        if k >= 2 and _simpler_union(w, ref, chosen):
            continue
        direction = int(rng.choice([-1, 1]))
        segments = [{ref: v} for v in chosen]
        plan = _visible(w, noise, metric, what, segments, lambda: _factor(rng, direction))
        if plan is not None:
            plan.facts.update(column=ref, n=len(values), k=k, direction=direction)
            return plan
    raise Redraw("k_of_n: no visible plant")


def plan_overlapping(
    rng: np.random.Generator, w: World, noise: Noise, setup: dict[str, Any]
) -> Plan:
    """Two two-column causes sharing one column value (``A=a & B=b`` and ``A=a & C=c``)."""
    metric, what = setup["metric"], setup["what"]
    vol = _volume(w, metric)
    for _ in range(40):
        a_ref, b_ref, c_ref = (str(x) for x in rng.choice(DIMS, 3, replace=False))
        a_val = _random_value(rng, w, a_ref)
        try:
            s1 = _pair(rng, w, vol, a_ref, a_val, b_ref)
            s2 = _pair(rng, w, vol, a_ref, a_val, c_ref)
        except Redraw:
            continue
        m1, m2 = w.mask(s1), w.mask(s2)
        parent = w.mask({a_ref: a_val})
        if _nested_or_same(m1, m2) or vol[m1 | m2].sum() > 0.7 * vol[parent].sum():
            continue
        direction = int(rng.choice([-1, 1]))
        plan = _visible(w, noise, metric, what, [s1, s2], lambda: _factor(rng, direction))
        if plan is not None:
            plan.facts.update(shared={a_ref: a_val}, direction=direction)
            return plan
    raise Redraw("overlapping: no visible plant")


def plan_two_plus_one(
    rng: np.random.Generator, w: World, noise: Noise, setup: dict[str, Any]
) -> Plan:
    """One two-column cause plus one one-column cause on a third column; each its own direction."""
    metric, what = setup["metric"], setup["what"]
    vol = _volume(w, metric)
    for _ in range(40):
        a_ref, b_ref, d_ref = (str(x) for x in rng.choice(DIMS, 3, replace=False))
        try:
            pair = _pair(rng, w, vol, a_ref, _random_value(rng, w, a_ref), b_ref)
        except Redraw:
            continue
        single = {d_ref: _random_value(rng, w, d_ref)}
        mp, ms = w.mask(pair), w.mask(single)
        if _nested_or_same(mp, ms) or vol[ms].sum() > 0.6 * vol.sum():
            continue
        if any(np.array_equal(ms, w.mask({k: v})) for k, v in pair.items()):
            continue  # the single is another name of one of the pair's parents
        plan = _visible(
            w, noise, metric, what, [pair, single], lambda: _factor(rng, int(rng.choice([-1, 1])))
        )
        if plan is not None:
            return plan
    raise Redraw("two_plus_one: no visible plant")


def plan_even_shift(
    rng: np.random.Generator, w: World, noise: Noise, setup: dict[str, Any]
) -> Plan:
    """Everything moves by one factor, -30%..-8% or +8%..+30% (activity, or order value)."""
    metric = setup["metric"]
    what = "activity" if setup["what"] == "conversion" else setup["what"]
    for _ in range(10):
        sign = int(rng.choice([-1, 1]))
        factor = 1 + sign * float(rng.uniform(0.08, 0.30))
        shift = [Plant({}, what, factor)]
        plan = Plan(metric, [], shift=shift, global_shift=True, significant=True)
        try:
            plan.facts = check_visible(w, noise, plan)
        except Redraw:
            continue
        return plan
    raise Redraw("even_shift: not visible")


def plan_noise_only(
    rng: np.random.Generator, w: World, noise: Noise, setup: dict[str, Any]
) -> Plan:
    """Nothing planted."""
    return Plan(setup["metric"], [], facts={"expected_total_relative": 0.0, "causes": []})


def plan_offsetting(
    rng: np.random.Generator, w: World, noise: Noise, setup: dict[str, Any]
) -> Plan:
    """Two one-column segments move in opposite directions by nearly equal amounts: the net
    change is at most 30% of the gross movement."""
    metric, what = setup["metric"], setup["what"]
    vol = _volume(w, metric)
    for _ in range(60):
        r1, r2 = (str(x) for x in rng.choice(DIMS, 2))
        s1 = {r1: _random_value(rng, w, r1)}
        s2 = {r2: _random_value(rng, w, r2)}
        m1, m2 = w.mask(s1), w.mask(s2)
        if _nested_or_same(m1, m2) or (m1 | m2).all():
            continue
        direction = int(rng.choice([-1, 1]))
        f1 = 1 + direction * float(rng.uniform(0.15, 0.40 if direction < 0 else 0.60))
        c1 = _total(w, metric, [Plant(s1, what, f1)]) - _total(w, metric, [])
        f2 = 1 - float(rng.uniform(0.6, 1.6)) * c1 / vol[m2].sum()
        if not (0.5 <= f2 <= 1.7 and abs(f2 - 1) >= 0.08):
            continue
        causes = [Cause(s1, [Plant(s1, what, f1)]), Cause(s2, [Plant(s2, what, f2)])]
        plan = Plan(metric, causes)
        try:
            plan.facts = check_visible(w, noise, plan)
        except Redraw:
            continue
        e = [c["expected_effect"] for c in plan.facts["causes"]]
        gross = abs(e[0]) + abs(e[1])
        if e[0] * e[1] >= 0 or abs(e[0] + e[1]) > 0.3 * gross:
            continue
        plan.facts["net_over_gross"] = round(abs(e[0] + e[1]) / gross, 3)
        return plan
    raise Redraw("offsetting: no visible plant")


def _plan_mix(
    rng: np.random.Generator, w: World, noise_rng: np.random.Generator, ref: str, low: bool
) -> Plan:
    """A joined users column's values convert differently; the chosen value's share of sessions
    grows 2-3x (more of its users active, and more sessions a day) while every value's own
    conversion stays the same. ``low``: the chosen value converts below average.

    Visible means: the value's expected contribution to the conversion's change (its mix term;
    its own rate does not move) is at least :data:`MIN_Z` SDs of that contribution's
    week-over-week noise, ``s'(r' - r) + (s' - s)(r - R)``, which carries the value's own rate
    noise at its grown share; and, as this one cause is the whole change, the conversion's
    expected change is at least :data:`MIN_Z` SDs of its own noise too."""
    k = len(w.labels[ref])
    codes = w.codes[ref]
    sess0 = np.bincount(codes, weights=expected_week(w, [])["sessions"], minlength=k)
    share0 = sess0 / sess0.sum()
    eligible = [i for i in range(k) if 0 < share0[i] <= 0.3]  # room to grow at least 2x
    if not eligible:
        raise Redraw("mix: no value small enough to grow")
    value = int(rng.choice(eligible))
    mult = rng.uniform(0.75, 1.3, k)
    mult[value] = rng.uniform(0.25, 0.6) if low else rng.uniform(1.6, 2.6)
    w.conv_mult[ref] = mult
    base = expected_week(w, [])
    s0 = np.bincount(codes, weights=base["sessions"], minlength=k)
    p0 = np.bincount(codes, weights=base["purchases"], minlength=k)
    rate, total_rate = p0 / s0, p0.sum() / s0.sum()
    if (rate[value] >= 0.9 * total_rate) if low else (rate[value] <= 1.1 * total_rate):
        raise Redraw("mix: the chosen value converts too close to average")
    seg = {ref: w.labels[ref][value]}
    s = float(share0[value])
    noise = measure_noise(w, noise_rng)
    sd = noise.contribution_sd(codes, k, value)
    total_sd = noise.ratio_sd()
    for _ in range(8):
        m = float(rng.uniform(2.0, min(3.0, 0.6 / s)))
        need = m * (1 - s) / (1 - m * s)  # sessions factor that multiplies the share by m
        act = min(1.8, need)
        grown = expected_week(w, [Plant(seg, "activity", act)])
        depth = max(1.0, need * s0[value] / grown["sessions"][codes == value].sum())
        plants = [Plant(seg, "activity", act), Plant(seg, "depth", depth)]
        after = expected_week(w, plants)
        s1 = np.bincount(codes, weights=after["sessions"], minlength=k)
        p1 = np.bincount(codes, weights=after["purchases"], minlength=k)
        effect = _contribution(s0, p0, s1, p1, value)
        change = p1.sum() / s1.sum() - total_rate
        z = abs(effect) / sd
        if z < MIN_Z or abs(effect) < MIN_SHARE * abs(change) or abs(change) < MIN_Z * total_sd:
            continue
        cause = {
            "segment": seg,
            "plants": [{"what": p.what, "factor": round(p.factor, 4)} for p in plants],
            "expected_effect": round(effect, 6),
            "mix_term": round(_mix_term(s0, p0, s1, value), 6),
            "noise_sd": round(sd, 6),
            "z": round(z, 1),
            "share_of_total": round(effect / change, 3) if change else None,
            "volume_share": round(s, 4),
            "expected_share_after": round(float(s1[value] / s1.sum()), 4),
            "share_multiplier": round(m, 3),
            "rate_vs_average": round(float(rate[value] / total_rate), 3),
        }
        facts = {
            "expected_total_relative": round(change / total_rate, 4),
            "total_z": round(abs(change) / total_sd, 1),
            "causes": [cause],
            "conversion_multipliers": {
                w.labels[ref][i]: round(float(x), 3) for i, x in enumerate(mult)
            },
        }
        return Plan("conversion", [Cause(seg, plants, "mix")], facts=facts)
    raise Redraw("mix: not visible")


PLANNERS: dict[str, Callable[[np.random.Generator, World, Noise, dict[str, Any]], Plan]] = {
    "k_of_n": plan_k_of_n,
    "overlapping": plan_overlapping,
    "two_plus_one": plan_two_plus_one,
    "even_shift": plan_even_shift,
    "noise_only": plan_noise_only,
    "offsetting": plan_offsetting,
}


# --------------------------------------------------------------------------------------------
# a draw


@dataclass
class Draw:
    """One case: the files to load, the question to ask, and the planted answer."""

    family: str
    seed: int
    files: dict[str, str]  # file name -> CSV text
    question: dict[str, Any]  # build_question's arguments (besides the schema)
    planted: dict[str, Any]  # root_causes [{segment, effect}], global_shift, significant
    facts: dict[str, Any]  # how it was drawn: metric, factors, noise, realized changes
    base_table: str
    base_columns: list[str]

    def write(self, folder: Path) -> list[Path]:
        """Write the CSV files into ``folder``; their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, text in self.files.items():
            p = folder / name
            p.write_text(text, encoding="utf-8")
            paths.append(p)
        return paths


def draw(family: str, seed: int) -> Draw:
    """The draw of ``family`` for ``seed`` (the same every time)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")
    if family == "preaggregated":
        return _draw_preaggregated(seed)
    plan_rng, noise_rng, data_rng = _rng_streams(family, seed, 3)
    # The draw's metric, mechanism and (where the family has one) column are chosen once, before
    # any world, so that redrawing an invisible plant does not favour the quieter metrics.
    metric = str(plan_rng.choice(list(ADDITIVE)))
    setup = {"metric": metric, "what": _mechanism(plan_rng, metric)}
    if family == "k_of_n":
        setup["column"] = str(plan_rng.choice(DIMS))
    if family in ("mix_low", "mix_high"):
        setup["column"] = str(plan_rng.choice(USER_DIMS))
    last = ""
    for attempt in range(MAX_WORLDS):
        w = make_world(plan_rng)
        try:
            if family in ("mix_low", "mix_high"):
                low = family == "mix_low"
                plan = _plan_mix(plan_rng, w, noise_rng, setup["column"], low)
            else:
                plan = PLANNERS[family](plan_rng, w, measure_noise(w, noise_rng), setup)
        except Redraw as e:
            last = str(e)
            continue
        plan.facts["worlds_tried"] = attempt + 1
        return _realize(family, seed, w, plan, data_rng)
    raise RuntimeError(f"{family} seed {seed}: no visible plant in {MAX_WORLDS} worlds ({last})")


def _realize(family: str, seed: int, w: World, plan: Plan, rng: np.random.Generator) -> Draw:
    rows = simulate(w, plan.plants, rng, range(DAYS))
    uid = w.first_user_id + np.arange(w.n)
    dims = {ref: np.array(w.labels[ref], dtype=object)[w.codes[ref]] for ref in DIMS}
    lines = [",".join(EVENT_COLUMNS)]
    columns = [rows[k].tolist() for k in ("day", "user", "s", "p", "r")]
    for d, u, s, p, r in zip(*columns, strict=True):
        lines.append(
            f"{DATES[d]},{uid[u]},{dims['platform'][u]},{dims['app_version'][u]},"
            f"{dims['country'][u]},{dims['device'][u]},{s},{p},{r:.2f}"
        )
    users = [",".join(USER_COLUMNS)] + [
        f"{uid[i]},{dims['users.channel'][i]},{dims['users.plan'][i]},{dims['users.age_group'][i]}"
        for i in range(w.n)
    ]
    expression, grain = METRICS[plan.metric]
    question: dict[str, Any] = {
        "metric": expression,
        "time_column": "date",
        "baseline": BASELINE,
        "comparison": COMPARISON,
    }
    if grain:
        question["grain"] = grain
    facts = dict(plan.facts)
    facts.update(metric=plan.metric, users=w.n, rows=len(rows["day"]))
    facts["realized"] = _realized(w, plan, rows)
    return Draw(
        family=family,
        seed=seed,
        files={"events.csv": "\n".join(lines) + "\n", "users.csv": "\n".join(users) + "\n"},
        question=question,
        planted={
            "root_causes": [{"segment": c.segment, "effect": c.effect} for c in plan.causes],
            "global_shift": plan.global_shift,
            "significant": plan.significant,
        },
        facts=facts,
        base_table="events",
        base_columns=list(EVENT_COLUMNS),
    )


def _realized(w: World, plan: Plan, rows: dict[str, np.ndarray]) -> dict[str, Any]:
    """The generated data's own relative changes: total, each cause, and the rest."""
    base, cmp = _week_totals(rows, w.n, BASE_DAY), _week_totals(rows, w.n, CMP_DAY)

    def rel(mask: np.ndarray) -> float | None:
        if plan.metric == "conversion":
            b = base["purchases"][mask].sum() / max(base["sessions"][mask].sum(), 1)
            c = cmp["purchases"][mask].sum() / max(cmp["sessions"][mask].sum(), 1)
        else:
            b = quantity(plan.metric, base)[mask].sum()
            c = quantity(plan.metric, cmp)[mask].sum()
        return round(float(c / b - 1), 4) if b else None

    every = np.ones(w.n, dtype=bool)
    rest = every.copy()
    out: dict[str, Any] = {"total": rel(every), "causes": {}}
    for c in plan.causes:
        m = w.mask(c.segment)
        rest &= ~m
        out["causes"][_seg_text(c.segment)] = rel(m)
    if plan.causes:
        out["rest"] = rel(rest)
    return out


# --------------------------------------------------------------------------------------------
# pre-aggregated cells


PREAGG_POOLS = {
    "region": ["us-east", "us-west", "us-central", "canada", "mexico", "brazil", "uk", "germany",
               "france", "nordics", "iberia", "italy", "india", "japan", "korea", "anz"],
    "product": ["shoes", "shirts", "pants", "jackets", "bags", "hats", "socks", "watches",
                "jewelry", "beauty", "toys", "books", "games", "audio", "phones", "laptops"],
    "channel": ["store", "web", "app", "marketplace", "phone", "partner", "catalog", "kiosk",
                "social", "wholesale", "outlet", "popup", "affiliate", "tv", "email", "b2b"],
    "segment": ["consumer", "student", "senior", "family", "smb", "enterprise", "public",
                "nonprofit", "creator", "pro", "vip", "new", "returning", "lapsed", "staff",
                "reseller"],
    "store_type": ["flagship", "mall", "street", "outlet", "airport", "station", "suburban",
                   "downtown", "campus", "resort", "hospital", "depot", "express", "kiosk",
                   "warehouse", "online"],
}  # fmt: skip


@dataclass
class _Cells:
    """A pre-aggregated cube: cells of four dimensions, their expected value and orders."""

    dims: list[str]
    labels: list[list[str]]
    grid: np.ndarray  # cells x 4 value indexes
    value: np.ndarray
    orders: np.ndarray
    sigma: float  # per cell and period lognormal noise
    ratio: bool  # metric sum(revenue) / sum(orders), else sum(revenue)

    def mask(self, segment: dict[str, str]) -> np.ndarray:
        m = np.ones(len(self.grid), dtype=bool)
        for d, v in segment.items():
            j = self.dims.index(d)
            m &= self.grid[:, j] == self.labels[j].index(v)
        return m

    def observe(self, rng: np.random.Generator, mult: Any) -> tuple[np.ndarray, np.ndarray]:
        """One period: (revenue, orders) per cell, the plants' multipliers applied."""
        n = len(self.grid)
        v = self.value * mult * _mean_one(rng, self.sigma, n)
        o = np.maximum(1, np.round(self.orders * _mean_one(rng, self.sigma, n)))
        return v, o

    def expected(self, mult: Any) -> float:
        return float((self.value * mult).sum() / (self.orders.sum() if self.ratio else 1.0))


def _make_cells(rng: np.random.Generator) -> _Cells:
    dims = [str(d) for d in rng.choice(list(PREAGG_POOLS), 4, replace=False)]
    while True:
        counts = [int(c) for c in rng.integers(4, 17, 4)]
        if 1000 <= math.prod(counts) <= 9000:
            break
    labels = [
        sorted(rng.choice(PREAGG_POOLS[d], c, replace=False).tolist())
        for d, c in zip(dims, counts, strict=True)
    ]
    axes = np.meshgrid(*[np.arange(c) for c in counts], indexing="ij")
    grid = np.stack(axes, -1).reshape(-1, 4)
    grid = grid[rng.random(len(grid)) >= rng.uniform(0.0, 0.15)]  # some cells never sell
    n = len(grid)
    size = np.prod([(_shares(rng, c, 1.5, 0.01) * c)[grid[:, j]] for j, c in enumerate(counts)], 0)
    orders = rng.uniform(30, 200) * size * np.exp(rng.normal(0, rng.uniform(0.4, 0.8), n))
    aov = rng.uniform(20, 80) * np.prod(
        [rng.uniform(0.7, 1.4, c)[grid[:, j]] for j, c in enumerate(counts)], 0
    )
    return _Cells(
        dims=dims,
        labels=labels,
        grid=grid,
        value=orders * aov * _mean_one(rng, 0.1, n),
        orders=orders,
        sigma=float(rng.uniform(0.03, 0.10)),
        ratio=bool(rng.random() < 1 / 3),
    )


def _cells_sd(cells: _Cells, reps: list, m: np.ndarray) -> float:
    """SD of a segment's change (sum) or of its rate term ``D'_s/D' (r'_s - r_s)`` (ratio)."""
    if not cells.ratio:
        return float(np.std([c[0][m].sum() - b[0][m].sum() for b, c in reps], ddof=1))
    terms = [
        co[m].sum() / co.sum() * (cv[m].sum() / co[m].sum() - bv[m].sum() / bo[m].sum())
        for (bv, bo), (cv, co) in reps
    ]
    return float(np.std(terms, ddof=1))


def _plan_cells(
    rng: np.random.Generator, cells: _Cells, reps: list
) -> tuple[list[tuple[dict[str, str], float]], float | None, np.ndarray, dict[str, Any]]:
    """1-2 causes of one or two columns, and in half the draws an even shift of everything;
    raises :class:`Redraw` unless each is visible."""
    n = len(cells.grid)
    causes: list[tuple[dict[str, str], float]] = []
    for _ in range(int(rng.integers(1, 3))):
        cols = sorted(rng.choice(4, int(rng.integers(1, 3)), replace=False).tolist())
        seg = {cells.dims[j]: str(rng.choice(cells.labels[j])) for j in cols}
        up = rng.random() < 0.5
        causes.append((seg, float(rng.uniform(1.1, 1.8) if up else rng.uniform(0.5, 0.9))))
    masks = [cells.mask(s) for s, _ in causes]
    if any(not m.any() or cells.value[m].sum() > 0.5 * cells.value.sum() for m in masks):
        raise Redraw("empty or too large")
    if len(causes) == 2 and _nested_or_same(*masks):
        raise Redraw("nested causes")
    shift = None
    if rng.random() < 0.5:
        shift = 1 + int(rng.choice([-1, 1])) * float(rng.uniform(0.03, 0.10))
    mults = [np.where(m, f, 1.0) for m, (_, f) in zip(masks, causes, strict=True)]
    causes_only = np.prod(mults, axis=0)
    every = causes_only * (shift or 1.0)
    before, after = cells.expected(np.ones(n)), cells.expected(every)
    total = after - before
    facts: dict[str, Any] = {"expected_total_relative": round(total / before, 4), "causes": []}
    for i, ((seg, f), m) in enumerate(zip(causes, masks, strict=True)):
        others = [x for j, x in enumerate(mults) if j != i]
        without = (np.prod(others, axis=0) if others else np.ones(n)) * (shift or 1.0)
        effect = after - cells.expected(without)
        sd = _cells_sd(cells, reps, m)
        z = abs(effect) / sd
        if z < MIN_Z or abs(effect) < MIN_SHARE * abs(total):
            raise Redraw(f"{_seg_text(seg)}: z {z:.1f}")
        facts["causes"].append(
            {
                "segment": seg,
                "factor": round(f, 4),
                "expected_effect": round(effect, 6),
                "noise_sd": round(sd, 6),
                "z": round(z, 1),
                "share_of_total": round(effect / total, 3) if total else None,
                "volume_share": round(float(cells.value[m].sum() / cells.value.sum()), 4),
            }
        )
    if shift is not None:
        effect = after - cells.expected(causes_only)
        sd = _cells_sd(cells, reps, np.ones(n, dtype=bool))
        if abs(effect) < MIN_Z * sd:
            raise Redraw("shift not visible")
        facts["shift"] = {"factor": round(shift, 4), "z": round(abs(effect) / sd, 1)}
    return causes, shift, every, facts


def _draw_preaggregated(seed: int) -> Draw:
    """One row per cell of four dimensions and period; 1-2 causes; an even shift in half."""
    rng, noise_rng, data_rng = _rng_streams("preaggregated", seed, 3)
    for attempt in range(MAX_WORLDS):
        cells = _make_cells(rng)
        reps = [(cells.observe(noise_rng, 1.0), cells.observe(noise_rng, 1.0)) for _ in range(40)]
        for _ in range(10):
            try:
                causes, shift, every, facts = _plan_cells(rng, cells, reps)
            except Redraw:
                continue
            facts["worlds_tried"] = attempt + 1
            return _realize_cells(seed, cells, causes, shift, every, facts, data_rng)
    raise RuntimeError(f"preaggregated seed {seed}: no visible plant in {MAX_WORLDS} cubes")


def _realize_cells(
    seed: int,
    cells: _Cells,
    causes: list[tuple[dict[str, str], float]],
    shift: float | None,
    every: np.ndarray,
    facts: dict[str, Any],
    rng: np.random.Generator,
) -> Draw:
    year, month = int(rng.integers(2022, 2026)), int(rng.integers(1, 12))
    periods = (f"{year}-{month:02d}", f"{year}-{month + 1:02d}")
    (bv, bo), (cv, co) = cells.observe(rng, 1.0), cells.observe(rng, every)
    head = [*cells.dims, "period", "revenue"] + (["orders"] if cells.ratio else [])
    names = [np.array(cells.labels[j], dtype=object)[cells.grid[:, j]] for j in range(4)]
    lines = [",".join(head)]
    for period, v, o in ((periods[0], bv, bo), (periods[1], cv, co)):
        for i in range(len(cells.grid)):
            extra = f",{int(o[i])}" if cells.ratio else ""
            cell = f"{names[0][i]},{names[1][i]},{names[2][i]},{names[3][i]}"
            lines.append(f"{cell},{period},{v[i]:.2f}{extra}")

    def rel(m: np.ndarray) -> float | None:
        if not m.any():
            return None
        if cells.ratio:
            return round(float((cv[m].sum() / co[m].sum()) / (bv[m].sum() / bo[m].sum()) - 1), 4)
        return round(float(cv[m].sum() / bv[m].sum() - 1), 4)

    masks = [cells.mask(s) for s, _ in causes]
    facts.update(metric="ratio" if cells.ratio else "sum", cells=len(cells.grid))
    facts["cell_noise_sigma"] = round(cells.sigma, 4)
    facts["realized"] = {
        "total": rel(np.ones(len(cells.grid), dtype=bool)),
        "causes": {_seg_text(s): rel(m) for (s, _), m in zip(causes, masks, strict=True)},
        "rest": rel(~np.any(masks, axis=0)),
    }
    return Draw(
        family="preaggregated",
        seed=seed,
        files={"sales.csv": "\n".join(lines) + "\n"},
        question={
            "metric": "sum(revenue) / sum(orders)" if cells.ratio else "sum(revenue)",
            "period_column": "period",
            "baseline": periods[0],
            "comparison": periods[1],
        },
        planted={
            "root_causes": [{"segment": s, "effect": "rate"} for s, _ in causes],
            "global_shift": shift is not None,
            "significant": None,
        },
        facts=facts,
        base_table="sales",
        base_columns=head,
    )


# --------------------------------------------------------------------------------------------
# scoring


def _column(name: str, base_table: str, base_columns: Sequence[str]) -> str:
    """``users.channel`` -> ``channel`` when the base table has no ``channel`` of its own;
    ``events.platform`` -> ``platform``."""
    table, dot, col = name.partition(".")
    if not dot:
        return name
    if table == base_table or col not in base_columns:
        return col
    return name


def segment_key(segment: dict[str, Any], base_table: str, base_columns: Sequence[str]) -> frozenset:
    """A segment as a comparable set of ``(column, value text)`` pairs."""
    return frozenset(
        (_column(str(k), base_table, base_columns), value_text(v)) for k, v in segment.items()
    )


def score(
    planted: dict[str, Any], got: dict[str, Any], base_table: str, base_columns: Sequence[str]
) -> tuple[bool, list[str]]:
    """``(exact, reasons it is not)`` for a draw's planted answer and the engine's answer."""
    reasons: list[str] = []
    want, match = _matched(planted, got, base_table, base_columns)
    for i, c in enumerate(planted["root_causes"]):
        j = match.get(i)
        if j is None:
            reasons.append(f"missed {_seg_text(c['segment'])}")
        elif c["effect"] == "mix" and got["root_causes"][j].get("effect") != "mix":
            reasons.append(f"effect {got['root_causes'][j].get('effect')}, not mix")
    for j, rc in enumerate(got["root_causes"]):
        if j not in match.values():
            reasons.append(f"extra {_seg_text(rc['segment'])}")
    if planted["global_shift"] and not got["global_shift"]:
        reasons.append("no global shift")
    if not planted["global_shift"] and got["global_shift"]:
        reasons.append("global shift reported")
    if planted.get("significant") and not got["significant"]:
        reasons.append("change not significant")
    return not reasons, reasons


def _matched(
    planted: dict[str, Any], got: dict[str, Any], base_table: str, base_columns: Sequence[str]
) -> tuple[list[frozenset], dict[int, int]]:
    """The planted causes as segment keys, and planted index -> the reported cause naming it."""
    want = [segment_key(c["segment"], base_table, base_columns) for c in planted["root_causes"]]
    names = [
        {segment_key(s, base_table, base_columns) for s in [rc["segment"], *rc.get("aliases", [])]}
        for rc in got["root_causes"]
    ]
    return want, _matching(want, names)


def _matching(want: list[frozenset], names: list[set[frozenset]]) -> dict[int, int]:
    """Planted index -> reported index: a maximum one-to-one matching (augmenting paths)."""
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, ns in enumerate(names):
            if want[i] in ns and j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(want)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def _f(x: Any, digits: int = 4) -> Any:
    if isinstance(x, float):
        return round(x, digits) if math.isfinite(x) else None
    return x


def engine_answer(ex: Any) -> dict[str, Any]:
    """What the engine said, as plain JSON."""
    gs = ex.global_shift
    return {
        "root_causes": [
            {
                "segment": {k: value_text(v) for k, v in rc.segment.items()},
                "aliases": [{k: value_text(v) for k, v in a.items()} for a in rc.aliases],
                "effect": rc.effect,
                "share": _f(rc.share),
                "p_value": _f(rc.p_value, 8),
            }
            for rc in ex.root_causes
        ],
        "global_shift": gs is not None,
        "global_shift_share": _f(gs.share) if gs is not None else None,
        "significant": ex.change.significant,
        "p_value": _f(ex.change.p_value, 8),
        "relative_change": _f(ex.change.relative),
        "explained_share": _f(ex.explained_share),
        # the segments significant against "nothing changed", and whether the named causes
        # account for each: what a missed cause's evidence was (:func:`missed_evidence`)
        "drivers": [
            {
                "segment": {k: value_text(v) for k, v in d.segment.items()},
                "explained_by_root_causes": d.explained_by_root_causes,
            }
            for d in [*ex.drivers, *ex.offsetting]
        ],
    }


MISS_KINDS = ("under the bound", "explained by the story", "left out")


def missed_evidence(
    planted: dict[str, Any], got: dict[str, Any], base_table: str, base_columns: Sequence[str]
) -> list[str]:
    """For each planted cause the engine did not name, what the engine's own answer says of its
    evidence: "under the bound" (not significant even against "nothing changed": more noise
    than the search may call a cause among every segment searched), "explained by the story"
    (significant alone, within the noise once the named causes are fitted), or "left out"
    (beyond the bound with the named causes fitted: the story passed over a segment its own
    test supports). The answer lists at most 15 drivers each way, the largest first: a
    significant segment past them reads as under the bound."""
    want, found = _matched(planted, got, base_table, base_columns)
    drivers = {
        segment_key(d["segment"], base_table, base_columns): d["explained_by_root_causes"]
        for d in got.get("drivers", [])
    }
    out = []
    for i, key in enumerate(want):
        if i in found:
            continue
        if key not in drivers:
            out.append(MISS_KINDS[0])
        else:
            out.append(MISS_KINDS[1] if drivers[key] else MISS_KINDS[2])
    return out


def run_draw(family: str, seed: int, workdir: Path | None = None) -> dict[str, Any]:
    """Draw, load, explain and score one case in this process; errors are recorded, not raised."""
    rec = _failed(family, seed, None, 0.0)
    t0 = time.perf_counter()
    stage = "draw"
    own = workdir is None
    folder = Path(tempfile.mkdtemp(prefix=f"family-{family}-")) if own else workdir
    try:
        d = draw(family, seed)
        rec["seconds_draw"] = round(time.perf_counter() - t0, 3)
        rec.update(planted=d.planted, question=d.question, facts=d.facts)
        stage = "load"
        from tasks.ingest.load import load_files

        t1 = time.perf_counter()
        db = folder / "draw.duckdb"
        load_files(d.write(folder / "data"), db)
        rec["seconds_load"] = round(time.perf_counter() - t1, 3)
        stage = "explain"
        from sql_tools import ToolContext
        from tasks.engine.explain import explain_change
        from tasks.engine.parse import build_question

        t1 = time.perf_counter()
        with ToolContext(db) as ctx:
            q = build_question(ctx.schema, **d.question)
            ex = explain_change(ctx, q)
        rec["seconds_explain"] = round(time.perf_counter() - t1, 3)
        stage = "score"
        rec["got"] = engine_answer(ex)
        rec["exact"], rec["reasons"] = score(d.planted, rec["got"], d.base_table, d.base_columns)
        rec["missed_evidence"] = missed_evidence(
            d.planted, rec["got"], d.base_table, d.base_columns
        )
    except Exception as e:  # noqa: BLE001 - a crashing draw is a miss, not a harness failure
        rec["error"] = f"{stage}: {type(e).__name__}: {e}"[:2000]
        rec["traceback"] = traceback.format_exc()[-4000:]
        rec["exact"] = False
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


# --------------------------------------------------------------------------------------------
# running many draws


def _child(conn: Any, family: str, seed: int, base: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=f"{family}-{seed}-", dir=base) as tmp:
        rec = run_draw(family, seed, Path(tmp))
    conn.send(rec)
    conn.close()


def _failed(family: str, seed: int, error: str | None, seconds: float) -> dict[str, Any]:
    """A record with nothing drawn or answered (yet)."""
    return {
        "family": family,
        "seed": seed,
        "planted": None,
        "got": None,
        "exact": False,
        "reasons": [],
        "error": error,
        "seconds": round(seconds, 3),
    }


def run_many(
    tasks: Sequence[tuple[str, int]],
    jobs: int,
    timeout: float,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Each ``(family, seed)`` in a forked child, ``jobs`` at a time; a child that dies or runs
    past ``timeout`` seconds leaves a record with its error."""
    ctx = multiprocessing.get_context("fork")
    pending = list(tasks)
    running: dict[Any, tuple[Any, tuple[str, int], float, float]] = {}
    out: list[dict[str, Any]] = []
    base = Path(tempfile.mkdtemp(prefix="md-families-"))

    def done(rec: dict[str, Any]) -> None:
        out.append(rec)
        if on_done is not None:
            on_done(rec)

    try:
        while pending or running:
            while pending and len(running) < jobs:
                task = pending.pop(0)
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(writer, *task, base), daemon=True)
                proc.start()
                writer.close()
                now = time.perf_counter()
                running[reader] = (proc, task, now + timeout, now)
            deadline = min(r[2] for r in running.values())
            ready = multiprocessing.connection.wait(
                list(running), timeout=max(0.0, deadline - time.perf_counter())
            )
            for reader in ready:
                proc, (family, seed), _, t0 = running.pop(reader)
                try:
                    rec = reader.recv()
                except EOFError:
                    proc.join(5)
                    error = f"child: died with exit code {proc.exitcode}"
                    rec = _failed(family, seed, error, time.perf_counter() - t0)
                reader.close()
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
                done(rec)
            now = time.perf_counter()
            for reader, (proc, (family, seed), deadline, t0) in list(running.items()):
                if now >= deadline:
                    proc.kill()
                    proc.join()
                    reader.close()
                    del running[reader]
                    done(_failed(family, seed, f"child: timeout after {timeout:g} s", now - t0))
    finally:
        for reader, (proc, *_rest) in running.items():
            proc.kill()
            proc.join()
            reader.close()
        shutil.rmtree(base, ignore_errors=True)
    return out


def summarize(records: list[dict[str, Any]], families: Sequence[str]) -> dict[str, Any]:
    """Per family (and over all): draws, exact, rate, errors, seconds per draw."""

    def of(recs: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(recs)
        exact = sum(1 for r in recs if r["exact"])
        secs = [r["seconds"] for r in recs if r.get("seconds") is not None]
        kinds = [k for r in recs for k in r.get("missed_evidence", [])]
        return {
            "draws": n,
            "exact": exact,
            "rate": round(exact / n, 3) if n else None,
            "errors": sum(1 for r in recs if r["error"]),
            "missed_causes": {k: kinds.count(k) for k in MISS_KINDS},
            "seconds_median": round(statistics.median(secs), 3) if secs else None,
            "seconds_max": round(max(secs), 3) if secs else None,
        }

    out = {f: of([r for r in records if r["family"] == f]) for f in families}
    out["all"] = of(records)
    return out


def markdown_table(summary: dict[str, Any], families: Sequence[str]) -> str:
    """family | draws | exact | rate | the missed causes by their evidence, and the total."""
    lines = [
        "| family | draws | exact | rate | missed causes: under the bound / explained by the "
        "story / left out |",
        "|---|---|---|---|---|",
    ]
    for f in [*families, "all"]:
        s = summary[f]
        kinds = " / ".join(str(s["missed_causes"][k]) for k in MISS_KINDS)
        rate = _rate(s["rate"])
        name, rate = (f, rate) if f != "all" else ("**total**", f"**{rate}**")
        lines.append(f"| {name} | {s['draws']} | {s['exact']} | {rate} | {kinds} |")
    return "\n".join(lines)


def _rate(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _answer_text(got: dict[str, Any] | None) -> str:
    if not got:
        return "(nothing)"
    parts = [
        f"{_seg_text(rc['segment'])} ({rc['effect']}, share {_rate(rc['share'])})"
        for rc in got["root_causes"]
    ] or ["no causes"]
    if got["global_shift"]:
        parts.append(f"global shift (share {_rate(got['global_shift_share'])})")
    sig = "significant" if got["significant"] else "not significant"
    if got["p_value"] is not None:
        sig += f", p={got['p_value']:.2g}"
    return "; ".join([*parts, sig])


def _planted_text(planted: dict[str, Any] | None) -> str:
    if not planted:
        return "(not drawn)"
    parts = [
        _seg_text(c["segment"]) + (" (mix)" if c["effect"] == "mix" else "")
        for c in planted["root_causes"]
    ] or ["no causes"]
    if planted["global_shift"]:
        parts.append("global shift")
    return "; ".join(parts)


def misses(records: list[dict[str, Any]]) -> str:
    """One line per draw that was not exact: planted vs what the engine said."""
    out = []
    for r in records:
        if r["exact"]:
            continue
        metric = (r.get("question") or {}).get("metric", "?")
        line = (
            f"- {r['family']} seed {r['seed']} [{metric}]: "
            f"planted {_planted_text(r['planted'])} | got {_answer_text(r['got'])}"
        )
        if r["error"]:
            line += f" | ERROR {r['error'].splitlines()[0][:200]}"
        out.append(line)
    return "\n".join(out)


def _write(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n")
    tmp.replace(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--families", help=f"comma-separated (all): {','.join(FAMILIES)}")
    ap.add_argument("--draws", type=int, default=50, help="draws per family (50)")
    ap.add_argument("--range", choices=list(RANGES), default="tune", help="seed range (tune)")
    ap.add_argument("--jobs", type=int, default=2, help="draws run at once (2)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per draw (300)")
    ap.add_argument("--out", type=Path, help="JSON (benchmarks/results/families_<range>.json)")
    ap.add_argument("--quiet", action="store_true", help="no line per draw")
    ap.add_argument("--show-misses", action="store_true", help="a line per draw that was not exact")
    args = ap.parse_args(argv)

    families = list(FAMILIES)
    if args.families:
        families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown families: {', '.join(unknown)} (known: {', '.join(FAMILIES)})")
    out = args.out or Path(f"benchmarks/results/families_{args.range}.json")
    first = RANGES[args.range]
    todo = [(f, first + i) for f in families for i in range(args.draws)]
    # Import the loader and the engine once here, not in every forked child.
    import sql_tools  # noqa: F401
    import tasks.engine.explain  # noqa: F401
    import tasks.engine.parse  # noqa: F401
    import tasks.ingest.load  # noqa: F401

    facts = machine_facts("pydantic", "numpy")
    run: dict[str, Any] = {
        "argv": sys.argv if argv is None else ["benchmarks.families", *argv],
        "range": args.range,
        "seeds": [first, first + args.draws - 1],
        "draws_per_family": args.draws,
        "families": families,
        "jobs": args.jobs,
        "timeout": args.timeout,
        "machine": facts,
    }
    count = [0]

    def progress(rec: dict[str, Any]) -> None:
        count[0] += 1
        if args.quiet:
            return
        mark = "ok " if rec["exact"] else ("ERR" if rec["error"] else "   ")
        why = rec["error"].splitlines()[0][:120] if rec["error"] else "; ".join(rec["reasons"])
        print(
            f"[{count[0]}/{len(todo)}] {mark} {rec['family']} {rec['seed']} "
            f"{rec.get('seconds', 0):.1f} s {why}",
            flush=True,
        )

    t0 = time.perf_counter()
    records = run_many(todo, max(1, args.jobs), args.timeout, progress)
    order = {t: i for i, t in enumerate(todo)}
    records.sort(key=lambda r: order[(r["family"], r["seed"])])
    run["seconds_total"] = round(time.perf_counter() - t0, 2)
    summary = summarize(records, families)
    _write(out, {"run": run, "summary": summary, "draws": records})

    print()
    print(markdown_table(summary, families))
    print()
    print(
        f"Seeds {first}..{first + args.draws - 1} ({args.range}), {len(records)} draws in "
        f"{run['seconds_total']} s with {args.jobs} jobs. Machine: {machine_line(facts)}."
    )
    if args.show_misses:
        text = misses(records)
        print()
        print("Not exact (planted | got):" if text else "Every draw was exact.")
        if text:
            print(text)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
