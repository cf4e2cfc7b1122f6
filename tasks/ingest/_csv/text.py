"""The text: BOM, transcoding to UTF-8, UTF-8 validation, and line-aligned blocks.

:class:`Blocks` cuts the UTF-8 text into blocks that end at a line end, each a :class:`Block`
with the number of its first line and its line-end counts; it validates the bytes, refuses NUL
bytes and over-long lines, names the line of the first bad byte, and copies each block to the
UTF-8 copy for DuckDB when one is written.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from itertools import chain
from typing import BinaryIO, NamedTuple

from sql_tools import LoadError

_CP1252_PLAUSIBLE = set(
    "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝßàáâãäåæçèéêëìíîïñòóôõöøùúûüýœŒšŠžŽ€£¥°’‘“”–—«»§µ²³·¿¡©®™…"
)


def _count_lines(data: bytes) -> int:
    """Line terminators in ``data`` (``\\n``, ``\\r\\n`` and a lone ``\\r`` each count once)."""
    n = data.count(b"\n")
    if b"\r" in data:
        n += data.count(b"\r") - data.count(b"\r\n")
    return n


def skip_bom(chunks: Iterator[bytes], bom: int) -> Iterator[bytes]:
    """``chunks`` without the first ``bom`` bytes."""
    first = True
    for chunk in chunks:
        if first:
            chunk, first = chunk[bom:], False
        if chunk:
            yield chunk


def as_utf8(chunks: Iterator[bytes], codec: str, label: str, name: str) -> Iterator[bytes]:
    """Decode ``chunks`` from ``codec`` and yield the text as UTF-8 bytes."""
    decoder = codecs.getincrementaldecoder(codec)("strict")
    lines = 0
    first = True
    for chunk in chain(chunks, [None]):
        state = decoder.getstate()
        try:
            text = decoder.decode(chunk or b"", final=chunk is None)
        except UnicodeDecodeError as e:
            line = lines + _lines_before_error(codec, state, chunk or b"", e.start)
            bad = e.object[e.start : e.start + 2].hex(" ").upper()
            raise LoadError(
                f"{name} line {line}: not valid {label} (bytes 0x{bad}); "
                "pass the file's real encoding with --encoding"
            ) from None
        if first and text:
            text, first = text.removeprefix("\ufeff"), False
        lines += text.count("\n")
        if text:
            yield text.encode("utf-8")


def _lines_before_error(codec: str, state: tuple[bytes, int], chunk: bytes, pos: int) -> int:
    """1-based line of a decoding error at ``pos`` of the decoder's input (best effort)."""
    decoder = codecs.getincrementaldecoder(codec)("replace")
    try:
        decoder.setstate(state)
        prefix = decoder.decode((state[0] + chunk)[:pos])
    except (UnicodeError, TypeError, ValueError):
        return 1
    return prefix.count("\n") + 1


def _line_bounds(block: bytes, pos: int) -> tuple[int, int]:
    """Start and end offsets of the line of ``block`` holding offset ``pos``."""
    start = max(block.rfind(b"\n", 0, pos), block.rfind(b"\r", 0, pos)) + 1
    ends = [i for i in (block.find(b"\n", pos), block.find(b"\r", pos)) if i >= 0]
    return start, min(ends) if ends else len(block)


def _cp1252_plausible(line: bytes) -> bool:
    """True when the non-ASCII bytes of ``line`` read as ordinary Western text in cp1252."""
    try:
        text = line.decode("cp1252")
    except UnicodeDecodeError:
        return False
    odd = [ch for ch in text if ord(ch) > 127]
    return bool(odd) and all(ch in _CP1252_PLAUSIBLE for ch in odd)


class Block(NamedTuple):
    """A line-aligned block and what one pass over it counted."""

    data: bytes
    first: int
    """Number of the block's first line (1-based)."""
    newlines: int
    """``\\n`` bytes in ``data`` (``\\r\\n`` included)."""
    crlfs: int
    """``\\r\\n`` pairs in ``data``."""
    lone_crs: int
    """``\\r`` bytes not followed by ``\\n``."""
    skeleton: bytes | None = None
    """``data`` with every byte but the delimiter and ``\\n`` deleted; only for blocks without
    ``\\r`` or quotes once the delimiter is known (see ``Blocks.skeleton_delete``)."""


def block_of(data: bytes, first: int) -> Block:
    """A :class:`Block` of ``data`` (no skeleton)."""
    if b"\r" not in data:
        return Block(data, first, data.count(b"\n"), 0, 0)
    crlfs = data.count(b"\r\n")
    return Block(data, first, data.count(b"\n"), crlfs, data.count(b"\r") - crlfs)


class Blocks:
    """Line-aligned blocks of validated UTF-8, each with the number of its first line.

    Also enforces the line-length cap while buffering (a line with no end is never held in
    memory beyond ``max_line`` bytes) and copies each block to ``sink`` when one is given.
    Once the checker sets ``skeleton_delete`` (every byte but the delimiter and ``\\n``),
    blocks without ``\\r`` or quotes are reduced to their skeleton, which both counts the
    lines and lets the checker compare field counts, in one pass over the bytes.
    """

    def __init__(
        self,
        chunks: Iterator[bytes],
        name: str,
        max_line: int,
        sink: BinaryIO | None,
        validate: bool,
    ) -> None:
        self._chunks = chunks
        self._name = name
        self._max_line = max_line
        self._sink = sink
        self._validate = validate
        self.lines = 0  # line terminators emitted so far
        self.bytes = 0
        self.line_ends: set[str] = set()  # kinds seen: "\n", "\r\n", "\r"
        self.ends_with_newline = True
        self.skeleton_delete: bytes | None = None

    def __iter__(self) -> Iterator[Block]:
        buf = b""
        for chunk in self._chunks:
            buf = buf + chunk if buf else chunk
            cut = buf.rfind(b"\n") + 1 or self._cr_cut(buf)
            if cut:
                yield self._emit(buf[:cut])
                buf = buf[cut:]
            if len(buf) > self._max_line + 2:
                raise LoadError(
                    f"{self._name} line {self.lines + 1}: line is longer than "
                    f"{self._max_line} bytes (limit max_field_bytes)"
                )
        if buf:
            yield self._emit(buf)

    @staticmethod
    def _cr_cut(buf: bytes) -> int:
        """Cut offset after the last lone ``\\r`` (old Mac line ends), 0 when none is safe."""
        i = buf.rfind(b"\r", 0, len(buf) - 1)
        return i + 1 if i >= 0 and buf[i + 1 : i + 2] != b"\n" else 0

    def _emit(self, block: bytes) -> Block:
        first = self.lines + 1
        if self._validate and not block.isascii():
            try:
                block.decode("utf-8")
            except UnicodeDecodeError as e:
                raise self._utf8_error(block, first, e.start) from None
        nul = block.find(b"\x00")
        if nul >= 0:
            line = first + _count_lines(block[:nul])
            hint = (
                "; if the file is UTF-16, load it with --encoding utf-16" if self._validate else ""
            )
            raise LoadError(f"{self._name}: binary data (NUL byte) at line {line}{hint}")
        if self._sink is not None:
            self._sink.write(block)
        if self.skeleton_delete is not None and b"\r" not in block and b'"' not in block:
            skeleton = block.translate(None, self.skeleton_delete)
            out = Block(block, first, skeleton.count(b"\n"), 0, 0, skeleton)
        else:
            out = block_of(block, first)
        self._count_ends(out)
        self.bytes += len(block)
        self.ends_with_newline = block.endswith((b"\n", b"\r"))
        return out

    def _count_ends(self, block: Block) -> None:
        self.lines += block.newlines + block.lone_crs
        if block.lone_crs:
            self.line_ends.add("\r")
        if block.crlfs:
            self.line_ends.add("\r\n")
        if block.newlines > block.crlfs:
            self.line_ends.add("\n")

    def _utf8_error(self, block: bytes, first: int, pos: int) -> LoadError:
        start, end = _line_bounds(block, pos)
        line = first + _count_lines(block[:start])
        msg = (
            f"{self._name} line {line}: not valid UTF-8 "
            f"(byte 0x{block[pos]:02X} at column {pos - start + 1})"
        )
        if _cp1252_plausible(block[start:end]):
            msg += "; if the file is Latin-1/Windows-1252, load it with --encoding cp1252"
        return LoadError(msg)
