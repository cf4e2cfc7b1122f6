"""The better of the two tellings of an even move of everything, scored alike."""

from __future__ import annotations

from dataclasses import replace

from tasks.engine.search.stories.score import story_score
from tasks.engine.search.stories.story import Story
from tasks.engine.search.stories.whole_column import names_a_whole_column


def better_telling(story: Story) -> Story:
    """The other telling when it names something, not every value of a column, and scores
    higher; else the forward one. The other is kept as the telling passed over."""
    found, other = story.found, story.other
    if other is None:
        return story
    # no other telling, or the even shift told value by value, or a lower score: the forward one
    told_again = (
        other.picks
        and not names_a_whole_column(story.cube, other)
        and story_score(other) > story_score(found)
    )
    chosen, passed = (other, found) if told_again else (found, other)
    return replace(story, found=chosen, passed=passed, other=None)
