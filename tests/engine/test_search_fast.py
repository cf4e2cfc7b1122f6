"""The search and its story rules on cubes built in memory: planted causes, and the answers that
must not depend on how the same data is asked (periods swapped, the metric scaled, the columns
renamed or reordered). No database: each case runs in milliseconds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from tasks.engine.search import RULES, SearchOptions, additive_leaves, search_stories
from tasks.engine.search.stories import Story
from tests.support.cubes import cube_of

COLUMNS = {
    "region": ("EU", "US", "APAC", "LATAM"),
    "device": ("ios", "android", "web"),
    "channel": ("ads", "organic", "email"),
}
Move = tuple[dict[str, str], float]
PERIODS = ("baseline", "comparison")


def planted(seed: int, moves: Sequence[Move] = (), size: int = 1000) -> list[dict[str, Any]]:
    """One leaf per combination of :data:`COLUMNS`' values, counts of about ``size`` in each
    period (Poisson), each leaf's comparison moved by the factor of every move that holds it."""
    rng = np.random.default_rng(seed)
    out = []
    for region in COLUMNS["region"]:
        for device in COLUMNS["device"]:
            for channel in COLUMNS["channel"]:
                leaf = {"region": region, "device": device, "channel": channel}
                factor = 1.0
                for where, k in moves:
                    if all(leaf[c] == v for c, v in where.items()):
                        factor *= k
                out.append(
                    leaf | {"baseline": rng.poisson(size), "comparison": rng.poisson(size * factor)}
                )
    return out


def story(
    leaves: Sequence[dict[str, Any]],
    rules: tuple[Callable[[Story], Story], ...] = RULES,
    row_value: float = 1.0,
) -> list[tuple[dict[str, Any], float]]:
    """The segments the search names, in its order, each with its factor."""
    cube = cube_of(leaves, row_value=row_value)
    options = SearchOptions(eligible=np.ones(len(cube.seg_mask), dtype=bool))
    found = search_stories(cube, additive_leaves(cube.leaf), options, rules)
    return [(cube.segment_dict(p.seg), p.factor) for p in found.picks]


def named(leaves: Sequence[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    return [segment for segment, _ in story(leaves, **kw)]


def as_set(segments: list[dict[str, Any]]) -> set[frozenset[tuple[str, Any]]]:
    return {frozenset(s.items()) for s in segments}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_planted_cause_is_found_with_its_factor(seed: int) -> None:
    ((segment, factor),) = story(planted(seed, [({"region": "EU"}, 0.7)]))
    assert segment == {"region": "EU"}
    assert factor == pytest.approx(0.7, abs=0.02)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cause_of_two_columns_is_named_at_its_depth(seed: int) -> None:
    moves = [({"region": "EU", "device": "ios"}, 0.5)]
    assert named(planted(seed, moves)) == [{"region": "EU", "device": "ios"}]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_causes_are_both_found(seed: int) -> None:
    moves = [({"region": "EU"}, 0.7), ({"channel": "ads"}, 1.4)]
    assert as_set(named(planted(seed, moves))) == as_set([{"region": "EU"}, {"channel": "ads"}])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_nothing_is_named_when_nothing_moved(seed: int) -> None:
    assert named(planted(seed)) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_even_move_is_named_as_the_total_not_one_half(seed: int) -> None:
    # two platforms, both up a fifth: the move is everything's, not the larger platform's
    leaves = [
        {"platform": p, "country": c} | {k: v for k, v in leaf.items() if k in PERIODS}
        for p, c, leaf in zip(
            ["web"] * 6 + ["app"] * 6,
            [f"c{i}" for i in range(6)] * 2,
            planted(seed, [({}, 1.2)], size=4000),
            strict=False,
        )
    ]
    ((segment, factor),) = story(leaves)
    assert segment == {}
    assert factor == pytest.approx(1.2, abs=0.02)


def test_the_even_move_of_most_values_is_told_by_those_values() -> None:
    # three regions of four up by the same factor, one flat: the rule that weighs the other
    # telling names the three, where the forward search alone tells an even shift with the
    # flat region as its exception
    moves = [({"region": r}, 1.3) for r in ("EU", "US", "APAC")]
    leaves = planted(1, moves)
    assert as_set(named(leaves)) == as_set([{"region": r} for r in ("EU", "US", "APAC")])
    without = tuple(r for r in RULES if r.__name__ != "other_telling")
    assert named(leaves, rules=without) == [{}, {"region": "LATAM"}]


CASES = [
    [({"region": "EU"}, 0.7)],
    [({"region": "EU"}, 0.7), ({"channel": "ads"}, 1.4)],
    [({"region": "US", "channel": "email"}, 1.8)],
    [({"region": r}, 1.3) for r in ("EU", "US", "APAC")],
]


@pytest.mark.parametrize("moves", CASES)
def test_swapping_the_periods_names_the_same_segments(moves: list[Move]) -> None:
    leaves = planted(4, moves)
    swapped = [
        leaf | {"baseline": leaf["comparison"], "comparison": leaf["baseline"]} for leaf in leaves
    ]
    forward, backward = story(leaves), story(swapped)
    assert as_set([s for s, _ in backward]) == as_set([s for s, _ in forward])
    if len(forward) == 1:  # a cause picked alone moved by the inverse factor
        assert backward[0][1] == pytest.approx(1.0 / forward[0][1], rel=1e-9)


@pytest.mark.parametrize("moves", CASES)
def test_scaling_the_metric_changes_no_segment_and_no_factor(moves: list[Move]) -> None:
    # the same counts in cents: every row 100 times larger, its noise with it
    leaves = planted(5, moves)
    scaled = [
        leaf | {"baseline": leaf["baseline"] * 100, "comparison": leaf["comparison"] * 100}
        for leaf in leaves
    ]
    plain, cents = story(leaves), story(scaled, row_value=100.0)
    assert [s for s, _ in cents] == [s for s, _ in plain]
    assert [k for _, k in cents] == pytest.approx([k for _, k in plain], rel=1e-9)


@pytest.mark.parametrize("moves", CASES)
def test_renaming_and_reordering_the_columns_changes_no_segment(moves: list[Move]) -> None:
    leaves = planted(6, moves)
    names = {"region": "zone", "device": "agent", "channel": "source"}
    order = ("channel", "region", "device", *PERIODS)
    renamed = [{names.get(k, k): leaf[k] for k in order} for leaf in leaves]
    back = {v: k for k, v in names.items()}
    plain = story(leaves)
    again = [({back[c]: v for c, v in s.items()}, k) for s, k in story(renamed)]
    assert as_set([s for s, _ in again]) == as_set([s for s, _ in plain])
    factors = {frozenset(s.items()): k for s, k in plain}
    for s, k in again:
        assert k == pytest.approx(factors[frozenset(s.items())], rel=1e-9)
