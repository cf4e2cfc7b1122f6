"""The pass: one CSV/TSV file read once, from its raw bytes through its text to its records,
into a :class:`CsvScan`."""

from __future__ import annotations

import csv
import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from sql_tools import LoadError
from tasks.ingest._csv.raw import RawStream
from tasks.ingest._csv.records import Checker, ScanLimits
from tasks.ingest._csv.text import Block, Blocks, as_utf8, block_of, skip_bom
from tasks.ingest._sniff import (
    check_not_binary,
    detect_delimiter,
    detect_encoding,
    encoding_label,
)

DUCKDB_MIN_LINE = 2 * 1024 * 1024


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
        raw = RawStream(f, hasher, name, limits.max_bytes, compressed)
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
            chunks = as_utf8(chunks, codec, label, name)
        else:
            chunks = skip_bom(chunks, bom)
        sink = None
        if transcode or compressed:
            fd, tmp = tempfile.mkstemp(suffix=".csv", dir=tmpdir)
            scan.read_path = Path(tmp)
            sink = os.fdopen(fd, "wb")
        try:
            blocks = Blocks(chunks, name, limits.max_field_bytes, sink, validate=not transcode)
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


def _check_blocks(blocks: Blocks, name: str, limits: ScanLimits, tab: bool) -> Checker:
    """Run the record checks over every block; returns the checker with its counts."""
    checker = Checker(name, limits)
    it: Iterator[Block] = iter(blocks)
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
    if rest is not None and not checker.fast(block_of(*rest)):
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
