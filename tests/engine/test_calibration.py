"""On data where nothing changed, segment p-values are uniform: about 1% of segments fall below
p = 0.01, with ten cells and with ten thousand, and no root cause is named."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from sql_tools import ToolContext
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question
from tasks.ingest.load import LoadOptions, load_files

START = date(2024, 3, 18)


def _noise_events(path, rng: np.random.Generator, sizes: tuple[int, ...], rate: float) -> None:
    """One row per event over two weeks: each cell's events a day are Poisson(``rate``), each
    event's amount exponential; nothing differs between the weeks."""
    cols = [f"c{j}" for j in range(len(sizes))]
    grids = np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij")
    cells = np.stack([g.reshape(-1) for g in grids], axis=1)
    lines = ["date," + ",".join(cols) + ",amount"]
    for day in range(14):
        d = (START + timedelta(days=day)).isoformat()
        counts = rng.poisson(rate, len(cells))
        for cell, k in zip(cells, counts, strict=True):
            if not k:
                continue
            label = ",".join(f"v{x}" for x in cell)
            for amount in rng.exponential(20.0, k):
                lines.append(f"{d},{label},{amount:.2f}")
    path.write_text("\n".join(lines) + "\n")


def _analyze(csv, **question):
    """Load ``csv`` into a DuckDB file beside it and analyze ``question`` on its table."""
    db = csv.with_suffix(".duckdb")
    load_files([csv], db, LoadOptions())
    with ToolContext(db) as ctx:
        return analyze(ctx, build_question(ctx.schema, table=csv.stem, **question))


def _segment_p(tmp_path, name: str, seed: int, sizes: tuple[int, ...], rate: float):
    csv = tmp_path / f"{name}.csv"
    _noise_events(csv, np.random.default_rng(seed), sizes, rate)
    a = _analyze(
        csv,
        metric="sum(amount)",
        time_column="date",
        baseline="2024-03-18:2024-03-24",
        comparison="2024-03-25:2024-03-31",
    )
    return a.found.p[1:], a.explanation


def test_ten_cells_give_uniform_p_values(tmp_path):
    ps, named = [], 0
    for seed in range(30):
        p, e = _segment_p(tmp_path, f"t{seed}", seed, (10,), rate=4.0)
        ps.append(p)
        named += len(e.root_causes)
    p = np.concatenate(ps)
    assert len(p) == 300
    assert np.mean(p < 0.01) <= 0.03, np.sort(p)[:20]
    assert np.mean(p < 0.1) == pytest.approx(0.1, abs=0.05)
    # the search corrects for every segment at 5% per dataset: about 1.5 of 30 by chance
    assert named <= 3, "pure noise named as a cause"


def test_ten_thousand_cells_give_uniform_p_values(tmp_path):
    p, e = _segment_p(tmp_path, "big", 7, (100, 100), rate=3.0)
    leaves = p[-10_000:]
    assert np.mean(leaves < 0.01) == pytest.approx(0.01, abs=0.005)
    assert np.mean(p < 0.1) == pytest.approx(0.1, abs=0.03)
    assert e.root_causes == []


def test_a_ratio_cell_new_in_the_comparison_without_events_is_within_the_noise() -> None:
    # conversion (purchases / sessions): a cell with one row, 7 sessions and no purchase, seen
    # only in the comparison, is expected at the overall rate (about 1.2 purchases); seeing 0
    # happens three times in ten. Its count-like noise is that of the count expected, not of
    # the 0 seen (which left it the floor's hundredth of a typical cell: z -7 on mix_low 6)
    from tasks.engine.search import ratio_leaves

    rng = np.random.default_rng(0)
    n = 200
    db = rng.integers(5, 40, n).astype(float)
    dc = rng.integers(5, 40, n).astype(float)
    nb, nc = rng.binomial(db.astype(int), 0.17).astype(float), rng.binomial(dc.astype(int), 0.17)
    nc = nc.astype(float)
    leaf = {
        "nb": nb, "db": db, "nc": nc, "dc": dc,
        "qnb": nb**2, "qdb": db**2, "qndb": nb * db, "qnc": nc**2, "qdc": dc**2, "qndc": nc * dc,
        "rowsb": np.ones(n), "rowsc": np.ones(n),
    }  # one row a cell and period: its squares are its sums squared
    new = {k: np.append(x, 0.0) for k, x in leaf.items()}
    new["dc"][-1], new["qdc"][-1], new["rowsc"][-1] = 7.0, 49.0, 1.0
    total = {k: float(new[k].sum()) for k in ("nb", "db", "nc", "dc")}
    lv = ratio_leaves(new, total)
    assert lv.f[-1] == pytest.approx(7.0 * total["nb"] / total["db"])
    z = (lv.v[-1] - lv.f[-1]) / np.sqrt(lv.phi[-1] * lv.P[-1])
    assert -2.0 < z < 0.0, z


@pytest.mark.parametrize("seed", [11, 49])
def test_a_mix_shift_is_not_hidden_by_a_sparse_cell_inside_it(seed: int, tmp_path) -> None:
    # mix_low: a channel (or age group) whose sessions doubled converts below average, and every
    # rate stayed. A deep cell inside it, whose few baseline rows happened to hold no purchase
    # (rows without a purchase add (rate x sessions)^2 to the measured spread, not the rate x
    # sessions of a count's noise), was named for its rate at z 4.6, and with it the mix cause
    # above it was not named
    from benchmarks.families import draw
    from tests.support.invariants import ask, missed

    d = draw("mix_low", seed)
    got = ask(d, "same", tmp_path)
    assert missed(d, got) == [], got.text()
    assert len(got.causes) == 1, got.text()


def test_an_even_shift_told_where_no_segment_stood_out_is_refuted_by_a_column(tmp_path) -> None:
    # k_of_n report draw 100038: the tablets rose, under the bound among every segment searched,
    # and the days call the change significant. With no segment named the change was told as
    # an even move of everything, a claim the device column refutes (its values moved unlike
    # each other), as it does for an even shift the search takes: the tablets are named
    from benchmarks.families import draw
    from tests.support.invariants import ask, missed

    d = draw("k_of_n", 100038)
    got = ask(d, "same", tmp_path)
    assert missed(d, got) == [] and len(got.causes) == 1, got.text()
    assert not got.global_shift and got.significant, got.text()


def test_a_sparse_ratio_cell_has_at_least_the_noise_of_its_expected_count() -> None:
    # conversion on event rows: a cell whose 14 baseline rows (22 sessions) held no purchase
    # and whose 22 comparison rows (77 sessions) hold 4, about 0.9 and 3.1 expected at its
    # pooled rate. Its rows' own spread counts each baseline row at (rate x sessions)^2 and
    # gave z 1.9; at the spread leaves show per purchase they expect, its z is about 1
    from tasks.engine.search import ratio_leaves

    rng = np.random.default_rng(0)
    keys = ("nb", "db", "nc", "dc", "qnb", "qdb", "qndb", "qnc", "qdc", "qndc", "rowsb", "rowsc")
    leaf: dict[str, list[float]] = {k: [] for k in keys}
    for _ in range(300):
        for s in "bc":
            d = 1 + rng.poisson(0.5, int(rng.integers(20, 60)))
            n = rng.binomial(d, 0.05)
            for key, x in (("n", n), ("d", d), ("qn", n * n), ("qd", d * d), ("qnd", n * d)):
                leaf[f"{key}{s}"].append(float(x.sum()))
            leaf[f"rows{s}"].append(float(len(d)))
    sparse = {"nb": 0, "db": 22, "nc": 4, "dc": 77, "qnb": 0, "qdb": 36, "qndb": 0,
              "qnc": 4, "qdc": 291, "qndc": 14, "rowsb": 14, "rowsc": 22}  # fmt: skip
    arrays = {k: np.array([*v, float(sparse[k])]) for k, v in leaf.items()}
    total = {k: float(arrays[k].sum()) for k in ("nb", "db", "nc", "dc")}
    lv = ratio_leaves(arrays, total)
    z = (lv.v[-1] - lv.f[-1]) / np.sqrt(lv.phi[-1] * lv.P[-1])
    assert 0.0 < z < 1.5, z


def _sparse_label_events(path, seed: int, planted: float = 1.0) -> None:
    """Event rows over two labelled periods, four columns (2,400 combinations), about 17 rows
    and 0.75 purchases per combination and period; ``a = a1``'s conversion multiplied by
    ``planted`` in the second."""
    rng = np.random.default_rng(seed)
    lines = ["period,a,b,c,d,sessions,purchases"]
    for period in ("2024-Q1", "2024-Q2"):
        n = 40_000
        a, b, c, d = (rng.integers(0, k, n) for k in (6, 8, 5, 10))
        sessions = 1 + rng.poisson(0.5, n)
        rate = np.where((a == 1) & (period == "2024-Q2"), 0.03 * planted, 0.03)
        purchases = rng.binomial(sessions, rate)
        for row in zip(a, b, c, d, sessions, purchases, strict=True):
            lines.append(f"{period},a{row[0]},b{row[1]},c{row[2]},d{row[3]},{row[4]},{row[5]}")
    path.write_text("\n".join(lines) + "\n")


def _label_answer(tmp_path, seed: int, metric: str, planted: float = 1.0):
    csv = tmp_path / "ev.csv"
    _sparse_label_events(csv, seed, planted)
    return _analyze(
        csv, metric=metric, period_column="period", baseline="2024-Q1", comparison="2024-Q2"
    ).explanation


@pytest.mark.xfail(
    strict=True,
    reason="without days, the dispersion is measured across leaves only: a size bin of leaves "
    "with two purchases each, most split one and one, reads as 0.1 of the rows' own noise, and "
    "leaves split two and none pass for causes. Flooring it at the rows' noise, as with days, "
    "hides a 6% cause in daily pre-aggregated rows asked by month (the test below)",
)
@pytest.mark.parametrize(
    ("metric", "seed"),
    [("sum(purchases) / sum(sessions)", 0), ("sum(purchases) / sum(sessions)", 3),
     ("sum(purchases)", 0)],
)  # fmt: skip
def test_sparse_event_rows_by_label_periods_where_nothing_changed(tmp_path, metric, seed) -> None:
    ex = _label_answer(tmp_path, seed, metric)
    assert not ex.change.significant, ex.change
    assert ex.root_causes == []


def test_a_cause_in_sparse_event_rows_by_label_periods_is_named(tmp_path) -> None:
    ex = _label_answer(tmp_path, 0, "sum(purchases) / sum(sessions)", planted=2.0)
    assert [c.segment for c in ex.root_causes] == [{"a": "a1"}]


def test_daily_pre_aggregated_rows_asked_by_month_name_their_cause(tmp_path) -> None:
    # a table of daily totals (region x product), asked by its month column: each leaf holds 30
    # rows a period, whose noise (10% a day) is far below their squares' sum; region r1 rose 6%
    rng = np.random.default_rng(0)
    base = rng.lognormal(6, 1, (8, 12))
    lines = ["month,day,region,product,revenue"]
    for m, month in enumerate(("2024-01", "2024-02")):
        for day in range(30):
            moved = base * np.where((np.arange(8)[:, None] == 1) & (m == 1), 1.06, 1.0)
            x = moved * rng.lognormal(0, 0.1, base.shape)
            lines += [f"{month},{day},r{i},p{j},{x[i, j]:.2f}" for i in range(8) for j in range(12)]
    csv = tmp_path / "pa.csv"
    csv.write_text("\n".join(lines) + "\n")
    ex = _analyze(
        csv,
        metric="sum(revenue)",
        period_column="month",
        baseline="2024-01",
        comparison="2024-02",
        dimensions=["region", "product"],
    ).explanation
    assert [c.segment for c in ex.root_causes] == [{"region": "r1"}]
