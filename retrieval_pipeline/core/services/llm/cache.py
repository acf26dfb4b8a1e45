"""SQLite cache of validated LLM answers, keyed by a hash of the request.

One row per finished call: the validated JSON value, the model that produced it, its token usage
and when it was stored. The database runs in WAL mode with a busy timeout, so several processes
may share the file; inside a process one connection is shared behind a lock, so any thread may use
the cache. Every ``put`` commits at once: a crash loses no finished call.

A file SQLite rejects as corrupt ("file is not a database", "database disk image is malformed"), when
opened or later, is renamed to ``<file>.corrupt-<UTC timestamp>`` with a
:class:`~retrieval_pipeline.core.common.atomic.CorruptFileWarning` naming both paths, and a fresh cache takes
its place: the answers in it are asked again. The locking and recovery are
:class:`~retrieval_pipeline.core.common.cache.sqlite_store.SQLiteStore`'s, shared with the other caches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from retrieval_pipeline.core.common.cache.sqlite_store import SQLiteStore
from retrieval_pipeline.core.common.closing import Closing

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
        self._store = SQLiteStore(path, schema=_SCHEMA, table="llm_cache", what=_WHAT, timeout=busy_timeout_s, synchronous="FULL")
        self.path = self._store.path

    def get(self, key: str) -> CachedEntry | None:
        """Return the stored answer for ``key``, or None when there is none."""
        row = self._store.run(
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
        self._store.run(lambda conn: conn.execute("INSERT OR REPLACE INTO llm_cache VALUES (?, ?, ?, ?, ?, ?)", row))

    def count(self) -> int:
        """Return the number of stored answers."""
        (n,) = self._store.run(lambda conn: conn.execute("SELECT COUNT(*) FROM llm_cache").fetchone())
        return int(n)

    def close(self) -> None:
        """Close the connection (a later use opens it again)."""
        self._store.close()

    def __repr__(self) -> str:
        return f"LLMCache(path={str(self.path)!r})"
