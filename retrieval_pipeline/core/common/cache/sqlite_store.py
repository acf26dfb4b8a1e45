"""One SQLite file behind one connection, with ONE locking and corrupt-file recovery path for every cache.

The result cache (:mod:`retrieval_pipeline.core.common.cache.result_cache`), the embedding cache
(:mod:`retrieval_pipeline.core.retrieval.models.embed_cache`) and the LLM cache
(:mod:`retrieval_pipeline.core.services.llm.cache`) each keep their own table, keys and values in a
:class:`SQLiteStore`; what is hard about a shared SQLite file is here, once:

* **WAL and a busy timeout** (:func:`connect_wal`): readers never block the writer, several processes share the
  file, and a write waits for another process's lock instead of failing at once.
* **One connection per store, shared by threads** behind a lock that is always taken *after* the file lock.
* **The file lock** ``<file>.lock`` (:meth:`SQLiteStore.file_locked`,
  :func:`~retrieval_pipeline.core.common.atomic.file_lock`): a cache holds it around "look again, compute,
  store" so two processes never compute one entry twice; the kernel drops it when its holder dies.
* **Corrupt files are replaced.** A file SQLite rejects ("file is not a database", "database disk image is
  malformed"), when opened or later, is renamed to ``<file>.corrupt-<UTC timestamp>`` (with its sidecars) with a
  :class:`~retrieval_pipeline.core.common.atomic.CorruptFileWarning` naming both paths, and a fresh file takes its
  place (:func:`open_sqlite`, :func:`replace_corrupt_sqlite`). Replacing holds the file lock, unless this thread
  already holds it (the one path honours a held lock: taking it again would wait for itself), and compares the
  file's identity (device, inode) with the one that failed, so two processes never move aside each other's fresh
  file.

Why not ``diskcache``: it is SQLite too, but it neither recovers from a corrupt file (it raises
``sqlite3.DatabaseError``) nor offers a cross-process compute-once lock, and it pickles values; the caches here
store JSON or float32 bytes in files whose names, schemas and recovery the tests pin. See docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from retrieval_pipeline.core.common.atomic import CorruptFileWarning, FileIdentity, file_identity, file_lock, move_aside
from retrieval_pipeline.core.common.closing import Closing

_T = TypeVar("_T")

#: SQLite's primary result codes for "this file is damaged" (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``).
_CORRUPT_CODES = frozenset({11, 26})
_CORRUPT_MESSAGES = ("file is not a database", "database disk image is malformed", "file is encrypted or is not a database")


class SQLiteStore(Closing):
    """One SQLite file (one table, WAL mode), its connection, its file lock and its corrupt-file recovery.

    Args:
        path: The database file (created with its folder if missing; moved aside and recreated if corrupt).
        schema: The ``CREATE TABLE IF NOT EXISTS`` statement of its table.
        table: The table's name (read once when opening, so a file that is no database fails at open).
        what: What the file is, for the warnings (``"embedding cache"``).
        timeout: Seconds to wait for another process's SQLite write lock before failing.
        synchronous: SQLite's ``synchronous`` pragma (``FULL``: a commit survives a power cut).
        open_now: Open the file now (a corrupt one is replaced now); else on first use, so a store that is
            never used never creates its file.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        schema: str,
        table: str,
        what: str,
        timeout: float,
        synchronous: str = "NORMAL",
        open_now: bool = True,
    ) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.what = what
        self._schema, self._table, self._timeout, self._synchronous = schema, table, timeout, synchronous
        self._lock = threading.Lock()  # guards the connection; always taken AFTER the file lock, never before
        self._held = threading.local()  # .file_lock: this thread holds the file lock
        self._conn: sqlite3.Connection | None = None
        self._identity: FileIdentity | None = None
        if open_now:
            self._connection()

    @contextlib.contextmanager
    def file_locked(self) -> Iterator[None]:
        """Hold ``<file>.lock`` for the block (one open per use, so threads exclude each other too)."""
        with file_lock(self.lock_path):
            self._held.file_lock = True
            try:
                yield
            finally:
                self._held.file_lock = False

    def run(self, op: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``op`` on the connection; if the file turns out corrupt, replace it once and run ``op`` again."""
        conn = self._connection()
        with self._lock:
            try:
                return op(conn)
            except sqlite3.DatabaseError as error:
                if not is_corrupt_sqlite_error(error):
                    raise
                failure = error
        holding = getattr(self._held, "file_lock", False)
        with contextlib.nullcontext() if holding else file_lock(self.lock_path), self._lock:
            current = self._conn
            if current is conn or current is None:  # not replaced by another thread meanwhile
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
                current, self._identity = replace_corrupt_sqlite(self.path, self._open, seen=self._identity, error=failure, what=self.what)
                self._conn = current
            return op(current)

    def write_many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Run one statement for every row, in one ``BEGIN IMMEDIATE`` transaction (all rows or none)."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

        self.run(run)

    def close(self) -> None:
        """Close the connection, if open (the file stays; a later use opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection:
        """The open connection, opened on first use (takes the file lock: never call it holding the connection lock)."""
        with self._lock:
            if self._conn is not None:
                return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn, identity = open_sqlite(self.path, self._open, what=self.what, lock_path=self.lock_path)
        with self._lock:
            if self._conn is None:
                self._conn, self._identity = conn, identity
            else:  # another thread opened it meanwhile
                conn.close()
            return self._conn

    def _open(self, path: Path) -> sqlite3.Connection:
        return connect_wal(path, self._timeout, self._schema, self._table, synchronous=self._synchronous)


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
