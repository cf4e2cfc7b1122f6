"""The other telling of an even move of everything: without the even shift when the forward
search took it, else from it."""

from __future__ import annotations

from dataclasses import replace

from tasks.engine.search.forward import search
from tasks.engine.search.options import Telling
from tasks.engine.search.stories.story import Story


def took_even(story: Story) -> bool:
    """Whether the forward search took the even shift."""
    return any(p.seg == 0 for p in story.found.picks)


def other_telling(story: Story) -> Story:
    """The story told the other way, when everything moved beyond the noise (else as it is)."""
    found = story.found
    crit = found.bounds
    if abs(found.z[0]) < crit[0]:
        return story
    telling = Telling(allow_even=False) if took_even(story) else Telling(even_first=True)
    other = search(story.cube, story.leaves, story.options, telling, groups=found.groups)
    return replace(story, other=other, even_moved=True)
