"""The file's raw bytes: hashed as stored on disk, capped, decompressed.

:class:`RawStream` yields the (decompressed) bytes in chunks of :data:`CHUNK`, feeding the stored
bytes into the SHA-256 on the way (on a second thread for a large plain file) and stopping at
``max_bytes``, so a decompression bomb is never read whole.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from sql_tools import LoadError
from tasks.ingest._sniff import check_not_binary

CHUNK = 1 << 20
HASH_THREAD_MIN_BYTES = 8 * CHUNK
"""Plain files larger than this are hashed on a second thread."""
_HASH_QUEUE = 8
"""Chunks handed to the hashing thread and not yet hashed, at most (bounds the memory held)."""


class HashingReader:
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


class RawStream:
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
        self._reader: HashingReader | None = None
        self.total = 0

    def __iter__(self) -> Iterator[bytes]:
        return self._gzip() if self._compressed else self._plain()

    def wait(self) -> None:
        """Block until every byte read so far is in the hash (see :class:`HashingReader`)."""
        if self._reader is not None:
            self._reader.wait()

    def _plain(self) -> Iterator[bytes]:
        size = os.fstat(self._f.fileno()).st_size
        if size > self._max:
            raise LoadError(
                f"{self._name}: file is {size} bytes, more than the limit max_bytes={self._max}"
            )
        reader = HashingReader(self._f, self._hasher, threaded=size > HASH_THREAD_MIN_BYTES)
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
        reader = HashingReader(self._f, self._hasher)
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
