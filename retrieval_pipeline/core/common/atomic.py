"""Files that are never seen half-written, and SQLite files that are rebuilt when corrupt.

**Atomic replacement.** :func:`atomic_write` lets a writer fill a temp file created next to the target
with a unique name (``tempfile.mkstemp``: ``.<name>.<random>.tmp``), then renames it over the target with
``os.replace``. A reader therefore sees the old file or the new one, never a mix; two writers of one path
never share a temp file (the last rename wins, each file whole); a writer that raises leaves no temp
file behind (a SIGKILLed one may leave its ``.tmp``, never a torn target). The new file gets the usual
``0o666 & ~umask`` mode (``mkstemp`` alone would leave ``0o600``). A reader must open the file once:
pyarrow given a *path* opens it twice (schema, then data) and can mix two versions; read through one
open handle instead (as :class:`~retrieval_pipeline.defs.io_manager.ParquetIOManager` does).

**Corrupt SQLite files.** :func:`open_sqlite` opens a database; when SQLite says the file is not a
database or is malformed, the file (with its ``-wal``/``-shm``/``-journal`` sidecars) is renamed to
``<file>.corrupt-<UTC timestamp>``, a :class:`CorruptFileWarning` names both paths, and a fresh
database is created in its place. :func:`replace_corrupt_sqlite` does the same for corruption found
later, while the file is in use. Both hold :func:`file_lock` (a ``filelock.FileLock``) and compare the
file's identity (device, inode) with the one that failed, so two processes never move aside each other's
fresh file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import filelock

#: ``(st_dev, st_ino)`` of a file: tells a replaced file from the one that was opened.
FileIdentity = tuple[int, int]

#: SQLite's primary result codes for "this file is damaged" (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``).
_CORRUPT_CODES = frozenset({11, 26})
_CORRUPT_MESSAGES = ("file is not a database", "database disk image is malformed", "file is encrypted or is not a database")
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


def is_corrupt_sqlite_error(error: BaseException) -> bool:
    """Whether a SQLite error means the file itself is damaged (not a lock, a full disk or a bad query)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in _CORRUPT_CODES:
        return True
    message = str(error).lower()
    return any(text in message for text in _CORRUPT_MESSAGES)


def open_sqlite(
    path: Path, connect: Callable[[Path], sqlite3.Connection], *, what: str, lock_path: Path
) -> tuple[sqlite3.Connection, FileIdentity | None]:
    """``connect(path)``, moving a corrupt file aside first if SQLite rejects it.

    Args:
        path: The database file.
        connect: Opens the file and prepares it (pragmas, tables); must close what it opened if it fails.
        what: What the file is, for the warning (e.g. ``"embedding cache"``).
        lock_path: Lock file held while a corrupt file is replaced.

    Returns:
        ``(connection, identity of the file opened)``.

    Raises:
        sqlite3.DatabaseError: Errors that are not corruption, or a fresh file that still fails.
    """
    seen = file_identity(path)
    try:
        with file_lock(lock_path):  # one opener at a time: setting WAL mode on a new file is not busy-waited
            return connect(path), file_identity(path)
    except sqlite3.DatabaseError as error:
        if not is_corrupt_sqlite_error(error):
            raise
        with file_lock(lock_path):
            return replace_corrupt_sqlite(path, connect, seen=seen, error=error, what=what)


def replace_corrupt_sqlite(
    path: Path,
    connect: Callable[[Path], sqlite3.Connection],
    *,
    seen: FileIdentity | None,
    error: BaseException,
    what: str,
) -> tuple[sqlite3.Connection, FileIdentity | None]:
    """Move the corrupt database aside (unless another process already did) and open a fresh one.

    The caller holds the file's lock (see :func:`file_lock`).

    Args:
        path: The database file.
        connect: As for :func:`open_sqlite`.
        seen: Identity of the file that failed; if ``path`` is another file now, it is only reopened.
        error: The SQLite error, quoted in the warning.
        what: What the file is, for the warning.

    Returns:
        ``(connection, identity of the file opened)``.
    """
    if seen is not None and file_identity(path) == seen:
        moved = move_aside(path)
        warnings.warn(
            f"{what} {path} is corrupt ({error}); moved it to {moved} and started a fresh one",
            CorruptFileWarning,
            stacklevel=3,
        )
    return connect(path), file_identity(path)


def connect_wal(path: str | Path, timeout_s: float, schema: str, table: str, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """Open a cache database in autocommit WAL mode with a busy timeout, ``schema`` applied and ``table`` readable.

    A file that is not a database fails here (on the first statement), so the caller's corrupt-file
    handling (:func:`open_sqlite`) sees it at open time; the connection is closed on any failure.
    """
    conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(schema)
        conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()
    except BaseException:
        conn.close()
        raise
    return conn
