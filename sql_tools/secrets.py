"""Secret-shaped text: the one recogniser every output of the product goes through.

A value has the shape of a secret when it has the form of a well-known API key, token or
private key (Stripe, JWT, AWS, GitHub, Slack, Google, OpenAI, Anthropic, PEM private keys).
:func:`mask_secrets` keeps its first characters and replaces the rest with :data:`MASK`
(``sk_live_••••``), wherever it is written:

- as it is (``token sk_live_51Hq…``);
- inside percent-encoded text, once or several times over (``key%3Dsk_live_…``,
  ``%2573k_live_…``): the text's percent-decoded views are read too, and the encoded span
  that decodes to the secret part is masked (``key%3Dsk_live_••••``);
- inside base64 or base64url text (``c2tfbGl2ZV81…``, alone or inside a longer encoded
  document, at any alignment): a run of base64 characters is decoded, and the characters that
  encode the secret part are masked. An encoded view is read again for another encoding (base64
  of a percent-encoded key, a percent-encoded base64 key), three encodings deep.

:func:`masked` applies it to every string of a document, dict keys included (a column named
like a key names a segment or a pass); two keys that would mask to the same text keep both,
numbered (``sk_live_•••• (1)``, ``sk_live_•••• (2)``, by their order as text). Within a dict or a
list, a string that ends with a bare prefix of a format (``sk_live_``) and the string just
after it that completes the format (the rest of a key split across two cells of a row, or two
values of a segment) are read together, and that second string is masked too.

Masking is deterministic and idempotent: masked text holds nothing the recogniser recognises.

What cannot be recognised: a key whose parts are not next to each other in one document (split
across rows that are shown apart, or across a table name and a value), and a key in another
encoding (hex, an encryption, a custom alphabet): the part that does not carry a format's
prefix is an arbitrary string, like any identifier.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Callable, Iterator
from typing import Any

MASK = "\u2022" * 4
"""What replaces the secret part of a secret-shaped value."""

_PREFIXES = {  # a format's kept first characters -> the secret part that follows them
    "stripe": (r"(?:sk|rk)_(?:live|test)_", r"[0-9A-Za-z]{8,}"),
    "anthropic": (r"sk-ant-", r"[0-9A-Za-z_-]{8,}"),
    "openai": (r"sk-", r"(?:proj-|svcacct-|admin-)?[0-9A-Za-z_-]{20,}"),
    "jwt": (r"eyJ", r"[0-9A-Za-z_-]{8,}\.[0-9A-Za-z_-]{8,}\.[0-9A-Za-z_-]*"),
    "aws": (r"AKIA|ASIA", r"[0-9A-Z]{16}(?![0-9A-Za-z])"),
    "github": (r"gh[pousr]_", r"[0-9A-Za-z]{20,}"),
    "github_pat": (r"github_pat_", r"[0-9A-Za-z_]{20,}"),
    "slack": (r"xox[bpars]-", r"[0-9A-Za-z-]{10,}"),
    "google": (r"AIza", r"[0-9A-Za-z_-]{30,}"),
    "pem": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*)",
    ),
}
_SECRET = re.compile(
    r"(?<![0-9A-Za-z_])(?:"
    + "|".join(f"(?P<{name}>{keep}){rest}" for name, (keep, rest) in _PREFIXES.items())
    + ")"
)
_BARE_PREFIX = re.compile(  # a string ending with a prefix and nothing of the secret yet
    r"(?<![0-9A-Za-z_])(?:" + "|".join(keep for keep, _ in _PREFIXES.values()) + r")\Z"
)
_ANY_PREFIX = re.compile("|".join(keep for keep, _ in _PREFIXES.values()))  # a quick first look
_SHORTEST_SECRET = 15  # sk-ant- or xoxb- and their least secret part: shorter text holds none
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_B64_RUN = re.compile(r"[0-9A-Za-z+/_-]{20,}")  # 15 bytes and more: the shortest secret
_B64URL = str.maketrans("-_", "+/")
_DEPTH = 3  # encodings read inside one another
_TEXT = bytes([*range(0x20, 0x7F), 9, 10, 13])  # printable ASCII


Span = Callable[[int, int], tuple[int, int]]
"""Maps a span of a decoded view to the span of the original text that encodes it."""


def _identity(a: int, b: int) -> tuple[int, int]:
    return a, b


def _percent_view(text: str, span: Span) -> tuple[str, Span] | None:
    """``text`` percent-decoded once (each ``%XX`` as the character of that byte), and its
    span map; None when it holds no escape."""
    at = [m.start() - 2 * k for k, m in enumerate(_PERCENT.finditer(text))]  # in the view
    if not at:
        return None

    def source(i: int) -> tuple[int, int]:  # the view's character i in ``text``
        k = bisect.bisect_left(at, i)  # escapes before it, each two characters longer
        escaped = k < len(at) and at[k] == i
        return i + 2 * k, i + 2 * k + (3 if escaped else 1)

    def mapped(a: int, b: int) -> tuple[int, int]:
        return span(source(a)[0], source(b - 1)[1])

    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text), mapped


def _base64_views(text: str, span: Span) -> Iterator[tuple[str, Span, bool]]:
    """Every run of base64 (or base64url) characters in ``text`` decoded at each of its four
    alignments, as text (one character per byte), with its span map and whether it reads as
    text (nine bytes in ten printable ASCII) rather than binary data."""
    for run in _B64_RUN.finditer(text):
        for shift in range(4):
            start = run.start() + shift
            chunk = text[start : run.end()]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            try:
                data = base64.b64decode(chunk.translate(_B64URL), validate=True)
            except (binascii.Error, ValueError):
                continue
            end, n = run.end(), len(data)

            def mapped(
                a: int, b: int, start: int = start, end: int = end, n: int = n
            ) -> tuple[int, int]:
                # a byte's bits lie in the characters from 8a // 6 to (8b - 1) // 6; a secret
                # running to the decoded end takes the run's last characters with it
                stop = end if b >= n else start + (8 * b - 1) // 6 + 1
                return span(start + 8 * a // 6, stop)

            binary = len(data.translate(None, _TEXT))
            yield data.decode("latin-1"), mapped, binary <= 0.1 * len(data)


def _spans(text: str, span: Span, depth: int, found: list[tuple[int, int, str]]) -> None:
    """Add (start, end, secret) to ``found`` for every secret part in ``text`` or in one of its
    decoded views, as a span of the original text."""
    _plain(text, span, found)
    if depth == _DEPTH:
        return
    view = _percent_view(text, span)
    if view is not None:
        _spans(*view, depth + 1, found)
    for decoded, mapped, is_text in _base64_views(text, span):
        if is_text:
            _spans(decoded, mapped, depth + 1, found)
        elif depth == 0:  # binary (an image): a secret written as it is in it, no more encodings
            _plain(decoded, mapped, found)


def _plain(text: str, span: Span, found: list[tuple[int, int, str]]) -> None:
    """The secrets written as they are in ``text``."""
    if not _ANY_PREFIX.search(text):
        return
    for m in _SECRET.finditer(text):
        keep_end = m.end(m.lastgroup or 0)
        if m.end() > keep_end:
            found.append((*span(keep_end, m.end()), m.group()))


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, the secret as decoded) of every secret part ``text`` holds, in any of the
    encodings the module's docstring lists."""
    if len(text) < _SHORTEST_SECRET:
        return []
    found: list[tuple[int, int, str]] = []
    _spans(text, _identity, 0, found)
    return found


def _mask_spans(text: str, spans: list[tuple[int, int, str]]) -> str:
    out: list[str] = []
    at = 0
    for start, end, _ in sorted(spans):
        if end <= at:
            continue
        if start >= at:
            out += [text[at:start], MASK]
        at = end
    return "".join(out) + text[at:]


def mask_secrets(text: str) -> str:
    """``text`` with every secret-shaped value (see the module's docstring) cut to its first
    characters and :data:`MASK`: ``sk_live_51Hq...`` reads ``sk_live_••••``."""
    spans = secret_spans(text)
    return _mask_spans(text, spans) if spans else text


def _split_rest(before: Any, text: str) -> str:
    """``text`` with its first characters masked when they complete a key whose prefix ends
    ``before`` (the string just before it in a row, a segment or a list)."""
    if not isinstance(before, str) or not text or not _BARE_PREFIX.search(before):
        return text
    prefix = _BARE_PREFIX.search(before).group()  # type: ignore[union-attr]
    m = _SECRET.match(prefix + text)
    if m is None or m.end() <= len(prefix):
        return text
    return MASK + text[m.end() - len(prefix) :]


def _masked_items(items: list[Any], each: Callable[[Any], Any]) -> list[Any]:
    out = []
    before: Any = None
    for item in items:
        out.append(each(_split_rest(before, item) if isinstance(item, str) else item))
        before = item
    return out


def masked_keys(keys: list[Any]) -> list[Any]:
    """Each key masked (a string; other keys as they are); keys that would mask to the same
    text as another key are numbered by their order as text, so no two keys merge into one."""
    out = [mask_secrets(k) if isinstance(k, str) else k for k in keys]
    changed = {i for i, (k, m) in enumerate(zip(keys, out, strict=True)) if k != m}
    if not changed:
        return out
    taken = {m for i, m in enumerate(out) if i not in changed}
    groups: dict[Any, list[int]] = {}
    for i in changed:
        groups.setdefault(out[i], []).append(i)
    for text, members in sorted(groups.items(), key=lambda g: str(g[0])):
        if len(members) == 1 and text not in taken:
            taken.add(text)
            continue
        n = 0
        for i in sorted(members, key=lambda i: str(keys[i])):
            n += 1
            while f"{text} ({n})" in taken:
                n += 1
            out[i] = f"{text} ({n})"
            taken.add(out[i])
    return out


def walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with ``leaf`` applied to every scalar in it and secrets masked in every string,
    dict keys included (see the module's docstring); dicts, lists and tuples are copied."""

    def each(v: Any) -> Any:
        if isinstance(v, dict | list | tuple):
            return walk(v, leaf)
        return leaf(mask_secrets(v) if isinstance(v, str) else v)

    if isinstance(value, dict):
        keys = masked_keys(list(value))
        values = _masked_items(list(value.values()), each)
        return dict(zip(keys, values, strict=True))
    if isinstance(value, list | tuple):
        return _masked_items(list(value), each)
    return each(value)


def masked(value: Any) -> Any:
    """``value`` with every secret masked (see :func:`walk`): the memory store's records."""
    return walk(value, lambda v: v)


def _secrets_in(value: Any, found: set[str]) -> set[str]:
    if isinstance(value, str):
        found.update(s for _, _, s in secret_spans(value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _secrets_in(k, found)
            _secrets_in(v, found)
    elif isinstance(value, list | tuple):
        for v in value:
            _secrets_in(v, found)
    return found


def secrets_note(*values: Any) -> str | None:
    """``"N secret-shaped values were masked"`` for the distinct ones in ``values``, or None."""
    found = sorted(_secrets_in(values, set()))
    # a secret read whole in one view and cut short in another (an encoding's last characters
    # left out) is one secret: in sorted order a text's longer forms follow it
    n = sum(1 for i, s in enumerate(found) if i + 1 == len(found) or not found[i + 1].startswith(s))
    if n == 0:
        return None
    return f"{n} secret-shaped value{'s were' if n > 1 else ' was'} masked"
