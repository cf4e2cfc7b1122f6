"""The records: each checked against the header's field count, and counted.

:class:`Checker` checks a block with bytes operations when it can (the fast path: a
delimiter-and-newline skeleton, or one regular expression when the block holds quotes) and with
:mod:`csv` otherwise (the path that names the bad line); both count the same physical lines.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Protocol

from sql_tools import LoadError
from tasks.ingest._csv.text import Block


class ScanLimits(Protocol):
    """The subset of ``LoadOptions`` the scan needs."""

    max_bytes: int
    max_rows: int
    max_columns: int
    max_field_bytes: int
    encoding: str | None
    delimiter: str | None


class _LineSource:
    """Lines for :func:`csv.reader`: the current block, then further blocks on demand."""

    def __init__(self, block: bytes, more: Iterator[Block], max_line: int) -> None:
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


class Checker:
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

    def fast(self, blk: Block) -> bool:
        """Check a block with bytes operations only; True when every line is a good record.

        Blocks without quotes: delete every byte but the delimiter and newline (the block's
        skeleton, when :class:`Blocks` made one), and compare with
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
        more: Iterator[Block],
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
