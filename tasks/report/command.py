"""How the report writes its shell commands, so that they run as printed, from any folder, and
run nothing else.

Every word of a printed command goes through :func:`shell_word`: whatever a file, table,
column, segment or period label holds (backticks, ``$(...)``, quotes, newlines, a leading dash,
characters that draw nothing), a POSIX shell reads it back as exactly one word with exactly
that text, and the printed command holds only characters that are drawn.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from sql_tools import is_postgres_url
from sql_tools.output import hidden


def shell_word(text: str) -> str:
    """``text`` quoted as one shell word: ``shlex.quote`` (single quotes) when every character
    is drawn, else ANSI-C quoting (``$'...'``, which bash, zsh and ksh read) with each newline
    ``\\n`` and each hidden character its UTF-8 bytes as ``\\xHH``, so the printed command
    shows what it passes and a copy of it passes the same bytes."""
    if not any(ch == "\n" or hidden(ch) for ch in text):
        return shlex.quote(text)
    out = []
    for ch in text:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif hidden(ch):
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def shell_command(*words: str) -> str:
    """A command line of ``words``, each one quoted by :func:`shell_word`."""
    return " ".join(shell_word(w) for w in words)


def drilldown_program() -> str:
    """``drilldown`` when that name on PATH is the running installation's; else the absolute
    path of the running environment's ``drilldown`` script (e.g. ``/…/.venv/bin/drilldown``
    right after ``make demo``, which does not put the virtual environment on PATH)."""
    script = Path(sys.executable).parent / "drilldown"
    if not script.is_file():
        return "drilldown"
    found = shutil.which("drilldown")
    if found and os.path.realpath(found) == os.path.realpath(script):
        return "drilldown"
    return str(script.absolute())


def tool_command(tool: str, db: str | None, arguments: str) -> str:
    """The shell command that runs ``tool`` with ``arguments`` (JSON text) on the database
    ``db`` (a file's absolute path, a ``postgresql://`` URL as it is; ``DB`` when unknown),
    every argument quoted by :func:`shell_word`."""
    if not db:
        where = "DB"
    else:
        where = shell_word(db if is_postgres_url(db) else os.path.abspath(db))
    program = shell_command(drilldown_program(), "tool", tool)
    return " ".join([program, "--db", where, "--args", shell_word(arguments)])
