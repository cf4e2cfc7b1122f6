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

The package: ``raw.py`` (hashing, the size cap, decompression), ``text.py`` (BOM, transcoding,
UTF-8 validation, line-aligned blocks), ``records.py`` (the record checks: the fast paths and the
:mod:`csv` path, and their line accounting) and ``scan.py`` (the pass that runs them in turn,
:func:`scan_csv`).
"""

from tasks.ingest._csv.raw import CHUNK, HASH_THREAD_MIN_BYTES
from tasks.ingest._csv.records import ScanLimits
from tasks.ingest._csv.scan import DUCKDB_MIN_LINE, CsvScan, scan_csv
from tasks.ingest._sniff import canonical_codec

__all__ = [
    "CHUNK",
    "DUCKDB_MIN_LINE",
    "HASH_THREAD_MIN_BYTES",
    "CsvScan",
    "ScanLimits",
    "canonical_codec",
    "scan_csv",
]
