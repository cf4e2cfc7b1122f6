"""Shared fixtures: real DuckDB files built by the real loader from tiny CSVs in tests/data."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Investigations run by the tests are remembered in a store of their own, never the user's.
_STORE_DIR = tempfile.mkdtemp(prefix="drilldown-test-store-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
os.environ["DRILLDOWN_STORE_PATH"] = os.path.join(_STORE_DIR, "store.duckdb")
os.environ["DRILLDOWN_STORE"] = "duckdb"
for _key in ("ANTHROPIC_API_KEY", "SUPABASE_DB_URL", "VOYAGE_API_KEY"):
    os.environ.pop(_key, None)

DATA = Path(__file__).parent / "data"


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def make_db(tmp_path: Path) -> Callable[..., Path]:
    """Build a database with the real loader from named CSV texts or files in tests/data."""
    from tasks.ingest.load import load_files

    def build(*names: str, db_name: str = "test.duckdb", **texts: str) -> Path:
        src = tmp_path / "src"
        src.mkdir(exist_ok=True)
        paths = []
        for n in names:
            shutil.copy(DATA / n, src / n)
            paths.append(src / n)
        for stem, text in texts.items():
            p = src / f"{stem}.csv"
            p.write_text(text, encoding="utf-8")
            paths.append(p)
        db = tmp_path / db_name
        load_files(paths, db)
        return db

    return build


@pytest.fixture(scope="session")
def shop_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """sales (fact) + customers (dimension, joined by customer_id) + visits (timestamps)."""
    from tasks.ingest.load import load_files

    root = tmp_path_factory.mktemp("shop")
    paths = []
    for n in ("sales.csv", "customers.csv", "visits.csv"):
        shutil.copy(DATA / n, root / n)
        paths.append(root / n)
    db = root / "shop.duckdb"
    load_files(paths, db)
    yield db


@pytest.fixture
def ctx(shop_db: Path) -> Iterator[object]:
    """A sandboxed tool context on the shop database."""
    from sql_tools import ToolContext

    with ToolContext(shop_db) as c:
        yield c


pytest_plugins = ["tests.conftest_pg", "tests.store_fixtures", "tests.prefect_harness"]
