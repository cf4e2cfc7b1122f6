"""The output folder (``--out``): taken by one run at a time, recognised as the product's own,
and written without ever following a link.

:func:`claim` takes the folder before a run writes anything and refuses, with one line and
nothing touched:

- a path that is a link, a file, or under a file;
- a folder that is not empty and holds no :data:`MARKER` file: someone else's files (``--out
  $HOME``), which the product would replace and whose database it would add its tables to. A
  folder the product made, or found empty, gets the marker; a re-run into it is accepted;
- a folder another run is writing into: the marker is also the lock (``flock``), held for the
  whole run, so a second run never writes over, nor cleans up under, the first;
- a folder holding a link, or anything that is neither a regular file nor a folder, anywhere in
  its tree: everything the product writes there is a regular file or a folder it made, so a
  link was planted; and the product's names change (one log per hypothesis, new charts), so a
  list of names to check would lag behind them. The whole tree is checked, not the names.
- a folder every user may write into (``o+w``), where a link can be planted at any moment.

:func:`write_file` writes every output file: each folder on the way is opened relative to the
one before it with ``O_NOFOLLOW``, the bytes go to a new private file (``O_EXCL``) in the same
folder, and that file is renamed over the name. A rename replaces a link itself, never its
target, and a hard link's other name keeps its bytes: no output is ever written through a name
planted after the check either.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePath

from sql_tools import ToolInputError

MARKER = ".drilldown-out"
"""The file that says a folder is the product's output folder; also the run's lock."""

_TEXT = b"An output folder of drilldown: it replaces the files it writes here on every run.\n"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MODE = 0o775
"""Folders the product makes: never writable by every user, whatever the umask."""


class OutFolderError(ToolInputError):
    """An output folder the product does not write into (one line, naming the folder)."""


class Claim:
    """An output folder taken by this run: ``created`` lists what taking it made (the folder,
    or the marker in a folder found empty), for a failed run to take back; :meth:`release` lets
    the next run in."""

    def __init__(self, path: Path, created: list[Path], lock: int) -> None:
        self.path, self.created, self._lock = path, created, lock

    def release(self) -> None:
        if self._lock >= 0:
            os.close(self._lock)  # closing the file lets the lock go
            self._lock = -1

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim(out: str | Path, tries: int = 5) -> Claim:
    """Take the output folder ``out`` for this run, making it when it does not exist (see the
    module's docstring for what is refused).

    Raises:
        OutFolderError: The folder is refused; nothing was written.
    """
    path = Path(out)
    for _ in range(tries):
        taken = _take(path, str(out))
        if taken is not None:
            try:
                _check_tree(path, str(out))
            except BaseException:
                taken.release()
                raise
            return taken
    raise OutFolderError(f"another run is writing into {out}; wait for it, or give another --out")


def _take(path: Path, out: str) -> Claim | None:
    """The folder made or checked, its marker opened and locked; None when the folder or the
    marker was removed between (a failed run taking back what it made): try again."""
    _check_path(path, out)
    created: list[Path] = []
    if not path.exists():
        path.parent.mkdir(_MODE, parents=True, exist_ok=True)
        try:
            path.mkdir(_MODE)
            created.append(path)
        except FileExistsError:
            _check_path(path, out)  # made by another run meanwhile, or a link planted
    root = _open_root(path, out)
    try:
        try:
            lock = os.open(MARKER, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                           os.O_NONBLOCK | os.O_CLOEXEC, 0o666, dir_fd=root)  # fmt: skip
            os.write(lock, _TEXT)
            if not created:
                created.append(path / MARKER)
        except FileExistsError:
            lock = _open_marker(root, path, out)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise OutFolderError(
                f"another run is writing into {out}; wait for it, or give another --out"
            ) from None
        if not _same(root, lock, path):
            os.close(lock)
            return None
        return Claim(path, created, lock)
    finally:
        os.close(root)


def _check_path(path: Path, out: str) -> None:
    """``out`` is a folder not a link, or a path a folder can be made at; a folder not empty
    holds the marker."""
    if path.is_symlink():
        raise OutFolderError(
            f"the output folder {out} is a link: give the folder itself (the product writes no "
            "output through a link)"
        )
    for at in (path, *path.parents):
        if at.exists():
            if not at.is_dir():
                where = "" if at == path else f": {at} is a file"
                raise OutFolderError(f"the output folder {out} is not a folder{where}")
            break
    if not path.is_dir():
        return
    names = sorted(os.listdir(path))
    if names and MARKER not in names:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise OutFolderError(
            f"the output folder {out} holds files the product did not write ({shown}); give a "
            f"new or empty folder with --out (a folder of an earlier version without the "
            f"{MARKER} file: add that file to write into it again)"
        )


def _open_root(path: Path, out: str) -> int:
    try:
        return os.open(path, _DIR)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            _check_path(path, out)  # a link or a file planted meanwhile: says which
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def _open_marker(root: int, path: Path, out: str) -> int:
    try:
        fd = os.open(MARKER, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=root)  # fmt: skip
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutFolderError(_planted(out, MARKER, "a link")) from None
        raise OSError(exc.errno, exc.strerror, str(path / MARKER)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutFolderError(_planted(out, MARKER, "not a regular file"))
    return fd


def _same(root: int, lock: int, path: Path) -> bool:
    """Whether the locked marker is still the marker of the folder at ``path``."""
    try:
        here, marker = (
            os.stat(path, follow_symlinks=False),
            os.stat(MARKER, dir_fd=root, follow_symlinks=False),
        )
    except FileNotFoundError:
        return False
    held, folder = os.fstat(lock), os.fstat(root)
    return (here.st_dev, here.st_ino) == (folder.st_dev, folder.st_ino) and (
        marker.st_dev, marker.st_ino) == (held.st_dev, held.st_ino)  # fmt: skip


def _check_tree(path: Path, out: str) -> None:
    """Refuse a folder whose tree holds a link, an entry neither a regular file nor a folder, or
    a folder every user may write into."""
    for rel, mode in _entries(path):
        if stat.S_ISLNK(mode):
            raise OutFolderError(_planted(out, rel, "a link"))
        if stat.S_ISDIR(mode) and mode & stat.S_IWOTH:
            where = out if rel == "." else f"{out}/{rel}"
            raise OutFolderError(
                f"the output folder {where} may be written by every user, who could plant links "
                f"in it during a run; chmod o-w {where}, or give a folder of your own"
            )
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise OutFolderError(_planted(out, rel, "not a regular file or folder"))


def _entries(path: Path, rel: str = ".") -> Iterator[tuple[str, int]]:
    """Every entry under ``path`` (itself first), its path relative to the top and its mode, the
    links not followed."""
    yield rel, os.lstat(path).st_mode
    with os.scandir(path) as found:
        for e in sorted(found, key=lambda e: e.name):
            name = e.name if rel == "." else f"{rel}/{e.name}"
            if e.is_dir(follow_symlinks=False):
                yield from _entries(Path(e.path), name)
            else:
                yield name, e.stat(follow_symlinks=False).st_mode


def _planted(out: str, rel: str, what: str) -> str:
    return (
        f"the output folder {out} holds {rel}, which is {what}: the product writes only files "
        "of its own there; remove it, or give a new folder with --out"
    )


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_file(folder: str | Path, name: str | PurePath, data: bytes | str) -> Path:
    """Write ``folder/name`` (``name`` may hold subfolders, made as needed) without following a
    link below ``folder`` nor ``folder`` itself: a new private file renamed over the name.
    Returns the path written.

    Raises:
        OutFolderError: A folder on the way is a link or a file.
        OSError: The file could not be written (naming it).
    """
    target = Path(folder) / name
    *parts, leaf = Path(name).parts
    raw = data.encode("utf-8") if isinstance(data, str) else data
    at = _open_dirs(Path(folder), parts, make=True)
    tmp = f".{leaf[:100]}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o666, dir_fd=at)  # fmt: skip
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.replace(tmp, leaf, src_dir_fd=at, dst_dir_fd=at)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=at)
            except OSError:
                pass
            raise
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    finally:
        os.close(at)
    return target


def remove_file(folder: str | Path, name: str | PurePath) -> None:
    """Remove ``folder/name`` when it is there (a link is removed itself), never through a
    linked folder on the way."""
    *parts, leaf = Path(name).parts
    try:
        at = _open_dirs(Path(folder), parts, make=False)
    except FileNotFoundError:
        return
    try:
        os.unlink(leaf, dir_fd=at)
    except FileNotFoundError:
        pass
    finally:
        os.close(at)


def file_names(folder: str | Path, sub: str) -> list[str]:
    """The names in ``folder/sub`` (empty when it is not there), not through a link."""
    try:
        at = _open_dirs(Path(folder), Path(sub).parts, make=False)
    except FileNotFoundError:
        return []
    try:
        return sorted(os.listdir(at))
    finally:
        os.close(at)


def _open_dirs(folder: Path, parts: list[str] | tuple[str, ...], *, make: bool) -> int:
    """A descriptor of ``folder/parts...``, each opened with ``O_NOFOLLOW`` relative to the one
    before (and made first when ``make``)."""
    if any(p in ("", ".", "..") or os.sep in p for p in parts):
        raise ValueError(f"not a plain relative name: {'/'.join(parts)}")
    if make:
        folder.mkdir(_MODE, parents=True, exist_ok=True)
    try:
        at = os.open(folder, _DIR)
    except OSError as exc:
        raise _dir_error(exc, folder) from None
    where = folder
    for part in parts:
        where = where / part
        try:
            if make:
                try:
                    os.mkdir(part, _MODE, dir_fd=at)
                except FileExistsError:
                    pass
            nxt = os.open(part, _DIR, dir_fd=at)
        except OSError as exc:
            os.close(at)
            raise _dir_error(exc, where) from None
        os.close(at)
        at = nxt
    return at


def _dir_error(exc: OSError, where: Path) -> Exception:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # ENOTDIR: O_DIRECTORY is checked first
        if exc.errno == errno.ELOOP or where.is_symlink():
            return OutFolderError(f"{where} is a link: the product writes no output through a link")
        return OutFolderError(f"{where} is not a folder")
    return OSError(exc.errno, exc.strerror, str(where))
