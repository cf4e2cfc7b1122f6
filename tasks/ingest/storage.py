"""Data uploaded to Supabase Storage: `supabase://bucket/prefix` -> verified local files.

Lists the files under the prefix (folders included, recursively), downloads each with supabase-py's
Storage client, checks every file against what the bucket lists (its size always, its SHA-256 when
the object's metadata carries one), retries transient failures (5xx, 429, connection errors) with
exponential backoff, and returns the local paths. Credentials come from `SUPABASE_URL` and
`SUPABASE_KEY`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from tasks.outdir import write_file

SCHEME = "supabase://"
PAGE = 1000
MAX_FILES = 10_000
MAX_DEPTH = 16
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504, 520, 522, 524})

T = TypeVar("T")


class StorageError(ValueError):
    """Reading from Supabase Storage failed; the message is one line."""


class StorageURLError(StorageError):
    """The location is not a `supabase://bucket/prefix` URL."""


class StorageConfigError(StorageError):
    """SUPABASE_URL or SUPABASE_KEY is missing."""


class BucketNotFound(StorageError):
    """The bucket does not exist (or the key may not see it)."""


class NoFilesFound(StorageError):
    """Nothing to download under the prefix."""


class DownloadMismatch(StorageError):
    """A downloaded file's size or SHA-256 differs from what the bucket lists."""


class StorageUnavailable(StorageError):
    """Storage kept failing with transient errors after every retry."""


@dataclass(frozen=True)
class StorageLocation:
    """A bucket and a path prefix inside it (no leading or trailing slash)."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}".rstrip("/")


@dataclass(frozen=True)
class RemoteFile:
    """A listed object: its key in the bucket and the metadata the listing gave."""

    key: str
    size: int | None
    sha256: str | None


def is_storage_url(location: str) -> bool:
    return str(location).startswith(SCHEME)


def storage_url(location: str | Path) -> str | None:
    """The `supabase://bucket/prefix` a data location names, or None for a local path. A path
    object turns `supabase://` into `supabase:/`; both are read as the URL."""
    text = str(location)
    if not text.startswith("supabase:"):
        return None
    return SCHEME + text[len("supabase:") :].lstrip("/")


def local_paths(
    locations: Sequence[str | Path], dest: str | Path, say: Callable[[str], None] | None = None
) -> list[str]:
    """Data locations as local paths: every `supabase://bucket/prefix` downloaded (and
    verified) into `dest`, local paths as given. `say` hears one line per download."""
    local: list[str] = []
    for location in locations:
        url = storage_url(location)
        if url is None:
            local.append(str(location))
            continue
        got = download_uploads(url, dest)
        if say is not None:
            say(f"downloaded {len(got)} file(s) from {url}")
        local += [str(g) for g in got]
    return local


def parse_storage_url(url: str) -> StorageLocation:
    """`supabase://bucket/some/prefix` -> StorageLocation('bucket', 'some/prefix')."""
    if not isinstance(url, str) or not url.startswith(SCHEME):
        raise StorageURLError(f"expected supabase://bucket/prefix, got {url!r}")
    rest = url[len(SCHEME) :]
    bucket, _, prefix = rest.partition("/")
    if not bucket or bucket.strip() != bucket or any(c in bucket for c in "?#\\"):
        raise StorageURLError(f"no valid bucket name in {url!r} (supabase://bucket/prefix)")
    parts = [p for p in prefix.split("/") if p]
    if any(p in (".", "..") for p in parts) or any(c in prefix for c in "?#\\"):
        raise StorageURLError(f"invalid prefix in {url!r}: no '.', '..', '?', '#' or '\\' parts")
    return StorageLocation(bucket, "/".join(parts))


def storage_client(url: str | None = None, key: str | None = None) -> Any:
    """supabase-py's Storage client from SUPABASE_URL and SUPABASE_KEY."""
    import httpx

    from supabase import ClientOptions, create_client

    url = url or os.environ.get("SUPABASE_URL", "").strip()
    key = key or os.environ.get("SUPABASE_KEY", "").strip()
    if not url or not key:
        raise StorageConfigError("reading supabase:// data needs SUPABASE_URL and SUPABASE_KEY")
    # our own httpx client: supabase's defaults emit deprecation warnings for timeout/verify
    http = httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0), follow_redirects=True)
    return create_client(url, key, options=ClientOptions(httpx_client=http)).storage


def _status(e: BaseException) -> int | None:
    try:
        return int(getattr(e, "status", None))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _is_transient(e: BaseException) -> bool:
    import httpx

    if isinstance(e, httpx.TransportError):
        return True
    from storage3.exceptions import StorageApiError

    return isinstance(e, StorageApiError) and _status(e) in TRANSIENT_STATUS


def _describe(e: BaseException) -> str:
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    status = getattr(e, "status", None)
    line = str(message).strip().splitlines()[0] if str(message).strip() else type(e).__name__
    return f"{line} (HTTP {status})" if status else line


def with_retries(
    action: Callable[[], T],
    what: str,
    *,
    retries: int = 4,
    backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `action`, retrying transient failures `retries` times with exponential backoff."""
    for attempt in range(retries + 1):
        try:
            return action()
        except Exception as e:
            if not _is_transient(e):
                raise
            if attempt == retries:
                raise StorageUnavailable(
                    f"{what}: still failing after {retries + 1} attempts: {_describe(e)}"
                ) from None
            sleep(backoff * (2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _metadata_int(meta: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = meta.get(name)
        if isinstance(value, int | float | str) and str(value).isdigit():
            return int(value)
    return None


def _sha256_of(entry: dict[str, Any]) -> str | None:
    for meta in (entry.get("metadata"), entry.get("user_metadata")):
        if isinstance(meta, dict):
            value = meta.get("sha256") or meta.get("SHA256")
            if isinstance(value, str) and len(value) == 64:
                return value.lower()
    return None


def _list_files(bucket: Any, loc: StorageLocation, **retry: Any) -> list[RemoteFile]:
    from storage3.exceptions import StorageApiError

    files: list[RemoteFile] = []

    def listing(folder: str) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        while True:
            options = {"limit": PAGE, "offset": len(entries)}
            try:
                page = with_retries(
                    lambda o=options: bucket.list(folder, o), f"listing {str(loc)!r}", **retry
                )
            except StorageApiError as e:
                if _status(e) == 404 or "bucket" in str(getattr(e, "message", "")).lower():
                    raise BucketNotFound(
                        f"bucket {loc.bucket!r} not found (or not visible with this key)"
                    ) from None
                raise StorageError(f"listing {str(loc)!r} failed: {_describe(e)}") from None
            entries.extend(page)
            if len(page) < PAGE:
                return entries

    def walk(folder: str, depth: int) -> None:
        for entry in listing(folder):
            name = entry.get("name")
            if not isinstance(name, str) or not name or name in (".", ".."):
                continue
            key = f"{folder}/{name}" if folder else name
            if entry.get("id") is None and not entry.get("metadata"):  # a folder
                if depth < MAX_DEPTH:
                    walk(key, depth + 1)
                continue
            if name == ".emptyFolderPlaceholder":
                continue
            meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
            size = _metadata_int(meta, "size", "contentLength")
            files.append(RemoteFile(key, size, _sha256_of(entry)))
            if len(files) > MAX_FILES:
                raise StorageError(f"more than {MAX_FILES} files under {str(loc)!r}")

    walk(loc.prefix, 0)
    if not files and loc.prefix:  # the prefix may name one file
        parent = str(PurePosixPath(loc.prefix).parent)
        parent = "" if parent == "." else parent
        base = PurePosixPath(loc.prefix).name
        for entry in listing(parent):
            if entry.get("name") == base and entry.get("id") is not None:
                meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
                files.append(
                    RemoteFile(
                        loc.prefix, _metadata_int(meta, "size", "contentLength"), _sha256_of(entry)
                    )
                )
    return sorted(files, key=lambda f: f.key)


def _local_name(remote: RemoteFile, loc: StorageLocation) -> PurePosixPath:
    key = PurePosixPath(remote.key)
    if loc.prefix and remote.key != loc.prefix:
        key = key.relative_to(loc.prefix)
    elif remote.key == loc.prefix:
        key = PurePosixPath(key.name)
    if key.is_absolute() or any(p in ("..", ".") for p in key.parts):
        raise StorageError(f"refusing object key {remote.key!r}")
    return key


def _verify(remote: RemoteFile, data: bytes) -> None:
    if remote.size is None:
        raise DownloadMismatch(f"{remote.key!r}: the bucket lists no size to check against")
    if len(data) != remote.size:
        raise DownloadMismatch(
            f"{remote.key!r}: downloaded {len(data)} bytes, the bucket lists {remote.size}"
        )
    if remote.sha256 is not None:
        digest = hashlib.sha256(data).hexdigest()
        if digest != remote.sha256:
            raise DownloadMismatch(
                f"{remote.key!r}: SHA-256 {digest[:12]}… differs from the listed "
                f"{remote.sha256[:12]}…"
            )


def download_uploads(
    url: str,
    dest: str | Path | None = None,
    *,
    client: Any = None,
    retries: int = 4,
    backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Path]:
    """Download every file under `supabase://bucket/prefix` into `dest`; return the local paths.

    `dest` defaults to a new temporary folder. Files keep their paths below the prefix. A file is
    written only after its size (and SHA-256, when listed) checked out.
    """
    loc = parse_storage_url(url)
    storage = client if client is not None else storage_client()
    bucket = storage.from_(loc.bucket)
    retry = {"retries": retries, "backoff": backoff, "sleep": sleep}
    remote_files = _list_files(bucket, loc, **retry)
    if not remote_files:
        raise NoFilesFound(f"no files under {url!r}")
    root = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="drilldown-upload-"))
    root.mkdir(parents=True, exist_ok=True)
    from storage3.exceptions import StorageApiError

    paths = []
    for remote in remote_files:
        name = _local_name(remote, loc)
        try:
            data = with_retries(
                lambda r=remote: bucket.download(r.key), f"downloading {remote.key!r}", **retry
            )
        except StorageApiError as e:
            raise StorageError(f"downloading {remote.key!r} failed: {_describe(e)}") from None
        _verify(remote, data)
        paths.append(write_file(root, name, data))  # no link followed, whole or not at all
    return paths
