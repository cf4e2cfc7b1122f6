"""How the report names the ``drilldown`` command, so that its commands run as printed."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def drilldown_command() -> str:
    """``drilldown`` when that name on PATH is the running installation's; else the path of
    the running environment's ``drilldown`` script (relative to the working folder when inside
    it, e.g. ``.venv/bin/drilldown`` right after ``make demo``, which does not put the virtual
    environment on PATH)."""
    script = Path(sys.executable).parent / "drilldown"
    if not script.is_file():
        return "drilldown"
    found = shutil.which("drilldown")
    if found and os.path.realpath(found) == os.path.realpath(script):
        return "drilldown"
    try:
        shown = str(script.absolute().relative_to(Path.cwd()))
    except ValueError:
        shown = str(script.absolute())
    return shlex.quote(shown)
