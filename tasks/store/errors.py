"""The store's errors (every backend and the embedder raise these)."""

from __future__ import annotations


class StoreError(Exception):
    """A store operation failed; the message is one line."""


class StoreConfigError(StoreError, ValueError):
    """The store settings are invalid (bad DRILLDOWN_STORE, missing SUPABASE_DB_URL, ...)."""


class StoreUnavailable(StoreError):
    """The database cannot be reached (connection refused, timed out, dropped)."""


class StoreBusy(StoreUnavailable):
    """Another process held the store's file for longer than this one would wait."""


class RecordRejected(StoreError, ValueError):
    """The database refused a value of the record; nothing of it was stored."""


class StoreFileError(StoreError):
    """The store's file cannot be used; the message names the file and the fix."""


class StoreDamaged(StoreFileError):
    """The file is not a store that can be read (cut short, overwritten, not a DuckDB database,
    a damaged write-ahead log): the user moves it aside."""


class StoreInaccessible(StoreFileError):
    """The system refuses the store's file: a read-only file, folder or mount, no permission,
    a full disk, a file-size limit."""
