"""Prompt templates (``*.md`` beside this file) and a strict renderer.

Placeholders are ``{{name}}``. ``render`` raises on a placeholder the caller did not give and on
a value given for no placeholder, so a template and its caller cannot drift apart silently.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_DIR = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")


class PromptError(KeyError):
    """A template and its values do not match."""


@cache
def template(name: str) -> str:
    """The raw text of ``prompts/<name>.md``."""
    path = _DIR / f"{name}.md"
    if not path.is_file() or path.parent != _DIR:
        raise PromptError(f"no prompt named {name!r}")
    return path.read_text(encoding="utf-8")


def placeholders(name: str) -> set[str]:
    """The placeholder names a template uses."""
    return set(_PLACEHOLDER.findall(template(name)))


def render(name: str, **values: str) -> str:
    """``prompts/<name>.md`` with every ``{{placeholder}}`` replaced (values are inserted once,
    never re-scanned, so text inside a value cannot act as a placeholder)."""
    want = placeholders(name)
    missing, unknown = want - values.keys(), values.keys() - want
    if missing or unknown:
        raise PromptError(f"prompt {name!r}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template(name))
