"""Files that are never seen half-written, exclusive file locks, and damaged files moved aside.

**Atomic replacement.** :func:`atomic_write` lets a writer fill a temp file created next to the target
with a unique name (``tempfile.mkstemp``: ``.<name>.<random>.tmp``), then renames it over the target with
``os.replace``. A reader therefore sees the old file or the new one, never a mix; two writers of one path
never share a temp file (the last rename wins, each file whole); a writer that raises leaves no temp
file behind (a SIGKILLed one may leave its ``.tmp``, never a torn target). The new file gets the usual
``0o666 & ~umask`` mode (``mkstemp`` alone would leave ``0o600``). A reader must open the file once:
pyarrow given a *path* opens it twice (schema, then data) and can mix two versions; read through one
open handle instead (as :class:`~retrieval_pipeline.defs.io_manager.ParquetIOManager` does).

**Damaged files.** :func:`move_aside` renames a damaged file (with its SQLite sidecars) to
``<file>.corrupt-<UTC timestamp>``; the SQLite stores do it through
:mod:`retrieval_pipeline.core.common.cache.sqlite_store`, their one locking and recovery path.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import filelock

#: ``(st_dev, st_ino)`` of a file: tells a replaced file from the one that was opened.
FileIdentity = tuple[int, int]

_SIDECARS = ("-wal", "-shm", "-journal")
#: Attempts at a free ``.corrupt-<timestamp>[.n]`` name before giving up.
_MAX_ASIDE_NAMES = 100


class CorruptFileWarning(RuntimeWarning):
    """A damaged file was moved aside and a fresh one started."""


# -- atomic replacement ---------------------------------------------------------------------------


def atomic_write(path: str | Path, writer: Callable[[Path], object], *, fsync: bool = False) -> Path:
    """Create ``path`` through ``writer`` so that no reader ever sees a partial file.

    Args:
        path: The target file; its folder is created.
        writer: Called with the path of an empty temp file in the same folder; it writes the whole
            content there (it may reopen or truncate it, e.g. ``frame.to_parquet(temp)``).
        fsync: Flush the temp file and the folder to disk, so the new content survives a power loss.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        Exception: Whatever ``writer`` raises; the temp file is removed and ``path`` is left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    temp = Path(name)
    try:
        os.close(fd)
        writer(temp)
        os.chmod(temp, 0o666 & ~_umask())
        if fsync:
            _fsync_file(temp)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(target.parent)
    return target


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8", fsync: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`); newlines are written as given.

    Args:
        path: The target file; its folder is created.
        text: The whole content.
        encoding: Text encoding.
        fsync: Flush to disk before the rename.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """

    def write(temp: Path) -> None:
        with temp.open("w", encoding=encoding, newline="") as handle:
            handle.write(text)

    return atomic_write(path, write, fsync=fsync)


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - only without /proc
    os.umask(mask)
    return mask


def _fsync_file(path: Path) -> None:
    """Flush a file's content to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Flush a folder's entries (the rename) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- locks ---------------------------------------------------------------------------------------


def file_lock(lock_path: str | Path) -> filelock.FileLock:
    """An exclusive lock on ``lock_path`` (created if missing) for a ``with`` block: a new ``filelock.FileLock``.

    On POSIX it is an ``fcntl.flock`` on this open of the file: two threads, or two processes, using their
    own ``file_lock`` exclude each other (a thread asking again while it holds one waits for itself); the
    kernel drops it when the holder dies (even by SIGKILL).

    Args:
        lock_path: The lock file; it is left in place afterwards (deleting lock files is racy).
    """
    return filelock.FileLock(lock_path)


def file_identity(path: str | Path) -> FileIdentity | None:
    """``(st_dev, st_ino)`` of ``path``, or ``None`` when it does not exist."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino)


# -- corrupt files -------------------------------------------------------------------------------


def move_aside(path: str | Path, label: str = "corrupt") -> Path:
    """Rename ``path`` (and its SQLite sidecars, if any) to ``<path>.<label>-<UTC timestamp>``.

    Args:
        path: An existing file.
        label: Word in the new name.

    Returns:
        The new path of the file.

    Raises:
        FileExistsError: If no free name was found.
    """
    source = Path(path)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(_MAX_ASIDE_NAMES):
        suffix = f".{label}-{stamp}" + (f".{attempt}" if attempt else "")
        target = source.with_name(source.name + suffix)
        if not any(Path(str(target) + s).exists() for s in ("", *_SIDECARS)):
            break
    else:
        raise FileExistsError(f"no free name to move {source} aside")
    os.replace(source, target)
    for sidecar in _SIDECARS:
        with contextlib.suppress(FileNotFoundError):
            os.replace(str(source) + sidecar, str(target) + sidecar)
    return target
