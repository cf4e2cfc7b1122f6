"""The output folder is the product's, and nothing is written through it to anywhere else.

A link planted anywhere in the folder (at any output's name, at a temporary file's name, at a
subfolder, at the marker) has the run refused with one line before anything is written, its
target as it was; a link planted after the check is replaced by the file, never written
through. A folder that is not empty and was not made by the product (``--out $HOME``) is
refused with its files byte-identical. A folder another run holds is refused, and the refused
run removes nothing. The runs are refused before anything is loaded, so this module is fast;
the runs that complete are in ``test_out_folder_runs.py``.
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from tasks.investigation import investigation
from tasks.request import Request
from tasks import outdir
from tasks.agent.ledger import Ledger
from tasks.outdir import MARKER, OutFolderError, claim, write_file
from tests.support.cli import ROOT

PRECIOUS = b"the user's own bytes\n"
WEEKS = ["--baseline", "2024-03-18:2024-03-24", "--comparison", "2024-03-25:2024-03-31"]


def write_events(folder: Path) -> Path:
    """Three weeks of two platforms' revenue, web falling in the last one: ``events.csv``."""
    lines = ["date,platform,revenue"]
    for i in range(21):
        day = date(2024, 3, 11) + timedelta(days=i)
        lines += [f"{day},ios,{90 + i % 4}", f"{day},web,{120 + i % 3 - (30 if i >= 14 else 0)}"]
    path = folder / "events.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_events(tmp_path_factory.mktemp("out-folder"))


def run(events: Path, out: Path) -> dict:
    """An offline investigation of ``events`` into ``out``, in this process, not remembered."""
    return investigation(Request(
        data=[str(events)], metric="sum(revenue)", baseline="2024-03-18:2024-03-24",
        comparison="2024-03-25:2024-03-31", out=str(out), offline=True, remember=False,
    ))  # fmt: skip


def cli(events: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``drilldown investigate`` as a user runs it, with a store of its own beside ``out``."""
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DRILLDOWN_STORE_PATH": str(out.parent / f"{out.name}-store.duckdb")}  # fmt: skip
    argv = ["investigate", str(events), "--metric", "sum(revenue)", *WEEKS, "--offline"]
    return subprocess.run(
        [sys.executable, "-m", "drilldown.cli", *argv, "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip


def refused_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: "), line
    return line


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``, links not followed: a link's target, a file's bytes, a
    folder's mode, another entry's mode."""
    found: dict[str, object] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(here) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                found[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                found[rel] = ("dir", stat.S_IMODE(p.lstat().st_mode))
            elif p.is_file():
                found[rel] = ("file", p.read_bytes())
            else:  # a pipe, never opened
                found[rel] = ("other", p.lstat().st_mode)
    return found


def earlier(out: Path) -> Path:
    """A folder the product wrote before: its marker and outputs of an earlier run."""
    claim(out).release()
    for name in ("report.md", "report.html", "result.json", "evidence.jsonl", "data.duckdb",
                 "charts/waterfall.png", "hypotheses/h1.log", "uploads/a.csv"):  # fmt: skip
        write_file(out, name, f"earlier {name}\n")
    return out


def victim(tmp_path: Path) -> tuple[Path, Path]:
    """Files the user keeps elsewhere: one file, and a folder holding hypothesis-shaped logs."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "secret.txt").write_bytes(PRECIOUS)
    for name in ("h1.log", "h7.log", "waterfall.png"):
        (home / "logs" / name).write_bytes(PRECIOUS)
    return home / "secret.txt", home / "logs"


# name in the output folder -> what is planted there: a link to the user's file or folder
PLANTED = {
    "report.md": "file", "report.html": "file", "result.json": "file",
    "result.json.tmp": "file", "evidence.jsonl": "file", "evidence.jsonl.tmp": "file",
    "data.duckdb": "file", "data.duckdb.wal": "file", "charts/waterfall.png": "file",
    "charts/timeseries.png": "dangling", "hypotheses/h1.log": "file", "hypotheses": "folder",
    "charts": "folder", "uploads": "folder", MARKER: "file", "notes/kept.txt": "relative",
}  # fmt: skip


def plant(out: Path, name: str, kind: str, file: Path, folder: Path) -> None:
    at = out / name
    at.parent.mkdir(parents=True, exist_ok=True)
    if at.is_dir() and not at.is_symlink():
        for p in sorted(at.iterdir()):
            p.unlink()
        at.rmdir()
    else:
        at.unlink(missing_ok=True)
    target = {"file": file, "folder": folder, "dangling": folder / "new.png",
              "relative": Path(os.path.relpath(file, at.parent))}[kind]  # fmt: skip
    at.symlink_to(target, target_is_directory=kind == "folder")


@pytest.mark.parametrize("name", PLANTED)
def test_a_link_planted_in_the_output_folder_is_refused_and_its_target_kept(
    events, tmp_path, name
):
    file, folder = victim(tmp_path)
    out = earlier(tmp_path / "out")
    plant(out, name, PLANTED[name], file, folder)
    home, before = snapshot(tmp_path / "home"), snapshot(out)
    with pytest.raises(OutFolderError) as exc:
        run(events, out)
    assert f"holds {name}, which is" in exc.value.message and "a link" in exc.value.message
    assert snapshot(out) == before and snapshot(tmp_path / "home") == home
    assert not (folder / "new.png").exists()


def test_the_command_line_refuses_a_planted_link_in_one_line_and_exit_2(events, tmp_path):
    file, _ = victim(tmp_path)
    out = earlier(tmp_path / "out")
    plant(out, "report.md", "file", file, file.parent)
    before = snapshot(out)
    line = refused_line(cli(events, out))
    assert f"the output folder {out} holds report.md, which is a link" in line, line
    assert file.read_bytes() == PRECIOUS and snapshot(out) == before
    assert not (tmp_path / "out-store.duckdb").exists()


def test_an_output_folder_that_is_itself_a_link_is_refused(events, tmp_path):
    real = tmp_path / "real"
    earlier(real)
    before = snapshot(real)
    for out in (tmp_path / "linked", tmp_path / "dangling"):
        out.symlink_to(real if out.name == "linked" else tmp_path / "nowhere")
        with pytest.raises(OutFolderError, match=f"the output folder {out} is a link"):
            run(events, out)
    assert snapshot(real) == before and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", ["fifo", "world-writable", "world-writable-subfolder"])
def test_an_entry_the_product_never_makes_is_refused(events, tmp_path, kind):
    out = earlier(tmp_path / "out")
    if kind == "fifo":
        (out / "data.duckdb").unlink()
        os.mkfifo(out / "data.duckdb")
        says = "holds data.duckdb, which is not a regular file or folder"
    else:
        at = out if kind == "world-writable" else out / "charts"
        at.chmod(0o777)
        says = "may be written by every user"
    before = snapshot(out)
    with pytest.raises(OutFolderError, match=says):
        run(events, out)
    assert snapshot(out) == before


def home_like(folder: Path) -> None:
    """The user's own report.md and a DuckDB database of theirs."""
    folder.mkdir(parents=True)
    (folder / "report.md").write_bytes(PRECIOUS)
    con = duckdb.connect(str(folder / "data.duckdb"))
    con.execute("CREATE TABLE budget AS SELECT 1 AS amount")
    con.close()


def test_someone_elses_folder_is_refused_and_their_files_kept(events, tmp_path):
    home = tmp_path / "home"
    home_like(home)
    before = snapshot(home)
    line = refused_line(cli(events, home))
    assert f"the output folder {home} holds files the product did not write" in line, line
    assert "data.duckdb, report.md" in line and "give a new or empty folder" in line, line
    assert snapshot(home) == before and not (home / MARKER).exists()
    con = duckdb.connect(str(home / "data.duckdb"), read_only=True)
    rows = con.sql("SELECT schema_name FROM information_schema.schemata").fetchall()
    schemas = {r[0] for r in rows}
    con.close()
    assert "_drilldown" not in schemas


# what a folder not the product's may hold: dot files, a lone folder, outputs without a marker
FOREIGN = {
    "dotfile": {".bashrc": "alias ll='ls -l'\n"},
    "folder": {"projects/plan.txt": "plan\n"},
    "looks-like-ours": {"report.md": "# mine\n", "result.json": "{}\n"},
    "marker-in-a-subfolder": {f"sub/{MARKER}": ""},
}


@pytest.mark.parametrize("case", FOREIGN)
def test_a_folder_the_product_did_not_make_is_refused_whatever_it_holds(events, tmp_path, case):
    out = tmp_path / "theirs"
    for name, text in FOREIGN[case].items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
    before = snapshot(out)
    with pytest.raises(OutFolderError, match="holds files the product did not write"):
        run(events, out)
    assert snapshot(out) == before


def test_an_empty_folder_is_taken_and_marked_and_taken_again(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    with claim(out) as first:
        assert first.created == [out / MARKER]
    with claim(out) as again:  # a re-run into the product's own folder
        assert again.created == []
    with claim(tmp_path / "new" / "out") as made:
        assert made.created == [tmp_path / "new" / "out"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER]


def test_a_folder_another_run_holds_is_refused_and_the_refused_run_removes_nothing(
    events, tmp_path
):
    out = tmp_path / "out"
    with claim(out):  # another run, writing: nothing in the folder yet but its marker
        with pytest.raises(OutFolderError, match=f"another run is writing into {out}"):
            claim(out)
        line = refused_line(cli(events, out))
        assert f"another run is writing into {out}" in line, line
        assert sorted(p.name for p in out.iterdir()) == [MARKER]
        write_file(out, "data.duckdb", "the holder's database")
        refused_line(cli(events, out))
        assert (out / "data.duckdb").read_text() == "the holder's database"
    with claim(out) as after:
        assert after.created == []


def test_the_lock_is_the_marker_held_by_flock(tmp_path):
    # the lock another process sees: an exclusive flock on the marker for as long as a run holds
    out = tmp_path / "out"
    with claim(out):
        fd = os.open(out / MARKER, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(out / MARKER, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# A link planted after the check: the writers replace it, never write through it
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["symlink", "hard link"])
def test_a_file_written_over_a_planted_link_replaces_the_link(tmp_path, how):
    file, _ = victim(tmp_path)
    out = tmp_path / "out"
    (out / "charts").mkdir(parents=True)
    for name in ("report.md", "charts/waterfall.png"):
        if how == "symlink":
            (out / name).symlink_to(file)
        else:
            os.link(file, out / name)
        write_file(out, name, "ours\n")
        assert not (out / name).is_symlink() and (out / name).read_text() == "ours\n"
    assert file.read_bytes() == PRECIOUS
    assert sorted(p.name for p in out.rglob("*.tmp")) == []


@pytest.mark.parametrize("sub", ["charts", "hypotheses", "uploads"])
def test_a_subfolder_planted_as_a_link_is_never_written_through(tmp_path, sub):
    _, folder = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / sub).symlink_to(folder, target_is_directory=True)
    before = snapshot(folder)
    with pytest.raises(OutFolderError, match=f"{out / sub} is a link"):
        write_file(out, f"{sub}/h1.log", "ours\n")
    with pytest.raises(OutFolderError):
        outdir.remove_file(out, f"{sub}/h7.log")
    with pytest.raises(OutFolderError):
        outdir.file_names(out, sub)
    assert snapshot(folder) == before


def test_the_evidence_ledger_neither_writes_nor_removes_logs_through_a_linked_folder(tmp_path):
    # the ledger removes a log of a hypothesis this run does not have: through a link, it would
    # remove the user's h7.log and overwrite their h1.log
    _, folder = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "hypotheses").symlink_to(folder, target_is_directory=True)
    before = snapshot(folder)
    with pytest.raises(OutFolderError):
        Ledger().write(out, {"h1": "ours"})
    assert snapshot(folder) == before
