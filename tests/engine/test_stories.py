"""Whole stories: how the forward search's picks are weighed and revised.

- An even shift taken first carries the move of the segments found after it; once they are
  fitted, what they leave must have moved beyond the noise, or the story is told without it.
- An even shift taken first is a claim about every column: when one column's values did not
  move by its factor, the values that moved tell the story, and the rest is flat; a story the
  score passed over, so told, is weighed again.
- A pick makes the same claim of its parts: when parts of it refute it and the rest stayed
  flat, the parts are named (two overlapping causes, not their parent); a pick whose parts only
  scatter, or leave a sliver of it flat, stays whole.
- A pick climbed before the other picks were fitted is climbed again given them: the rise of
  a platform whose tablets fell with every tablet is the platform, not its phones.
- The picks' joint fit fits a pick whose rows all went to zero.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.families import draw
from tasks.engine import significance as sig
from tasks.engine.distributions import chi2_sf
from tasks.engine.search import refit as _refit
from tests.support.invariants import ask, missed

# Slow end to end (the search's stories on generated data, investigated whole):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow


def test_the_joint_fit_takes_a_pick_whose_rows_all_went_to_zero() -> None:
    f0 = np.array([10.0, 10.0, 10.0, 10.0])
    v = np.array([0.0, 0.0, 13.0, 10.0])
    # the first pick's rows (0 and 1) all went to zero; the second (1 and 2) holds one of them
    fitted = _refit(f0, v, [np.array([0, 1]), np.array([1, 2])])
    assert fitted[[0, 1]].sum() == pytest.approx(0.0)
    assert fitted[[1, 2]].sum() == pytest.approx(13.0)
    assert fitted[3] == 10.0


def test_an_even_shift_taken_first_is_told_without_it_when_the_segments_explain_the_move(
    tmp_path: Path,
) -> None:
    # two overlapping segments rose (plan=free & channel=paid_search, plan=free & country=US),
    # enough to move the whole; the forward search names their parent and slices of it, and the
    # story from an even shift first names the two with an even shift the rest did not make
    d = draw("overlapping", 27)
    got = ask(d, "same", tmp_path)
    assert missed(d, got) == [], got.text()
    assert len(got.causes) == 2, got.text()
    assert not got.global_shift



def test_values_that_moved_by_one_factor_are_alike_and_a_flat_one_is_not() -> None:
    expected = np.array([4000.0, 3000.0, 2000.0, 1000.0])
    variance = expected.copy()  # Poisson-like noise
    alike = expected * 1.3 + np.array([40.0, -50.0, 20.0, -10.0])  # within a standard deviation
    assert sig.unlike_values_p(alike, expected, variance) > 0.05
    one_flat = np.array([5200.0, 3900.0, 2600.0, 1000.0])  # the last value did not move
    assert sig.unlike_values_p(one_flat, expected, variance) < 1e-4
    # the statistic is chi-squared with one degree fewer than the values (the factor fitted)
    k = one_flat.sum() / expected.sum()
    stat = float((((one_flat - k * expected) ** 2) / variance).sum())
    assert sig.unlike_values_p(one_flat, expected, variance) == pytest.approx(
        float(chi2_sf(stat, 3))
    )
    assert sig.unlike_values_p(one_flat[:1], expected[:1], variance[:1]) == 1.0


@pytest.mark.parametrize(
    ("seed", "how"),
    [
        # three of four age groups rose 30-60%; the whole rose beyond the noise and was taken as
        # an even shift, with nothing left over
        (23, "the even shift alone"),
        # desktop and phone rose, tablet stayed flat; the even shift was taken first and desktop
        # after it, as an exception
        (14, "the even shift and one of the values"),
        # android and ios rose, web stayed flat (count(distinct user_id)); the story without the
        # even shift (device = phone, tablet) outscored the even shift with web as an exception,
        # and told by platform, the story passed over outscores it
        (18, "the story passed over"),
    ],
)
def test_an_even_shift_a_column_refutes_is_told_by_the_values_that_moved(
    seed: int, how: str, tmp_path: Path
) -> None:
    d = draw("k_of_n", seed)
    got = ask(d, "same", tmp_path)
    assert missed(d, got) == [], (how, got.text())
    assert len(got.causes) == len(d.planted["root_causes"]), got.text()
    assert not got.global_shift, got.text()


def test_a_value_below_the_bound_of_every_segment_is_named_among_its_columns_values(
    tmp_path: Path,
) -> None:
    # android rose 46% and ios 34% (z 4.4, under the bound of 4.6 among every segment searched),
    # web stayed flat: platform refutes the even shift, and ios clears the bound among the
    # one-column segments; its reported p-value is corrected over them, and the gate agrees
    from sql_tools import ToolContext
    from tasks.engine.explain import analyze
    from tasks.engine.parse import build_question
    from tasks.engine.segments import _index_of
    from tasks.ingest.load import load_files

    d = draw("k_of_n", 3)
    db = tmp_path / "draw.duckdb"
    load_files(d.write(tmp_path / "data"), db)
    with ToolContext(db) as ctx:
        analysis = analyze(ctx, build_question(ctx.schema, **d.question))
    ex = analysis.explanation
    named = {json.dumps(rc.segment, sort_keys=True): rc for rc in ex.root_causes}
    assert set(named) == {'{"platform": "android"}', '{"platform": "ios"}'}, list(named)
    assert ex.global_shift is None
    ios = named['{"platform": "ios"}']
    assert ios.p_value is not None and ios.p_value < sig.ALPHA
    # over every segment searched it would not be significant: its family is its column's
    i = _index_of(analysis.cube, {"platform": "ios"})
    assert sig.adjusted(float(analysis.found.p[i]), analysis.found.tests) > sig.ALPHA
    test = analysis.test({"platform": "ios"})
    assert test is not None and test.p_value == pytest.approx(ios.p_value)


def test_an_even_shift_stays_when_the_rest_of_a_refuting_column_moved_too(tmp_path: Path) -> None:
    # everything fell 17%; among the age groups, 18-24 fell 9% (z -3.6 against its baseline),
    # enough for the age groups to look unlike at the column's level, but it moved: the even
    # shift stands
    d = draw("even_shift", 0)
    got = ask(d, "same", tmp_path)
    assert got.causes == frozenset(), got.text()
    assert got.global_shift, got.text()


def test_values_asked_the_other_way_round_are_as_unlike() -> None:
    # observed and expected swapped (the comparison as the baseline), each with its own noise:
    # the expectation's noise scales with the fitted factor, so the p-value is the same
    rng = np.random.default_rng(7)
    f = rng.uniform(500, 5000, 6)
    v = f * np.array([1.4, 1.5, 1.3, 1.0, 1.05, 1.45]) + rng.normal(0, 30, 6)
    qf, qv = f * 1.7, v * 1.7  # each period's own (compound-Poisson) noise
    forward = sig.unlike_values_p(v, f, qv, qf)
    backward = sig.unlike_values_p(f, v, qf, qv)
    assert forward == pytest.approx(backward, rel=1e-9, abs=0)
    assert forward < 1e-3  # two values stayed near flat while four rose by a third or more
    # without the split, the noise is taken as it is given (one variance for ``v - k f``)
    assert sig.unlike_values_p(v, f, qv + qf) != pytest.approx(forward, rel=1e-3, abs=0)


@pytest.mark.parametrize(
    ("seed", "variant"),
    [
        # device=phone & users.age_group=25-34 and device=phone & users.plan=free rose 53% and
        # 54% (revenue); the forward search names device=phone, whose other part stayed flat
        (5, "same"),
        # platform=android & users.age_group=35-44 and platform=android & users.plan=free rose
        (20, "same"),
        # users.age_group=35-44 & users.channel=affiliate and & platform=web rose (sessions);
        # asked either way round
        (25, "same"),
        (25, "swap"),
    ],
)
def test_a_parent_its_parts_refute_is_told_by_the_two_overlapping_causes(
    seed: int, variant: str, tmp_path: Path
) -> None:
    d = draw("overlapping", seed)
    got = ask(d, variant, tmp_path)
    assert missed(d, got) == [], got.text()
    assert len(got.causes) == 2, got.text()


def test_a_cause_whose_parts_only_scatter_stays_whole(tmp_path: Path) -> None:
    # users.channel=email & users.age_group=45-54 rose 80% (revenue); by country its parts
    # scatter (France 2.5x, Japan 1.8x, Canada 1.8x, the rest less), but no part is unlike the
    # rest of it beyond the bound among its parts: it is named whole, not as three countries
    d = draw("overlapping", 9)
    got = ask(d, "same", tmp_path)
    whole = frozenset({("age_group", "45-54"), ("channel", "email")})
    assert any(whole in names for names, _ in got.causes), got.text()
    assert all(min(len(n) for n in names) == 2 for names, _ in got.causes), got.text()


def _exact_cells(folder: Path) -> Path:
    """Pre-aggregated cells that do not move at all, but for ``b = b3 & c = c2``, which falls to
    a fifth; its cells of 1 and 2 stay as they were (a fifth of them rounds back)."""
    rng = np.random.default_rng(0)
    rows = ["a,b,c,period,value"]
    for a in range(6):
        for b in range(10):
            for c in range(8):
                base = int(max(1, round(rng.lognormal(2.0, 2.0)))) if rng.random() < 0.9 else 1
                now = base * 0.2 if (b, c) == (3, 2) and base > 2 else base
                rows += [f"a{a},b{b},c{c},p1,{base}", f"a{a},b{b},c{c},p2,{round(now, 1)}"]
    path = folder / "cells.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("rest_share", [None, 0.0])
def test_parts_that_leave_a_sliver_flat_do_not_replace_their_cause(
    rest_share: float | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the noise of exact cells reads the cells of 1 that stayed 1 as flat beyond doubt, so the
    # parts by column a that fell look unlike them; the rest they leave flat is a sliver of the
    # cause (under a tenth), and the cause is named whole. Without that guard (0.0), its parts
    # are named in its place: the case tests the guard
    from sql_tools import ToolContext
    from tasks.engine.explain import explain_change
    from tasks.engine.parse import build_question
    from tasks.engine.search.stories import parts as search
    from tasks.ingest.load import load_files

    if rest_share is not None:
        monkeypatch.setattr(search, "PARTS_REST_SHARE", rest_share)
    db = tmp_path / "cells.duckdb"
    load_files([_exact_cells(tmp_path)], db)
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema, metric="sum(value)", period_column="period", baseline="p1", comparison="p2"
        )
        named = [rc.segment for rc in explain_change(ctx, q).root_causes]
    if rest_share is None:
        assert named == [{"b": "b3", "c": "c2"}]
    else:
        assert len(named) > 1 and all(s["b"] == "b3" and s["c"] == "c2" for s in named), named


@pytest.mark.parametrize(
    ("family", "seed", "variant"),
    [("offsetting", 4, "same"), ("offsetting", 4, "swap"), ("two_plus_one", 18, "same")],
)
def test_a_pick_is_climbed_again_given_the_story_s_other_picks(
    family: str, seed: int, variant: str, tmp_path: Path
) -> None:
    # offsetting 4: platform=ios rose 23% and device=tablet fell 37%; ios tablets did both, so
    # before the tablets' fall is fitted the rest of ios moved unlike its phones and the first
    # pick stayed ios & phone. two_plus_one 18: ios & 25-34 climbs to age 25-34 (its rest
    # moved most) and then ios & email, given it, stays: the clearest climb goes first.
    d = draw(family, seed)
    got = ask(d, variant, tmp_path)
    assert missed(d, got) == [], got.text()
    assert len(got.causes) == 2, got.text()


def _yearly(seed: int) -> str:
    """Yearly values per source and region (numbered), a few rows each: one cell moves from
    2007 on by a random factor, sometimes with more or fewer rows; every value drifts 1% a year."""
    import random

    rng = random.Random(seed)
    sources = [f"s{i}" for i in range(rng.randint(2, 6))]
    regions = list(range(rng.randint(2, 6)))
    rows, noise = rng.randint(1, 15), rng.choice([0.01, 0.05, 0.2])
    cell = (rng.choice(sources), rng.choice(regions))
    effect, mix = rng.choice([-0.6, -0.3, 0.4, 0.8, -0.1]), rng.choice([0, 0, 2, -1])
    lines = ["year,source,region,value"]
    for year in range(2000, 2011):
        for s in sources:
            for g in regions:
                moved = (s, g) == cell and year >= 2007
                n = max(1, rows + mix * rows // 2) if moved and mix else rows
                for _ in range(n):
                    v = 500 * (1 + rng.gauss(0, noise)) * (1 + 0.01 * (year - 2000))
                    lines.append(f"{year},{s},{g},{v * (1 + effect) if moved else v:.2f}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", [17, 21, 33])
def test_the_gate_judges_a_root_cause_by_the_p_value_its_row_shows(
    tmp_path: Path, seed: int
) -> None:
    # a root cause's reported p-value (its family's, or its share's for a mix) is the one the
    # gate judges it by, under each of its names: the report's table and the hypothesis below
    # it state one figure
    from sql_tools import ToolContext
    from tasks.engine.explain import analyze
    from tasks.engine.parse import build_question
    from tasks.ingest.load import load_files

    data = tmp_path / "energy.csv"
    data.write_text(_yearly(seed), encoding="utf-8")
    db = tmp_path / "energy.duckdb"
    load_files([data], db)
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema,
            metric="sum(value)",
            period_column="year",
            baseline="2002",
            comparison="2007",
        )
        analysis = analyze(ctx, q)
    causes = analysis.explanation.root_causes
    assert causes
    for rc in causes:
        for name in (rc.segment, *rc.aliases):
            test = analysis.test(name)
            assert test is not None and test.p_value == rc.p_value, (name, rc.p_value)
