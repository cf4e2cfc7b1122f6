"""How values leave the product: as JSON, and as text a person or a model reads.

Every JSON document the product writes or prints goes through :func:`dumps`; every value shown
to a person (terminal, report.md, report.html, chart labels) goes through :func:`printable`.

:func:`shallow` measures (and cuts) the nesting of JSON text without parsing it: the standard
library's parser recurses and fails with ``RecursionError`` at about a thousand levels, and
pydantic's refuses a few hundred levels with an error that drops the message, so a request
that deep has to be recognised before either sees it.
"""

from __future__ import annotations

import re

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|[^"\[\]{}]+|"')


def shallow(text: str, max_depth: int) -> tuple[str, int]:
    """``text`` with every array or object nested deeper than ``max_depth`` replaced by
    ``null``, and the deepest nesting found (0 for a scalar)."""
    out: list[str] = []
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
            if depth == max_depth + 1:
                out.append("null")
            if depth > max_depth:
                continue
        elif tok in ("]", "}"):
            depth -= 1
            if depth >= max_depth:
                continue
        elif depth > max_depth:
            continue
        out.append(tok)
    return "".join(out), deepest
