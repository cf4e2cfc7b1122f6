"""The byte-level validation pass over one CSV/TSV file (plain or gzip-compressed).

One streaming pass, in chunks, that

* hashes the file's bytes as stored on disk (SHA-256);
* decompresses ``.gz`` with a running byte counter (``max_bytes`` is a hard stop);
* refuses binary files, decodes/validates the text (UTF-8 by default, UTF-16 by BOM or NUL
  pattern, or the encoding the caller asked for) and names the line of the first bad byte;
* detects the delimiter, reads the header and checks every record: exactly the header's field
  count, no blank lines, no unterminated quote, no field or line over ``max_field_bytes``,
  at most ``max_rows`` records;
* writes a UTF-8 copy for DuckDB when the original cannot be read as it is (transcoded or
  compressed input).

Blocks are checked with bytes operations first (a delimiter-and-newline skeleton of the block,
or one regular expression when it holds quotes); a block these do not accept goes through
:mod:`csv`, which names the bad line. Both report the same physical line numbers. The hash of a
large plain file is computed on a second thread (``hashlib`` releases the GIL) while the main
thread checks the records.

Why this pass stays although DuckDB's reader has a strict mode (measured in
``benchmarks/csv_reader.py``, results in ``benchmarks/results/csv_reader.md``, DuckDB 2.0): with
the dialect pinned, DuckDB names the same line for a wrong field count, a bad quote, invalid UTF-8
and an over-long line (18 of 45 files to refuse), but it loads 19 of them: it skips blank lines,
loads empty, header-only, XLSX, Parquet and SQLite files as 0 rows, keeps NUL bytes, has no byte,
row or column cap (a gzip bomb is read whole), numbers lines by record after a quoted line break,
gives no line for a lone CR, refuses mixed line endings and does not detect UTF-16. The checks it
does match share this pass with the ones it lacks, so they stay too; the pass costs about a tenth
of a load (0.33 s of 2.5 s at 5M rows).

One module of this size for the same reason: one streaming pass, its block fast paths and its
line accounting are one piece.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import os
import re
import tempfile
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import BinaryIO, NamedTuple, Protocol

from sql_tools import LoadError
from tasks.ingest._sniff import (
    canonical_codec,
    check_not_binary,
    detect_delimiter,
    detect_encoding,
    encoding_label,
)

CHUNK = 1 << 20
DUCKDB_MIN_LINE = 2 * 1024 * 1024
HASH_THREAD_MIN_BYTES = 8 * CHUNK
"""Plain files larger than this are hashed on a second thread."""
_HASH_QUEUE = 8
"""Chunks handed to the hashing thread and not yet hashed, at most (bounds the memory held)."""
_CP1252_PLAUSIBLE = set(
    "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝßàáâãäåæçèéêëìíîïñòóôõöøùúûüýœŒšŠžŽ€£¥°’‘“”–—«»§µ²³·¿¡©®™…"
)


class ScanLimits(Protocol):
    """The subset of ``LoadOptions`` the scan needs."""

    max_bytes: int
    max_rows: int
    max_columns: int
    max_field_bytes: int
    encoding: str | None
    delimiter: str | None


@dataclass
class CsvScan:
    """What the validation pass learned about one CSV file."""

    source: Path
    read_path: Path | None = None  # UTF-8 copy for DuckDB; None = read ``source`` itself
    compressed: bool = False
    encoding: str = "utf-8"
    delimiter: str = ","
    labels: list[str] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    sha256: str = ""
    max_line_bytes: int = DUCKDB_MIN_LINE
    mixed_line_ends: bool = False
    first_data_line: int = 2
    """Physical line where the first data record starts."""
    multiline_rows: int = 0
    """Records that span several lines (a line break inside a quoted field)."""
    warnings: list[str] = field(default_factory=list)

    def line_of_row(self, path: Path, row: int) -> int:
        """Physical line where data record ``row`` (1-based) of ``path``, the UTF-8 text read
        by DuckDB, starts."""
        if not self.multiline_rows:
            return self.first_data_line + row - 1
        old_limit = csv.field_size_limit(1 << 30)
        try:
            with open(path, encoding="utf-8-sig", newline="") as f:
                reader = csv.reader(f, delimiter=self.delimiter, quotechar='"', strict=True)
                next(reader)  # the header
                for _ in range(row - 1):
                    next(reader)
                return reader.line_num + 1
        finally:
            csv.field_size_limit(old_limit)


# --------------------------------------------------------------------------------------------
# raw bytes: hashing, size cap, decompression


class _HashingReader:
    """File wrapper that feeds every byte read into a hash.

    With ``threaded``, the hash is updated on a single worker thread, in read order, while the
    caller goes on with the bytes; :meth:`wait` returns once every byte read is hashed.
    """

    def __init__(self, raw: BinaryIO, hasher: hashlib._Hash, threaded: bool = False) -> None:
        self._raw = raw
        self._hasher = hasher
        self._pool = ThreadPoolExecutor(1, "drilldown-sha256") if threaded else None
        self._pending: deque[Future[None]] = deque()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        if self._pool is None:
            self._hasher.update(data)
            return data
        self._pending.append(self._pool.submit(self._hasher.update, data))
        while len(self._pending) > _HASH_QUEUE:
            self._pending.popleft().result()
        return data

    def wait(self) -> None:
        """Block until every byte read so far has been hashed; stop the worker thread."""
        while self._pending:
            self._pending.popleft().result()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def drain(self) -> None:
        """Hash the rest of the file (bytes the decompressor did not need)."""
        while self.read(CHUNK):
            pass


class _RawStream:
    """Chunks of the file's (decompressed) bytes, hashing the stored bytes on the way.

    ``total`` counts the bytes produced; ``max_bytes`` is enforced on the fly, so a
    decompression bomb is stopped after at most ``max_bytes + CHUNK`` bytes.
    """

    def __init__(
        self, f: BinaryIO, hasher: hashlib._Hash, name: str, max_bytes: int, compressed: bool
    ) -> None:
        self._f = f
        self._hasher = hasher
        self._name = name
        self._max = max_bytes
        self._compressed = compressed
        self._reader: _HashingReader | None = None
        self.total = 0

    def __iter__(self) -> Iterator[bytes]:
        return self._gzip() if self._compressed else self._plain()

    def wait(self) -> None:
        """Block until every byte read so far is in the hash (see :class:`_HashingReader`)."""
        if self._reader is not None:
            self._reader.wait()

    def _plain(self) -> Iterator[bytes]:
        size = os.fstat(self._f.fileno()).st_size
        if size > self._max:
            raise LoadError(
                f"{self._name}: file is {size} bytes, more than the limit max_bytes={self._max}"
            )
        reader = _HashingReader(self._f, self._hasher, threaded=size > HASH_THREAD_MIN_BYTES)
        self._reader = reader
        try:
            while chunk := reader.read(CHUNK):
                self._count(chunk)
                yield chunk
        finally:
            reader.wait()

    def _gzip(self) -> Iterator[bytes]:
        magic = self._f.read(2)
        self._f.seek(0)
        if magic != b"\x1f\x8b":
            check_not_binary(magic + self._f.read(64), self._name)
            raise LoadError(
                f"{self._name}: not gzip-compressed despite its name", code="unsupported_file"
            )
        reader = _HashingReader(self._f, self._hasher)
        gz = gzip.GzipFile(fileobj=reader, mode="rb")
        while True:
            try:
                chunk = gz.read(CHUNK)
            except (OSError, EOFError, zlib.error) as e:
                raise LoadError(f"{self._name}: not a valid gzip file ({e})") from None
            if not chunk:
                break
            self._count(chunk)
            yield chunk
        reader.drain()

    def _count(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total <= self._max:
            return
        if self._compressed:
            raise LoadError(
                f"{self._name}: decompresses to more than {self._max} bytes "
                f"(limit max_bytes={self._max}); refusing to read further"
            )
        raise LoadError(f"{self._name}: file is larger than the limit max_bytes={self._max}")


# --------------------------------------------------------------------------------------------
# text: BOM, transcoding, UTF-8 validation, line-aligned blocks


def _count_lines(data: bytes) -> int:
    """Line terminators in ``data`` (``\\n``, ``\\r\\n`` and a lone ``\\r`` each count once)."""
    n = data.count(b"\n")
    if b"\r" in data:
        n += data.count(b"\r") - data.count(b"\r\n")
    return n


def _skip_bom(chunks: Iterator[bytes], bom: int) -> Iterator[bytes]:
    """``chunks`` without the first ``bom`` bytes."""
    first = True
    for chunk in chunks:
        if first:
            chunk, first = chunk[bom:], False
        if chunk:
            yield chunk


def _transcode(chunks: Iterator[bytes], codec: str, label: str, name: str) -> Iterator[bytes]:
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


class _Block(NamedTuple):
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
    ``\\r`` or quotes once the delimiter is known (see ``_Blocks.skeleton_delete``)."""


def _block(data: bytes, first: int) -> _Block:
    """A :class:`_Block` of ``data`` (no skeleton)."""
    if b"\r" not in data:
        return _Block(data, first, data.count(b"\n"), 0, 0)
    crlfs = data.count(b"\r\n")
    return _Block(data, first, data.count(b"\n"), crlfs, data.count(b"\r") - crlfs)


class _Blocks:
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

    def __iter__(self) -> Iterator[_Block]:
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

    def _emit(self, block: bytes) -> _Block:
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
            out = _Block(block, first, skeleton.count(b"\n"), 0, 0, skeleton)
        else:
            out = _block(block, first)
        self._count_ends(out)
        self.bytes += len(block)
        self.ends_with_newline = block.endswith((b"\n", b"\r"))
        return out

    def _count_ends(self, block: _Block) -> None:
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


# --------------------------------------------------------------------------------------------
# records


class _LineSource:
    """Lines for :func:`csv.reader`: the current block, then further blocks on demand."""

    def __init__(self, block: bytes, more: Iterator[_Block], max_line: int) -> None:
        self._more = more
        self._max_line = max_line
        self._lines: list[str] = []
        self._i = 0
        self.consumed = 0
        self.too_long: int | None = None
        self.on_first_block = True
        self._load(block)

    def _load(self, block: bytes) -> None:
        self._lines = io.StringIO(block.decode("utf-8"), newline="").readlines()
        self._i = 0

    def __iter__(self) -> _LineSource:
        return self

    def __next__(self) -> str:
        while self._i >= len(self._lines):
            nxt = next(self._more, None)
            if nxt is None:
                raise StopIteration
            self.on_first_block = False
            self._load(nxt.data)
        line = self._lines[self._i]
        self._i += 1
        self.consumed += 1
        if len(line) > self._max_line + 2:
            self.too_long = self.consumed
        return line

    def block_done(self) -> bool:
        """True when every line of the current block has been handed out."""
        return self._i >= len(self._lines)

    def offset(self) -> int:
        """Byte offset, in the current block, of the next line to hand out."""
        return len("".join(self._lines[: self._i]).encode("utf-8"))


class _Checker:
    """Checks records against the header; counts rows."""

    def __init__(self, name: str, limits: ScanLimits) -> None:
        self.name = name
        self.limits = limits
        self.delimiter = ","
        self.header: list[str] | None = None
        self.ncols = 0
        self.rows = 0
        self.blank_at: int | None = None
        self.blank_count = 0
        self.max_record = 0
        self.multiline = 0  # records holding a line break inside a quoted field
        self.header_end = 1  # physical line where the header record ends

    # -- fast path ------------------------------------------------------------------------

    def _prepare_fast(self) -> None:
        """Build the per-file helpers of the fast path once the header is known."""
        d = self.delimiter.encode()
        k = self.ncols - 1
        # every byte but the delimiter and \n: deleting them leaves a block's skeleton
        self.skeleton_delete = bytes(b for b in range(256) if b not in (d[0], 10))
        self._line_shape = d * k + b"\n"
        dq = re.escape(d)
        fld = rb'(?:"[^"\n]*+(?:""[^"\n]*+)*+"|[^"' + dq + rb"\r\n]*+)"
        rec = fld + rb"(?:" + dq + fld + rb"){%d}\r?\n" % k
        self._records_re = re.compile(rb"(?:" + rec + rb")*+")

    def fast(self, blk: _Block) -> bool:
        """Check a block with bytes operations only; True when every line is a good record.

        Blocks without quotes: delete every byte but the delimiter and newline (the block's
        skeleton, when :class:`_Blocks` made one), and compare with
        ``delimiter * (n - 1) + newline`` repeated. Blocks with quotes: one regular expression
        that accepts only records of exactly the header's field count whose quoted fields hold
        no newline. Returns False (and counts nothing) when the block needs the :mod:`csv`
        path, which then locates the problem line exactly: blank lines, lone CRs, embedded
        newlines, a wrong field count or an over-long line.
        """
        if self.header is None or self.ncols < 2 or self.blank_at is not None:
            return False
        if blk.lone_crs:
            return False
        end = b"" if blk.data.endswith(b"\n") else b"\n"  # the last block may lack a line end
        whole, n = blk.data + end, blk.newlines + len(end)
        if blk.skeleton is not None:
            if blk.skeleton + end != self._line_shape * n:
                return False
        elif b'"' in whole:
            if self._records_re.fullmatch(whole) is None:
                return False
        elif whole.translate(None, self.skeleton_delete) != self._line_shape * n:
            return False
        if self._has_long_line(whole):
            return False
        self._add_rows(n, blk.first)
        return True

    def _has_long_line(self, block: bytes) -> bool:
        """True when a line of ``block`` is longer than ``max_field_bytes`` (+ line end).

        Blocks are a carried-over partial line plus one read chunk, so usually only the first
        line can be too long: the lines are split only when the rest is longer than the limit.
        """
        limit = self.limits.max_field_bytes + 2
        if len(block) <= limit:
            return False
        first_end = block.find(b"\n") + 1
        if first_end > limit:
            return True
        if len(block) - first_end <= limit:
            return False
        return max(map(len, block.split(b"\n"))) > limit

    # -- csv path -------------------------------------------------------------------------

    def slow(
        self,
        block: bytes,
        first: int,
        more: Iterator[_Block],
        header_only: bool = False,
    ) -> tuple[bytes, int] | None:
        """Check records with :mod:`csv` from ``block`` on, until a record ends at a block end.

        With ``header_only``, stop after the header record when it ends inside ``block`` and
        return the rest of the block and its first line number (for the fast path).
        """
        src = _LineSource(block, more, self.limits.max_field_bytes)
        reader = csv.reader(
            src, delimiter=self.delimiter, quotechar='"', doublequote=True, strict=True
        )
        while not src.block_done():
            start = first + src.consumed
            try:
                rec = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                raise self._csv_error(str(e), start, first + src.consumed - 1) from None
            end = first + src.consumed - 1
            if src.too_long is not None:
                raise LoadError(
                    f"{self.name} line {first + src.too_long - 1}: line is longer than "
                    f"{self.limits.max_field_bytes} bytes (limit max_field_bytes)"
                )
            had_header = self.header is not None
            self.record(rec, start, end)
            if header_only and not had_header and self.header is not None:
                if src.on_first_block and not src.block_done():
                    return block[src.offset() :], end + 1
        return None

    def _csv_error(self, err: str, start: int, end: int) -> LoadError:
        limit = self.limits.max_field_bytes
        if "field larger than field limit" in err:
            if end > start:
                return LoadError(
                    f"{self.name} line {start}: a quoted field starting on this line runs past "
                    f"{limit} characters (limit max_field_bytes); is a closing quote missing?"
                )
            return LoadError(
                f"{self.name} line {start}: a field is longer than {limit} characters "
                "(limit max_field_bytes)"
            )
        if "unexpected end of data" in err:
            return LoadError(
                f"{self.name} line {start}: unterminated quote (a quoted field that starts in "
                "the record on this line is never closed)"
            )
        if "expected after" in err:
            return LoadError(
                f"{self.name} line {end}: malformed quoting (text after a closing quote; a "
                'quote inside a quoted field must be doubled as "")'
            )
        return LoadError(f"{self.name} line {end}: cannot parse the line ({err})")

    def record(self, rec: list[str], start: int, end: int) -> None:
        """Check one parsed record that spans physical lines ``start``..``end``."""
        if self._is_blank(rec):
            if self.blank_at is None:
                self.blank_at = start
            self.blank_count += 1
            return
        if self.blank_at is not None:
            where = "before the header" if self.header is None else "between data rows"
            raise LoadError(
                f"{self.name} line {self.blank_at}: blank line {where}; remove blank lines "
                "and load again (they would be lost or become empty rows)"
            )
        if self.header is None:
            self._set_header(rec)
            self.header_end = end
            return
        if len(rec) != self.ncols:
            where = f"line {start}" if start == end else f"lines {start}-{end}"
            spaces = " (the line holds only spaces)" if not "".join(rec).strip() else ""
            raise LoadError(
                f"{self.name} {where}: expected {self.ncols} fields (as in the header), found "
                f"{len(rec)}{spaces} (delimiter {self.delimiter!r})"
            )
        self._add_rows(1, start)
        if end > start:
            self.multiline += 1
            self.max_record = max(self.max_record, sum(map(len, rec)) + len(rec) + end - start)

    def _is_blank(self, rec: list[str]) -> bool:
        """An empty line; or only spaces, before the header or in a one-column file."""
        if not rec:
            return True
        return len(rec) == 1 and self.ncols <= 1 and not rec[0].strip()

    def _set_header(self, rec: list[str]) -> None:
        if len(rec) > self.limits.max_columns:
            raise LoadError(
                f"{self.name}: {len(rec)} columns, more than the limit "
                f"max_columns={self.limits.max_columns}",
                code="unsupported_file",
            )
        self.header = rec
        self.ncols = len(rec)
        self._prepare_fast()

    def _add_rows(self, n: int, first: int) -> None:
        self.rows += n
        if self.rows > self.limits.max_rows:
            line = first + n - (self.rows - self.limits.max_rows)
            raise LoadError(
                f"{self.name} line {line}: more than {self.limits.max_rows} data rows "
                f"(limit max_rows={self.limits.max_rows})"
            )

    def finish(self, lines: int) -> list[str]:
        """End-of-file checks; returns warnings.

        Args:
            lines: Physical lines in the file (for the line/row reconciliation note).
        """
        if self.header is None or self.rows == 0:
            what = "the file is empty" if self.header is None else "only a header"
            if self.header is None and self.blank_count:
                what = "only blank lines"
            raise LoadError(f"{self.name}: no data rows ({what})")
        warnings = []
        if self.multiline:
            warnings.append(
                f"{self.multiline} row(s) hold line breaks inside quoted values: {self.rows} "
                f"data rows from {lines} lines"
            )
        if self.blank_at is None:
            return warnings
        if self.ncols == 1:  # DuckDB would read them as NULL rows
            raise LoadError(
                f"{self.name} line {self.blank_at}: blank line at the end of a one-column file "
                "would become an empty row; remove it"
            )
        return [*warnings, f"{self.blank_count} blank line(s) at the end of the file ignored"]


# --------------------------------------------------------------------------------------------
# the pass


def _first_nonempty(chunks: Iterator[bytes]) -> bytes:
    """The first non-empty chunk, or b"" at end of input."""
    return next((c for c in chunks if c), b"")


def scan_csv(
    path: Path,
    name: str,
    limits: ScanLimits,
    tmpdir: Path,
    *,
    compressed: bool = False,
    tab: bool = False,
) -> CsvScan:
    """Validate one CSV/TSV file completely, in one streaming pass.

    Args:
        path: The file.
        name: File name used at the start of every message.
        limits: Caps and forced settings (``LoadOptions``).
        tmpdir: Private directory for a UTF-8 copy when one is needed.
        compressed: The file is gzip-compressed.
        tab: The file is a ``.tsv`` (tab-delimited unless ``limits.delimiter`` says otherwise).

    Returns:
        The scan: labels, delimiter, row count, hash, the path DuckDB should read, warnings.

    Raises:
        LoadError: On the first problem, naming the file and, where known, the line.
    """
    old_limit = csv.field_size_limit(max(limits.max_field_bytes, 1))
    try:
        return _scan(path, name, limits, tmpdir, compressed, tab)
    finally:
        csv.field_size_limit(old_limit)


def _scan(
    path: Path, name: str, limits: ScanLimits, tmpdir: Path, compressed: bool, tab: bool
) -> CsvScan:
    scan = CsvScan(source=path, compressed=compressed)
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        raw = _RawStream(f, hasher, name, limits.max_bytes, compressed)
        raw_iter = iter(raw)
        head = _first_nonempty(raw_iter)
        if not head:
            raise LoadError(f"{name}: no data rows (the file is empty)")
        check_not_binary(head, name)
        codec, bom, warning = detect_encoding(head, limits.encoding)
        if warning:
            scan.warnings.append(warning)
        scan.encoding = encoding_label(codec, head)
        chunks: Iterator[bytes] = chain([head], raw_iter)
        transcode = codec != "utf-8"
        if transcode:
            label = scan.encoding.upper() if limits.encoding is None else limits.encoding
            chunks = _transcode(chunks, codec, label, name)
        else:
            chunks = _skip_bom(chunks, bom)
        sink = None
        if transcode or compressed:
            fd, tmp = tempfile.mkstemp(suffix=".csv", dir=tmpdir)
            scan.read_path = Path(tmp)
            sink = os.fdopen(fd, "wb")
        try:
            blocks = _Blocks(chunks, name, limits.max_field_bytes, sink, validate=not transcode)
            checker = _check_blocks(blocks, name, limits, tab)
        finally:
            if sink is not None:
                sink.close()
    raw.wait()
    scan.warnings.extend(checker.finish(blocks.lines + (0 if blocks.ends_with_newline else 1)))
    scan.delimiter = checker.delimiter
    scan.labels = checker.header or []
    scan.rows = checker.rows
    scan.bytes = raw.total
    scan.sha256 = hasher.hexdigest()
    scan.mixed_line_ends = len(blocks.line_ends) > 1
    scan.first_data_line = checker.header_end + 1
    scan.multiline_rows = checker.multiline
    scan.max_line_bytes = max(
        DUCKDB_MIN_LINE, limits.max_field_bytes + 1024, 2 * checker.max_record + 1024
    )
    return scan


def _check_blocks(blocks: _Blocks, name: str, limits: ScanLimits, tab: bool) -> _Checker:
    """Run the record checks over every block; returns the checker with its counts."""
    checker = _Checker(name, limits)
    it: Iterator[_Block] = iter(blocks)
    head = next(it, None)
    if head is None:
        return checker
    second = next(it, None)
    if second is not None:
        it = chain([second], it)
    checker.delimiter = _choose_delimiter(head.data, limits, tab, name, complete=second is None)
    rest = checker.slow(head.data, head.first, it, header_only=True)
    if checker.header is not None and checker.ncols >= 2:
        blocks.skeleton_delete = checker.skeleton_delete
    if rest is not None and not checker.fast(_block(*rest)):
        checker.slow(*rest, it)
    for blk in it:
        if not checker.fast(blk):
            checker.slow(blk.data, blk.first, it)
    return checker


def _choose_delimiter(
    block: bytes, limits: ScanLimits, tab: bool, name: str, *, complete: bool
) -> str:
    """The delimiter: forced by the caller, tab for ``.tsv``, else detected from the head."""
    if limits.delimiter is not None:
        return limits.delimiter
    if tab:
        return "\t"
    text = block.decode("utf-8")
    if not text.strip():
        return ","  # only blank lines so far; the record checks will say so
    return detect_delimiter(text, complete, name)


__all__ = ["CsvScan", "ScanLimits", "canonical_codec", "scan_csv"]
