"""What went wrong with the memory store's file, in one line naming the file and the fix.

Every open, read and write of the DuckDB store passes its failures through
:func:`store_file_error`: a damaged or foreign file becomes :class:`StoreDamaged` (the user moves
it aside), a file the system will not let be read or written (read-only, no permission, a full
disk, a file-size limit) :class:`StoreInaccessible`.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import duckdb

from tasks.store.errors import StoreDamaged, StoreError, StoreInaccessible

ELSEWHERE = "set DRILLDOWN_STORE_PATH to another file"

_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_QUOTED_FILE = re.compile(r'file "([^"]+)"', re.IGNORECASE)
_DENIED = (errno.EROFS, errno.EACCES, errno.EPERM)


def store_file_error(exc: BaseException, path: Path, *, writing: bool = True) -> StoreError:
    """The one-line store error for ``exc``, raised while reading (or ``writing``) the store at
    ``path``; ``exc`` itself when it is already a store error."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, OSError):
        return _refused(exc.errno, exc.strerror or str(exc), exc.filename, path, writing)
    text = " ".join(str(exc).split()) or type(exc).__name__
    for code in (*_FULL, *_DENIED):  # DuckDB quotes the system's words for them
        if os.strerror(code) in text:
            named = _QUOTED_FILE.search(text)
            return _refused(code, os.strerror(code), named and named[1], path, writing)
    low = text.lower()
    if "wal" in low and ("replaying" in low or "corrupt wal" in low):
        wal = f"{path}.wal"
        return StoreDamaged(
            f"the memory store's write-ahead log {wal!r} is damaged: move it and "
            f"{str(path)!r} aside or {ELSEWHERE}"
        )
    if "not a valid duckdb database file" in low:
        why = "not a DuckDB database"
    elif "could not read enough bytes" in low:
        why = "the file is cut short"
    elif "corrupt" in low or "checksum" in low:
        why = "the file is damaged"
    else:
        why = text.removeprefix("IO Error: ")[:200]
    return StoreDamaged(
        f"the memory store {str(path)!r} cannot be read ({why}): move it aside or {ELSEWHERE}"
    )


def _refused(
    code: int | None, why: str, filename: object, path: Path, writing: bool
) -> StoreInaccessible:
    if filename not in (None, "", str(path)):
        why = f"{why}: {str(filename)!r}"
    done = "written" if writing else "read"
    if code in _FULL:
        fix = f"free space on its disk or raise the file-size limit, or {ELSEWHERE}"
    elif code in _DENIED:
        fix = f"make it {'writable' if writing else 'readable'}, or {ELSEWHERE}"
    else:
        fix = ELSEWHERE
    return StoreInaccessible(f"the memory store {str(path)!r} cannot be {done} ({why}): {fix}")


def is_file_failure(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the store's file rather than from a statement: the system's
    errors, DuckDB's I/O, fatal, internal and serialization errors, a database invalidated by
    one of them, and a file DuckDB finds corrupt."""
    if isinstance(
        exc,
        OSError
        | duckdb.IOException
        | duckdb.FatalException
        | duckdb.InternalException
        | duckdb.SerializationException,
    ):
        return True
    text = str(exc).lower()
    return (
        type(exc) is duckdb.Error
        or any(w in text for w in ("corrupt", "invalidated", "could not write", "could not read"))
        or any(os.strerror(code).lower() in text for code in (*_FULL, *_DENIED))
    )
