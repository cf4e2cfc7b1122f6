"""Text from the data reaches the model only inside marked data blocks.

Every block is fenced by a tag carrying a fresh random nonce, so text inside cannot close it, and
the JSON inside has ``<`` and ``>`` written as ``\\u003c`` / ``\\u003e``, so no tag of any kind
can appear in it; characters that draw nothing or steer the text direction are ``\\u`` escapes
too, so the model reads ``Wid\\u200bget``, not a second ``Widget``. The system prompt says what
the blocks are: data to analyse, never instructions. Model-written text that ends up in findings
is flattened and capped here too.
"""

from __future__ import annotations

import secrets
from typing import Any

from sql_tools import one_line
from sql_tools.output import dumps, printable_line


def to_json(payload: Any) -> str:
    """Compact JSON as the product writes it (``output.dumps``: hidden characters and big
    integers escaped) with no angle brackets (escaped as JSON unicode escapes)."""
    text = dumps(payload, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


def data_block(payload: Any, source: str) -> str:
    """``payload`` as JSON inside an ``<untrusted-data-NONCE>`` block naming its source."""
    nonce = secrets.token_hex(6)
    tag = f"untrusted-data-{nonce}"
    return f'<{tag} source="{one_line(source, 80)}">\n{to_json(payload)}\n</{tag}>'


def clean(text: Any, limit: int) -> str:
    """Model-written text for a finding: one line, at most ``limit`` characters, hidden
    characters written as escapes (``output.printable_line``)."""
    return printable_line(text, limit)
