"""A data folder cannot read files outside itself.

A downloaded folder holding ``orders.csv`` as a symbolic link to the user's credentials must not
load them: the load is refused with one line naming the entry, exit code 2, and nothing is
loaded or written. A link that stays inside the folder is an ordinary way to name a file and
loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import drilldown, file_digest

SECRET = "aws_secret_access_key=Q9v3CANARYsecretVALUE"
EVENTS = "day,country,revenue\n" + "".join(
    f"2024-01-{d:02d},{c},{100 + d}\n" for d in range(1, 15) for c in ("DE", "FR")
)
WEEKS = ["--baseline", "2024-01-01:2024-01-07", "--comparison", "2024-01-08:2024-01-14"]


def _home(tmp_path: Path) -> Path:
    """The user's own files, outside the data folder: a credentials file and a folder."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\n{SECRET}\n", encoding="utf-8")
    (home / "private").mkdir()
    (home / "private" / "orders.csv").write_text(f"key,value\n{SECRET},1\n", encoding="utf-8")
    return home


def _pack(tmp_path: Path) -> Path:
    """The downloaded data folder, with one honest file."""
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "events.csv").write_text(EVENTS, encoding="utf-8")
    return pack


def _absolute_link(pack: Path, home: Path) -> tuple[list[Path], str]:
    (pack / "orders.csv").symlink_to(home / ".aws" / "credentials")
    return [pack], "orders.csv"


def _relative_link(pack: Path, home: Path) -> tuple[list[Path], str]:
    (pack / "nested").mkdir()
    (pack / "nested" / "orders.csv").symlink_to(Path("../../home/.aws/credentials"))
    return [pack], "nested/orders.csv"


def _linked_folder(pack: Path, home: Path) -> tuple[list[Path], str]:
    (pack / "exports").symlink_to(home / "private", target_is_directory=True)
    return [pack], "exports"


def _file_given_alone(pack: Path, home: Path) -> tuple[list[Path], str]:
    (pack / "orders.csv").symlink_to(home / ".aws" / "credentials")
    return [pack / "events.csv", pack / "orders.csv"], "orders.csv"


LEAVING: dict[str, Callable[[Path, Path], tuple[list[Path], str]]] = {
    "absolute": _absolute_link,
    "relative-dotdot": _relative_link,
    "linked-folder": _linked_folder,
    "file-given-alone": _file_given_alone,
}


@pytest.mark.parametrize("case", LEAVING)
def test_an_entry_leading_outside_the_folder_is_refused_and_nothing_loads(tmp_path, case):
    home, pack = _home(tmp_path), _pack(tmp_path)
    data, entry = LEAVING[case](pack, home)
    db = tmp_path / "data.duckdb"
    proc = drilldown("load", *map(str, data), "--db", str(db))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and entry in line and "outside" in line
    assert not db.exists() and SECRET not in proc.stdout + proc.stderr

    out = tmp_path / "out"
    proc = drilldown(
        "investigate", *map(str, data), "--metric", "sum(revenue)", "--time-column", "day",
        *WEEKS, "--offline", "--no-remember", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == line
    assert not (out / "data.duckdb").exists() and not (out / "result.json").exists()


def test_a_refused_folder_leaves_an_existing_database_as_it_was(tmp_path):
    home, pack = _home(tmp_path), _pack(tmp_path)
    db = tmp_path / "data.duckdb"
    assert drilldown("load", str(pack), "--db", str(db)).returncode == 0
    before = file_digest(db)
    (pack / "orders.csv").symlink_to(home / ".aws" / "credentials")
    (pack / "events.csv").write_text(EVENTS.replace(",100", ",7100"), encoding="utf-8")
    proc = drilldown("load", str(pack), "--db", str(db))
    assert proc.returncode == 2 and "orders.csv" in proc.stderr
    assert file_digest(db) == before


def test_links_that_stay_inside_the_folder_load(tmp_path):
    """A file link and a folder link whose targets are in the folder: the load goes on, each
    file once, under the name the folder gives it."""
    pack = _pack(tmp_path)
    (pack / "raw").mkdir()
    (pack / "raw" / "orders.v3").write_text("id,amount\n1,5\n2,7\n", encoding="utf-8")
    (pack / "orders.csv").symlink_to(Path("raw/orders.v3"))
    (pack / "latest").symlink_to(pack, target_is_directory=True)  # a loop back to the folder
    proc = drilldown("load", str(pack), "--db", str(tmp_path / "data.duckdb"), "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    tables = {t["table"]: t["rows"] for t in json.loads(proc.stdout)["tables"]}
    assert tables == {"events": 28, "orders": 2}


def test_a_link_loop_is_refused_by_name(tmp_path):
    pack = _pack(tmp_path)
    os.symlink("b.csv", pack / "a.csv")
    os.symlink("a.csv", pack / "b.csv")
    proc = drilldown("load", str(pack), "--db", str(tmp_path / "data.duckdb"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "a.csv" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data.duckdb").exists()
