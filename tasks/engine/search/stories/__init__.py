"""The stories: whether an even move of everything is an even shift or its largest pieces, and
whether a named segment is the cause or its parts are.

The forward search's story is told again by each rule in :data:`RULES`, in order, each reading
and returning a :class:`~tasks.engine.search.stories.story.Story`.
"""

from __future__ import annotations

from collections.abc import Callable

from tasks.engine.cube import Cube
from tasks.engine.search.forward import search
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions
from tasks.engine.search.picks import Search
from tasks.engine.search.stories.better_telling import better_telling
from tasks.engine.search.stories.by_a_column import told_by_a_column
from tasks.engine.search.stories.even_first import without_an_even_shift_first
from tasks.engine.search.stories.one_column import one_column_told
from tasks.engine.search.stories.other_telling import other_telling
from tasks.engine.search.stories.parts import parts_told
from tasks.engine.search.stories.reclimb import reclimbed
from tasks.engine.search.stories.score import story_score
from tasks.engine.search.stories.story import Story

__all__ = ["RULES", "Story", "search_stories", "story_score", "told_by_a_column"]

RULES: tuple[Callable[[Story], Story], ...] = (
    other_telling,
    without_an_even_shift_first,
    better_telling,
    one_column_told,
    parts_told,
    reclimbed,
)


def search_stories(
    cube: Cube,
    leaves: Leaves,
    options: SearchOptions,
    rules: tuple[Callable[[Story], Story], ...] = RULES,
) -> Search:
    """The story the rules tell, starting from the forward search's.

    When everything moved beyond the noise, the forward search's story is weighed against the
    other telling of the even move of everything (an even shift first with exceptions when the
    search did not take it, segments alone with the rest flat when it did; :func:`other_telling`).
    The forward step weighs one candidate against the next, so the order of its picks decides
    whether an even move of everything is told as an even shift or as its largest pieces. The
    two are scored alike (:func:`story_score`) and the higher score is the answer
    (:func:`better_telling`). Segments alone must leave a part of the data flat: naming every
    value of a column is the even shift again, told value by value. An even shift taken first
    stays in its story only when what the segments after it leave moved beyond the noise
    (:func:`without_an_even_shift_first`), and when no column's values refute it
    (:func:`one_column_told`): the chosen story is told by that column's values, and the story
    passed over, so told, is weighed against the chosen. A pick whose parts refute it is told
    by them (:func:`parts_told`), and each pick is climbed again given the others
    (:func:`reclimbed`)."""
    story = Story(cube, leaves, options, found=search(cube, leaves, options))
    for rule in rules:
        story = rule(story)
    return story.found
