"""A story as the rules tell it: the search's inputs and the tellings weighed so far."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.engine.cube import Cube
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions
from tasks.engine.search.picks import Search


@dataclass(frozen=True, eq=False)
class Story:
    """What each story rule reads and returns (a new one, via ``dataclasses.replace``).

    ``found`` is the story told so far; ``other`` the other telling of the even move of
    everything, until one of the two is chosen; ``passed`` the telling passed over;
    ``even_moved`` whether everything moved beyond the noise (only then is there another
    telling, or an even shift for a column to refute)."""

    cube: Cube
    leaves: Leaves
    options: SearchOptions
    found: Search
    other: Search | None = None
    passed: Search | None = None
    even_moved: bool = False
