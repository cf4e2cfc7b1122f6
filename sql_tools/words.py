"""A segment's change in words, for every text the product writes (the report, the console,
the hypotheses' summaries, the tool calls' summaries).

Every sentence about a segment's move is made here, from one figure with what it is of: the
segment's own change (``fell 96.0% (from 50 to 2)``), or a part of a named whole (``80.3% of the
total change of -2,750``; ``56.7% of the 25,246 moved in either direction (net -3,380)``). A
share of the total is never worded as the segment's own change.
"""

from __future__ import annotations

from typing import Any

from sql_tools.output import Figures, Quantity, finite, percent


def own_change(before: Any, after: Any, values: Quantity) -> str:
    """A segment's own move, from its two values: ``fell 96.0% (from 50 to 2)``; ``rose from 0
    to 57`` (a move from nothing has no relative size); ``did not move (50 in both periods)``."""
    span = f"from {values.value(before)} to {values.value(after)}"
    if not finite(before) or not finite(after):
        return f"moved ({span})"
    if values.value(before) == values.value(after):
        return f"did not move ({values.value(before)} in both periods)"
    word = "rose" if after > before else "fell"
    if not before:
        return f"{word} {span}"
    return f"{word} {percent(abs((after - before) / before), sign=False)} ({span})"


def own_relative(before: Any, after: Any) -> float | None:
    """The relative change :func:`own_change` words (None where it words none)."""
    if not finite(before) or not finite(after) or not before:
        return None
    return (after - before) / abs(before)


def whole_text(whole: Any, changes: Quantity, name: str = "the total change") -> str:
    """A whole a share is of, its figure said: ``the total change of -2,750``."""
    return f"{name} of {changes.change(whole)}"


def gross_text(gross: float, net: Any, changes: Quantity) -> str:
    """The movement in either direction, when opposite moves hide in a small net change (a
    share of the net would read -1,747%): ``25,246 moved in either direction for a net -3,380``."""
    return f"{changes.value(gross)} moved in either direction for a net {changes.change(net)}"


def share_of(
    part: Any,
    whole: Any,
    changes: Quantity,
    name: str = "the total change",
    units: bool = False,
) -> str:
    """``part`` as a share of a named whole, the whole's figure said: ``80.3% of the total change
    of -2,750`` (``units``: the part in the metric's units first, ``-2,207, 80.3% of ...``); the
    part in units when the whole is nothing (``+12 against the total change of 0``)."""
    if not finite(part) or not finite(whole) or not whole:
        return f"{changes.change(part)} against {whole_text(whole, changes, name)}"
    head = f"{changes.change(part)}, " if units else ""
    return f"{head}{percent(part / whole, sign=False)} of {whole_text(whole, changes, name)}"


def share_of_gross(part: Any, gross: float, net: Any, changes: Quantity) -> str:
    """``part`` in the metric's units and as a share of the movement in either direction
    (:func:`gross_text`): ``-11,813, -46.8% of 25,246 moved in either direction for a net
    +1,620``."""
    return f"{changes.change(part)}, {percent(part / gross)} of {gross_text(gross, net, changes)}"


def share_in(part: Any, f: Figures, units: bool = False) -> str:
    """``part`` as a share, the whole named, as the report says it: of the total change, or of
    the movement in either direction when opposite moves hide in the net (``f.gross``)."""
    if f.gross:
        return share_of_gross(part, f.gross, f.net, f.changes)
    return share_of(part, f.net, f.changes, units=units)
