"""SQLite cache of validated LLM answers, keyed by a hash of the request.

One row per finished call: the validated JSON value, the model that produced it, its token usage
and when it was stored. The database runs in WAL mode with a busy timeout, so several processes
may share the file; inside a process one connection is shared behind a lock, so any thread may use
the cache. Every ``put`` commits at once: a crash loses no finished call.

A file SQLite rejects as corrupt ("file is not a database", "database disk image is malformed"), when
opened or later, is renamed to ``<file>.corrupt-<UTC timestamp>`` with a
:class:`~retrieval_pipeline.core.common.atomic.CorruptFileWarning` naming both paths, and a fresh cache takes
its place (see :mod:`retrieval_pipeline.core.common.atomic`): the answers in it are asked again.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar

from retrieval_pipeline.core.common.atomic import connect_wal, file_lock, is_corrupt_sqlite_error, open_sqlite, replace_corrupt_sqlite
from retrieval_pipeline.core.common.closing import Closing

_T = TypeVar("_T")
#: What the warning about a corrupt file calls it.
_WHAT = "LLM cache"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class CachedEntry:
    """One stored answer: the validated value and the usage it cost when it was produced."""

    value: dict[str, Any]
    model: str
    prompt_tokens: int
    completion_tokens: int
    created_at: str


class CacheableCall(Protocol):
    """What ``LLMCache.put`` reads from a finished call (``LLMCall`` satisfies it)."""

    value: dict[str, Any] | None
    model: str
    prompt_tokens: int
    completion_tokens: int


class LLMCache(Closing):
    """Key → validated JSON answer, persisted in a SQLite file.

    Args:
        path: The database file; its parent directory is created.
        busy_timeout_s: How long a writer waits for another process's lock before failing.
    """

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_path = self.path.with_name(self.path.name + ".lock")  # only used to replace a corrupt file
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn, self._identity = open_sqlite(self.path, self._open, what=_WHAT, lock_path=self._lock_path)

    def get(self, key: str) -> CachedEntry | None:
        """Return the stored answer for ``key``, or None when there is none."""
        row = self._guarded(
            lambda conn: conn.execute(
                "SELECT value, model, prompt_tokens, completion_tokens, created_at FROM llm_cache WHERE key = ?",
                (key,),
            ).fetchone()
        )
        if row is None:
            return None
        value, model, prompt_tokens, completion_tokens, created_at = row
        return CachedEntry(json.loads(value), model, int(prompt_tokens), int(completion_tokens), created_at)

    def put(self, key: str, call: CacheableCall) -> None:
        """Store a validated call under ``key`` and commit at once.

        Raises:
            ValueError: If the call carries no value (failures are never cached).
        """
        if call.value is None:
            raise ValueError("only validated answers are cached; this call has no value")
        row = (
            key,
            json.dumps(call.value, sort_keys=True, ensure_ascii=False),
            call.model,
            int(call.prompt_tokens),
            int(call.completion_tokens),
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        self._guarded(lambda conn: conn.execute("INSERT OR REPLACE INTO llm_cache VALUES (?, ?, ?, ?, ?, ?)", row))

    def count(self) -> int:
        """Return the number of stored answers."""
        (n,) = self._guarded(lambda conn: conn.execute("SELECT COUNT(*) FROM llm_cache").fetchone())
        return int(n)

    def close(self) -> None:
        """Close the connection; the cache is unusable afterwards."""
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"LLMCache(path={str(self.path)!r})"

    def _open(self, path: Path) -> sqlite3.Connection:
        """Open (and prepare) the cache file."""
        return connect_wal(path, self._busy_timeout_s, _SCHEMA, "llm_cache", synchronous="FULL")

    def _guarded(self, op: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``op`` on the connection; if the file turns out corrupt, replace it once and run ``op`` again."""
        with self._lock:
            try:
                return op(self._conn)
            except sqlite3.DatabaseError as error:
                if not is_corrupt_sqlite_error(error):
                    raise
                failed, failure = self._conn, error
        with file_lock(self._lock_path), self._lock:  # file lock first, then the connection lock
            if self._conn is failed:  # not replaced by another thread meanwhile
                with contextlib.suppress(sqlite3.Error):
                    failed.close()
                self._conn, self._identity = replace_corrupt_sqlite(self.path, self._open, seen=self._identity, error=failure, what=_WHAT)
            return op(self._conn)
