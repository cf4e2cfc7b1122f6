"""What a file's first bytes say: binary formats, text encodings, delimiter.

All functions here look at the head of a file only (the first chunk or block) and never at
the whole file.
"""

from __future__ import annotations

import codecs
import csv
import io
from itertools import islice

from sql_tools import LoadError

DELIMITERS = (",", ";", "\t", "|")
SNIFF_RECORDS = 200

# (magic bytes, what the file looks like, needs binary-looking head to count)
_MAGIC: tuple[tuple[bytes, str, bool], ...] = (
    (b"PK\x03\x04", "a ZIP/XLSX file", False),
    (b"PK\x05\x06", "an empty ZIP file", False),
    (b"\x1f\x8b", "a gzip-compressed file (name it .csv.gz to load it)", False),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Excel (.xls) or other OLE file", False),
    (b"\x89PNG\r\n\x1a\n", "a PNG image", False),
    (b"\xff\xd8\xff", "a JPEG image", False),
    (b"SQLite format 3\x00", "a SQLite database", False),
    (b"\xfd7zXZ\x00", "an xz-compressed file", False),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", False),
    (b"BZh", "a bzip2-compressed file", True),
    (b"PAR1", "a Parquet file", True),
    (b"%PDF", "a PDF file", True),
    (b"GIF8", "a GIF image", True),
)

_UTF16_NAMES = {"utf-16-le": "UTF-16LE", "utf-16-be": "UTF-16BE"}


def _looks_binary(head: bytes) -> bool:
    """True when ``head`` holds a NUL byte or bytes that are not UTF-8."""
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 4  # a sequence cut at the chunk end is not evidence
    return False


def binary_kind(head: bytes) -> str | None:
    """What a binary file looks like (``"a ZIP/XLSX file"``), or None for text.

    Signatures that are also plausible text (``PAR1``, ``%PDF``) only count when the head
    looks binary too, so a CSV whose first header is ``PAR1`` still loads.
    """
    for magic, kind, needs_binary in _MAGIC:
        if head.startswith(magic) and (not needs_binary or _looks_binary(head)):
            return kind
    if head[8:12] == b"DUCK":
        return "a DuckDB database file"
    return None


def check_not_binary(head: bytes, name: str) -> None:
    """Raise ``unsupported_file`` when ``head`` starts with a known binary signature."""
    kind = binary_kind(head)
    if kind is not None:
        raise LoadError(f"{name}: not a CSV file; it looks like {kind}", code="unsupported_file")


def _utf16_by_nuls(head: bytes) -> str | None:
    """``utf-16-le``/``utf-16-be`` when the NUL pattern of a BOM-less head says so."""
    sample = head[:4096]
    sample = sample[: len(sample) - len(sample) % 2]
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]
    even_nul = even.count(0) / len(even)
    odd_nul = odd.count(0) / len(odd)
    if odd_nul >= 0.4 and even_nul <= 0.02:
        return "utf-16-le"
    if even_nul >= 0.4 and odd_nul <= 0.02:
        return "utf-16-be"
    return None


def canonical_codec(encoding: str) -> str:
    """Python's canonical codec name for ``encoding``; LoadError when it is unknown."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise LoadError(
            f"unknown encoding {encoding!r}; use e.g. utf-8, cp1252, latin-1 or utf-16",
            code="invalid_arguments",
        ) from None


def detect_encoding(head: bytes, requested: str | None) -> tuple[str, int, str | None]:
    """Decide how to decode a file from its first bytes.

    Args:
        head: The first (decompressed) bytes of the file.
        requested: ``LoadOptions.encoding``; None means detect.

    Returns:
        ``(codec, bom_length, warning)``. ``codec`` is ``"utf-8"`` when the bytes can be read
        as they are (after skipping ``bom_length`` bytes); anything else means transcoding.
    """
    if requested is not None:
        codec = canonical_codec(requested)
        if codec in ("utf-8", "utf-8-sig"):
            bom = 3 if head.startswith(codecs.BOM_UTF8) else 0
            return "utf-8", bom, "UTF-8 byte-order mark removed" if bom else None
        if codec == "utf-16" and not head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            codec = _utf16_by_nuls(head) or codec  # no BOM: byte order from the NUL pattern
        return codec, 0, f"converted from {requested} to UTF-8"
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        order = "LE" if head.startswith(codecs.BOM_UTF32_LE) else "BE"
        return "utf-32", 0, f"converted from UTF-32{order} to UTF-8"
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8", 3, "UTF-8 byte-order mark removed"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        order = "LE" if head.startswith(codecs.BOM_UTF16_LE) else "BE"
        return "utf-16", 0, f"converted from UTF-16{order} to UTF-8"
    guessed = _utf16_by_nuls(head)
    if guessed is not None:
        return guessed, 0, f"converted from {_UTF16_NAMES[guessed]} (no byte-order mark) to UTF-8"
    return "utf-8", 0, None


def encoding_label(codec: str, head: bytes) -> str:
    """The encoding name recorded in the catalogue (``utf-16-le`` rather than ``utf-16``)."""
    if codec == "utf-16":
        return "utf-16-be" if head.startswith(codecs.BOM_UTF16_BE) else "utf-16-le"
    if codec == "utf-32":
        return "utf-32-be" if head.startswith(codecs.BOM_UTF32_BE) else "utf-32-le"
    return codec


def _field_counts(text: str, delimiter: str, complete: bool) -> list[int]:
    """Field counts of the first non-blank records of ``text`` split on ``delimiter``."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"')
    counts: list[int] = []
    try:
        counts.extend(len(r) for r in islice(reader, SNIFF_RECORDS * 2) if r)
    except csv.Error:  # e.g. an over-long field: judge by the records before it
        complete = False
    counts = counts[:SNIFF_RECORDS]
    if not complete and len(counts) > 1 and len(counts) < SNIFF_RECORDS:
        counts.pop()  # the head may end inside a quoted field: its last record can be partial
    return counts


def detect_delimiter(text: str, complete: bool, name: str) -> str:
    """Pick the delimiter among ``, ; tab |`` from the first ~200 records of ``text``.

    A candidate that splits every record into the same number (> 1) of fields wins; the most
    fields first, ties in the order ``, ; tab |``. Failing that, a candidate that splits the
    header and most records alike is chosen (the full pass then names the ragged line). A
    single-column file is accepted only when a candidate leaves every record whole.

    Args:
        text: The decoded head of the file (whole lines).
        complete: True when ``text`` is the whole file.
        name: File name for messages.
    """
    counts = {d: _field_counts(text, d, complete) for d in DELIMITERS}
    consistent = [d for d, c in counts.items() if c and c[0] > 1 and len(set(c)) == 1]
    if consistent:
        return max(consistent, key=lambda d: (counts[d][0], -DELIMITERS.index(d)))

    def agreement(d: str) -> float:
        c = counts[d]
        return sum(1 for n in c if n == c[0]) / len(c)

    split = [d for d, c in counts.items() if c and c[0] > 1 and agreement(d) >= 0.5]
    if split:
        return max(split, key=lambda d: (agreement(d), counts[d][0], -DELIMITERS.index(d)))
    whole = [d for d, c in counts.items() if c and set(c) == {1}]
    if whole:
        return whole[0]
    raise LoadError(
        f"{name}: could not detect the delimiter (tried comma, semicolon, tab, pipe); "
        "pass --delimiter"
    )
