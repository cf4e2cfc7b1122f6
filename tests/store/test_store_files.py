"""A memory-store file the disk left damaged, or the system will not let be written, fails every
open, read and write of the store with one line naming the file and the fix; a store that is only
read is opened read-only and never made. The command line's side is in
``test_store_files_cli.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.store import DuckDBStore, StoreDamaged, StoreInaccessible
from tasks.store.history import similar_investigations
from tests.support.records import android_dau_drop, de_signup_drop, ios_revenue_drop
from tests.support.store_files import DAMAGE


@pytest.fixture
def remembered(tmp_path: Path, embedder) -> Path:
    """A store holding three investigations."""
    path = tmp_path / "memory" / "store.duckdb"
    with DuckDBStore(path, embedder=embedder) as store:
        for rec in (ios_revenue_drop(), de_signup_drop(), android_dau_drop()):
            store.save_investigation(rec)
    return path


def one_line(exc: Exception, path: Path) -> str:
    message = str(exc)
    assert "\n" not in message and str(path) in message, message
    assert "DRILLDOWN_STORE_PATH" in message, message
    return message


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("read_only", [False, True], ids=["to write", "to read"])
def test_a_damaged_store_is_one_line_naming_it(remembered, embedder, damage, read_only):
    DAMAGE[damage](remembered)
    with pytest.raises(StoreDamaged) as caught:
        with DuckDBStore(remembered, embedder=embedder, read_only=read_only) as store:
            similar_investigations(store, "revenue fell on iOS", k=5)
            store.save_investigation(ios_revenue_drop(run_id="inv-another"))
    message = one_line(caught.value, remembered)
    assert "move it" in message and "aside" in message, message


def test_a_store_only_read_is_never_made(tmp_path, embedder):
    path = tmp_path / "none" / "store.duckdb"
    with DuckDBStore(path, embedder=embedder, read_only=True) as store:
        assert store.list_investigations() == []
        assert similar_investigations(store, "revenue fell", k=3) == []
    assert not path.parent.exists()


def test_a_store_only_read_is_read_without_a_write(remembered, embedder):
    """Opened read-only, the file is read as it is: its bytes are unchanged and no write-ahead
    log is made; a store of an older schema is brought up to date first."""
    before = remembered.read_bytes()
    with DuckDBStore(remembered, embedder=embedder, read_only=True) as store:
        assert store.read_only
        assert len(similar_investigations(store, "revenue fell on iOS", k=5)) == 3
    assert remembered.read_bytes() == before
    assert not remembered.with_name(remembered.name + ".wal").exists()


def test_a_folder_that_cannot_be_made_is_named(tmp_path, embedder):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(StoreInaccessible) as caught:
        DuckDBStore(blocker / "store.duckdb", embedder=embedder)
    one_line(caught.value, blocker / "store.duckdb")
