"""Every shared fixture: real DuckDB files built by the real loader from tiny CSVs in tests/data;
a real Postgres + pgvector (``pg_server``, ``pg_db``) and the store backends on it and on DuckDB
(``backend``, ``store``); data read in place in that Postgres (``pg_database``, ``shop_pg``); a
temporary Prefect server (``prefect_harness``). Helpers that are not fixtures are in
``tests/support/``."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tasks.store import DuckDBStore, PostgresStore
from tasks.store.embed import WordLlamaEmbedder
from tests.support.pg_source import copy_tables, create_database, drop_database
from tests.support.postgres import ROLES_SQL, TEMPLATE, PgServer, _start, migration_files
from tests.support.records import TABLES

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Investigations run by the tests are remembered in a store of their own, never the user's.
_STORE_DIR = tempfile.mkdtemp(prefix="drilldown-test-store-")
atexit.register(shutil.rmtree, _STORE_DIR, True)
os.environ["DRILLDOWN_STORE_PATH"] = os.path.join(_STORE_DIR, "store.duckdb")
os.environ["DRILLDOWN_STORE"] = "duckdb"
# Prefect's profiles and local database likewise live in the run's folder, not ~/.prefect.
os.environ["PREFECT_HOME"] = os.path.join(_STORE_DIR, "prefect-home")
for _key in ("ANTHROPIC_API_KEY", "SUPABASE_DB_URL", "VOYAGE_API_KEY"):
    os.environ.pop(_key, None)

DATA = Path(__file__).parent / "data"


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


# --- Postgres + pgvector ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One Postgres for the session, with the migrations applied to a template database."""
    parent = Path(tempfile.mkdtemp(prefix="drilldown-pg-"))
    runtime = parent / "run"
    runtime.mkdir(mode=0o700)
    saved_runtime = os.environ.get("XDG_RUNTIME_DIR")
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))  # else platformdirs warns
    srv = None
    try:
        srv = _start(parent)
        server = PgServer(srv)
        with psycopg.connect(server.admin_uri(), autocommit=True) as c:
            c.execute(f"create database {TEMPLATE}")
        with psycopg.connect(server.admin_uri(TEMPLATE), autocommit=True) as c:
            c.execute(ROLES_SQL.read_text())
            for f in migration_files():
                c.execute(f.read_text())
            c.execute("alter role drilldown_writer login")
        yield server
    finally:
        if srv is not None:
            srv.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(parent, ignore_errors=True)
        if saved_runtime is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)


@pytest.fixture
def pg_db(pg_server: PgServer) -> Iterator[str]:
    """A fresh database with the schema; yields its name."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server.admin_uri(), autocommit=True) as c:
        c.execute(f'create database "{name}" template {TEMPLATE}')
    yield name
    with psycopg.connect(pg_server.admin_uri(), autocommit=True) as c:
        c.execute(f'drop database "{name}" with (force)')


# --- data read in place in Postgres -----------------------------------------------------------


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[Callable[[], str]]:
    """Make fresh empty databases (no store schema; dropped afterwards): each call returns the
    new database's superuser URI."""
    made: list[str] = []

    def make() -> str:
        made.append(create_database(pg_server.admin_uri()))
        return made[-1]

    yield make
    for uri in made:
        drop_database(pg_server.admin_uri(), uri)


@pytest.fixture(scope="session")
def shop_pg(pg_server: PgServer, shop_db: Path) -> Iterator[str]:
    """The shop tables (sales, customers, visits) as the loader read them, copied with their
    types into a Postgres database of their own: its superuser URI. Tests only read it."""
    uri = create_database(pg_server.admin_uri())
    copy_tables(shop_db, uri)
    yield uri
    drop_database(pg_server.admin_uri(), uri)


# --- the memory store, on each backend ---------------------------------------------------------


@pytest.fixture(scope="session")
def embedder() -> WordLlamaEmbedder:
    """The offline embedder, loaded once."""
    return WordLlamaEmbedder()


@dataclass
class Backend:
    """One store backend under test: how to open its store and count what it holds."""

    name: str
    open: Callable[[], DuckDBStore | PostgresStore]
    counts: Callable[[], dict[str, int]]
    admin_dsn: str | None = None


@pytest.fixture(params=["duckdb", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path, embedder) -> Iterator[Backend]:
    """The store backends, each empty; stores opened through it are closed afterwards."""
    opened: list[Any] = []
    if request.param == "duckdb":
        path = tmp_path / "store.duckdb"

        def open_duck() -> DuckDBStore:
            store = DuckDBStore(path, embedder=embedder)
            opened.append(store)
            return store

        def duck_counts() -> dict[str, int]:
            live = [s for s in opened if s._con is not None]
            store = live[-1] if live else open_duck()
            return store.table_counts()

        yield Backend("duckdb", open_duck, duck_counts)
    else:
        server = request.getfixturevalue("pg_server")
        db = request.getfixturevalue("pg_db")
        admin = server.admin_uri(db)

        def open_pg() -> PostgresStore:
            store = PostgresStore(server.writer_dsn(db), embedder=embedder)
            opened.append(store)
            return store

        def pg_counts() -> dict[str, int]:
            with psycopg.connect(admin) as c:
                return {t: c.execute(f"select count(*) from {t}").fetchone()[0] for t in TABLES}

        yield Backend("postgres", open_pg, pg_counts, admin_dsn=admin)
    for store in opened:
        store.close()


@pytest.fixture
def store(backend: Backend) -> DuckDBStore | PostgresStore:
    """An empty store on each backend."""
    return backend.open()


# --- Prefect ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Flows called in the test run against a temporary Prefect server."""
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_LOCAL_STORAGE_PATH,
        temporary_settings,
    )
    from prefect.testing.utilities import prefect_test_harness

    storage = tmp_path_factory.mktemp("prefect-results")
    with prefect_test_harness(server_startup_timeout=120):
        with temporary_settings(
            updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None, PREFECT_LOCAL_STORAGE_PATH: storage}
        ):
            yield
