"""A persistent cache of computed results, keyed by the content of their inputs: never stale by construction.

A stage whose result is a pure function of its inputs stores it under a **content key**, the SHA-256 of the
canonical JSON of everything the result depends on (:func:`content_key`): the input data itself (not a
path or a timestamp), the settings, and a version string of the algorithm that the code bumps whenever the
result would change. Any change of input, setting or algorithm gives a new key, hence a miss; an unchanged
input gives the same key and the stored result back, exactly (JSON keeps strings, ints and floats bit for
bit: Python writes the shortest ``repr`` that reads back to the same float).

Storage: one SQLite file (``<cache_dir>/results.sqlite``), rows ``(namespace, key, payload, sha256)``;
``payload`` is the JSON text of the value and ``sha256`` its checksum.

Safety, as for every cache of the project (the locking and recovery are
:class:`~retrieval_pipeline.core.common.cache.sqlite_store.SQLiteStore`'s):

* **Atomic.** Each entry is written in one SQLite transaction (WAL mode): a reader sees it whole or not at
  all, also when the writer is killed.
* **Computed once.** :meth:`ResultCache.get_or_compute` looks the key up, and on a miss takes the
  file lock on ``<cache>.lock`` (:func:`~retrieval_pipeline.core.common.atomic.file_lock`), looks again (another process may have stored it meanwhile),
  computes and stores, so two processes never compute one entry twice; a killed holder releases the lock.
* **Corrupt entries are recomputed, never trusted.** A payload whose checksum does not match, that is not
  JSON, or that the caller's ``decode`` rejects is deleted with a
  :class:`~retrieval_pipeline.core.common.atomic.CorruptFileWarning` and treated as a miss.
* **Corrupt files are replaced.** A file SQLite rejects is moved aside to ``<cache>.corrupt-<UTC timestamp>``
  with a warning and a fresh one is started (:func:`~retrieval_pipeline.core.common.cache.sqlite_store.open_sqlite`).

A Dagster asset makes a cache available to the domain code below it for the duration of a block with
:func:`using_result_cache`; code that finds none (:func:`active_result_cache` returns None) computes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.sqlite_store import SQLiteStore
from retrieval_pipeline.core.common.closing import Closing

#: The cache file's name inside the cache folder.
RESULTS_FILE = "results.sqlite"
#: What the warning about a corrupt file calls it.
_WHAT = "result cache"
#: Keys per ``IN (...)`` lookup; well under SQLite's bound-parameter limit.
_LOOKUP_CHUNK = 900

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    payload   TEXT NOT NULL,
    sha256    TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
)
"""


class CorruptEntryError(ValueError):
    """A stored payload failed a check (checksum, JSON, or the caller's decoder)."""


def canonical_json(value: Any) -> str:
    """The one JSON text of a value: keys sorted, no spaces, UTF-8 kept, NaN and infinities refused.

    Args:
        value: JSON-serialisable data (dicts, lists, tuples, strings, numbers, bools, None).

    Returns:
        The JSON text.

    Raises:
        TypeError: A value is not JSON-serialisable.
        ValueError: A float is NaN or infinite (its JSON would not be standard, nor read back equal).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_key(*parts: Any) -> str:
    """The content key of a result: the hex SHA-256 of the canonical JSON of everything it depends on.

    Args:
        *parts: The algorithm's version string, the settings, the input data: JSON-serialisable values.
            Order matters; dict key order does not.

    Returns:
        64 hex characters.
    """
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _checksum(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResultCache(Closing):
    """JSON results in a SQLite file, keyed by ``(namespace, content key)``.

    The file is opened on first use, so a stage that finds everything it needs elsewhere never creates it.

    Args:
        path: The SQLite file (created with its folder if missing; moved aside and recreated if corrupt).
        timeout: Seconds to wait for another process's SQLite write lock before failing.
    """

    def __init__(self, path: str | Path, timeout: float = 60.0) -> None:
        self._store = SQLiteStore(path, schema=_SCHEMA, table="results", what=_WHAT, timeout=timeout, open_now=False)
        self.path = self._store.path
        self.lock_path = self._store.lock_path

    # -- public API ------------------------------------------------------------------------------

    def get_or_compute(
        self,
        namespace: str,
        key: str,
        compute: Callable[[], _T],
        *,
        encode: Callable[[_T], Any] = lambda value: value,
        decode: Callable[[Any], _T] = lambda data: data,
    ) -> tuple[_T, bool]:
        """The stored result for ``key``, or ``compute()`` stored under it; says which.

        Args:
            namespace: The kind of result (e.g. ``"context_pairs"``), so stages never share keys.
            key: The content key (:func:`content_key`) of the inputs.
            compute: Makes the result; called at most once, only on a miss.
            encode: The result as JSON-serialisable data.
            decode: The data back to the result; raising ``KeyError``, ``TypeError`` or ``ValueError``
                marks the entry corrupt (it is deleted and recomputed).

        Returns:
            ``(result, hit)``: ``hit`` is True when the result was read from the cache.
        """
        found = self._read(namespace, key, decode)  # also opens the file, before the file lock is taken
        if found is not None:
            return found[0], True
        with self._store.file_locked():
            found = self._read(namespace, key, decode)
            if found is not None:
                return found[0], True
            value = compute()
            self.put(namespace, key, encode(value))
        return value, False

    def get(self, namespace: str, key: str) -> tuple[Any] | None:
        """The stored data for ``key`` as a 1-tuple (so a stored ``None`` is told from a miss), else None.

        A corrupt entry is deleted, with a warning, and reported as a miss.
        """
        return self._read(namespace, key, lambda data: data)

    def put(self, namespace: str, key: str, data: Any) -> None:
        """Store JSON-serialisable data under ``key`` in one transaction (replacing any entry).

        Raises:
            TypeError, ValueError: ``data`` is not JSON-serialisable (see :func:`canonical_json`).
        """
        payload = canonical_json(data)
        self._store.write_many("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)", [(namespace, key, payload, _checksum(payload))])

    def get_many(self, namespace: str, keys: Sequence[str], *, decode: Callable[[Any], _T] = lambda data: data) -> dict[str, _T]:
        """The sound stored entries among ``keys``, decoded; missing and corrupt ones (deleted, warned) are left out.

        Args:
            namespace: The kind of result.
            keys: Content keys.
            decode: As for :meth:`get_or_compute`.

        Returns:
            ``{key: decoded value}`` for the keys found.
        """
        found: dict[str, _T] = {}
        for chunk in _chunks(list(dict.fromkeys(keys)), _LOOKUP_CHUNK):
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT key, payload, sha256 FROM results WHERE namespace = ? AND key IN ({marks})"
            for key, payload, checksum in self._store.run(
                lambda conn, sql=sql, chunk=chunk: conn.execute(sql, (namespace, *chunk)).fetchall()
            ):
                value = self._checked(namespace, key, payload, checksum, decode)
                if value is not None:
                    found[key] = value[0]
        return found

    def put_many(self, namespace: str, items: Mapping[str, Any]) -> None:
        """Store ``{key: JSON-serialisable data}`` in one transaction (a no-op when empty).

        Raises:
            TypeError, ValueError: A value is not JSON-serialisable (see :func:`canonical_json`); nothing is stored.
        """
        rows = [(namespace, key, payload, _checksum(payload)) for key, payload in ((k, canonical_json(v)) for k, v in items.items())]
        if rows:
            self._store.write_many("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)", rows)

    def count(self, namespace: str | None = None) -> int:
        """Number of stored entries, in one namespace or all."""
        where, args = ("WHERE namespace = ?", (namespace,)) if namespace is not None else ("", ())
        (n,) = self._store.run(lambda conn: conn.execute(f"SELECT COUNT(*) FROM results {where}", args).fetchone())
        return int(n)

    def close(self) -> None:
        """Close the connection, if open (the file stays)."""
        self._store.close()

    def __repr__(self) -> str:
        return f"ResultCache({str(self.path)!r})"

    # -- helpers ---------------------------------------------------------------------------------

    def _read(self, namespace: str, key: str, decode: Callable[[Any], _T]) -> tuple[_T] | None:
        """``(decode(data),)`` for a sound entry; None for a missing one or a corrupt one (deleted, warned)."""
        row = self._store.run(
            lambda conn: conn.execute("SELECT payload, sha256 FROM results WHERE namespace = ? AND key = ?", (namespace, key)).fetchone()
        )
        return None if row is None else self._checked(namespace, key, row[0], row[1], decode)

    def _checked(self, namespace: str, key: str, payload: str, checksum: str, decode: Callable[[Any], _T]) -> tuple[_T] | None:
        """``(decode(data),)`` for a sound entry; None for a corrupt one, which is deleted with a warning."""
        try:
            return (_decode_entry(payload, checksum, decode),)
        except CorruptEntryError as problem:
            warnings.warn(
                f"{_WHAT} {self.path}: entry {namespace}/{key} is corrupt ({problem}); recomputing it", CorruptFileWarning, stacklevel=4
            )
            self._store.write_many("DELETE FROM results WHERE namespace = ? AND key = ?", [(namespace, key)])
            return None


def _decode_entry(payload: str, checksum: str, decode: Callable[[Any], _T]) -> _T:
    """Check and decode one stored payload.

    Raises:
        CorruptEntryError: The checksum does not match, the payload is not JSON, or ``decode`` rejects it.
    """
    if _checksum(payload) != checksum:
        raise CorruptEntryError("checksum mismatch")
    try:
        return decode(json.loads(payload))
    except (KeyError, TypeError, ValueError) as error:  # json.JSONDecodeError is a ValueError
        raise CorruptEntryError(f"{type(error).__name__}: {error}") from error


# --------------------------------------------------------------------------------------------------
# The cache of the running stage
# --------------------------------------------------------------------------------------------------

_ACTIVE: ContextVar[ResultCache | None] = ContextVar("active_result_cache", default=None)


@contextlib.contextmanager
def using_result_cache(cache_dir: str | Path) -> Iterator[ResultCache]:
    """Make ``<cache_dir>/results.sqlite`` the active result cache for the block (this thread/task only).

    Domain code reached through interfaces that cannot carry a cache (a dataset kind's pair builder, say)
    asks :func:`active_result_cache`. The file is opened on first use and closed at the block's end.

    Args:
        cache_dir: The project's cache folder (``PipelineSettings.cache_path()``).

    Yields:
        The cache.
    """
    with ResultCache(Path(cache_dir) / RESULTS_FILE) as cache:
        token = _ACTIVE.set(cache)
        try:
            yield cache
        finally:
            _ACTIVE.reset(token)


def active_result_cache() -> ResultCache | None:
    """The cache made active by the enclosing :func:`using_result_cache`, or None outside one."""
    return _ACTIVE.get()
