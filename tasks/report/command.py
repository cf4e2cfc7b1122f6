"""How the report names the ``drilldown`` command, so that its commands run as printed, from any
folder."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from sql_tools._postgres import is_postgres_url


def drilldown_command() -> str:
    """``drilldown`` when that name on PATH is the running installation's; else the absolute
    path of the running environment's ``drilldown`` script (e.g. ``/…/.venv/bin/drilldown``
    right after ``make demo``, which does not put the virtual environment on PATH), quoted for
    a POSIX shell."""
    script = Path(sys.executable).parent / "drilldown"
    if not script.is_file():
        return "drilldown"
    found = shutil.which("drilldown")
    if found and os.path.realpath(found) == os.path.realpath(script):
        return "drilldown"
    return shlex.quote(str(script.absolute()))


def tool_command(tool: str, db: str | None, arguments: str) -> str:
    """The shell command that runs ``tool`` with ``arguments`` (JSON text) on the database
    ``db`` (a file's absolute path, a ``postgresql://`` URL as it is; ``DB`` when unknown),
    every argument quoted for a POSIX shell."""
    if not db:
        where = "DB"
    else:
        where = shlex.quote(db if is_postgres_url(db) else os.path.abspath(db))
    words = [shlex.quote(tool), "--db", where, "--args", shlex.quote(arguments)]
    return " ".join([drilldown_command(), "tool", *words])
