"""A persistent embedding cache: never embed an unchanged text twice.

Embedding is the slow step (all-MiniLM-L6-v2 does ~20 passages/s on this machine), so vectors are kept
in one SQLite file keyed by ``(model_id, sha256(text))``:

.. math::  \\text{key}(t) = (\\text{model\\_id},\\; \\mathrm{SHA256}(\\mathrm{utf8}(t))), \\qquad
           \\text{value} = \\text{float32 little-endian bytes of } E(t) \\in \\mathbb{R}^{d}.

A changed text has a new hash, hence a new entry; an unchanged one is read back bit-for-bit.

Crash safety: the missing texts are embedded in chunks of ``batch_size x BATCHES_PER_COMMIT`` texts
(the encoder's ``batch_size``, :data:`DEFAULT_BATCH_SIZE` if it has none), and every chunk is committed
as soon as it is embedded, so a killed process loses at most the chunk in progress; the next run
embeds only what is still missing.

Concurrency (the locking and recovery are :class:`~retrieval_pipeline.core.common.cache.sqlite_store.SQLiteStore`'s,
shared with the other caches): the file is opened in WAL mode (readers never block the writer) with a busy timeout, and
each chunk is written in one ``BEGIN IMMEDIATE`` transaction with ``INSERT OR IGNORE``. Around
"look up the chunk again, embed what is still missing, store it" each call holds the file lock
on ``<cache>.lock`` (:func:`~retrieval_pipeline.core.common.atomic.file_lock`): two processes (or threads) filling one cache with the same texts take turns
chunk by chunk, and the second finds the first one's chunks already stored, so every text is embedded
once. The lock is released between chunks; a killed holder releases it at once (the kernel drops it).

Corruption: a cache file that SQLite rejects ("file is not a database", "database disk image is
malformed"), when opened or later, is renamed to ``<cache>.corrupt-<UTC timestamp>`` with a
:class:`~retrieval_pipeline.core.common.atomic.CorruptFileWarning` naming both paths, and a fresh cache takes
its place (see :mod:`retrieval_pipeline.core.common.cache.sqlite_store`); the lost vectors are embedded again on demand.
A single damaged entry (a blob whose length disagrees with its ``dim``, or a vector holding NaN or an
infinity, which would silently drop its document from dense results) is deleted when it is read and embedded
again, with a :class:`~retrieval_pipeline.core.common.atomic.CorruptFileWarning` naming the cache file; an encoder
that returns such a vector is an error (nothing is stored).
"""

from __future__ import annotations

import hashlib
import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.sqlite_store import SQLiteStore
from retrieval_pipeline.core.common.closing import Closing
from retrieval_pipeline.core.common.progress import ProgressCallback
from retrieval_pipeline.core.retrieval.models.encoders import Encoder

#: Vectors are stored as little-endian float32.
_DTYPE = np.dtype("<f4")
#: Keys per ``IN (...)`` lookup; well under SQLite's bound-parameter limit.
_LOOKUP_CHUNK = 900
#: Encoder batches embedded per committed chunk: a killed run loses at most this many batches' work.
BATCHES_PER_COMMIT = 4
#: Batch size assumed for an encoder without a ``batch_size`` attribute.
DEFAULT_BATCH_SIZE = 32
#: What the warning about a corrupt file calls it.
_WHAT = "embedding cache"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model_id    TEXT    NOT NULL,
    text_sha256 TEXT    NOT NULL,
    dim         INTEGER NOT NULL,
    vector      BLOB    NOT NULL,
    PRIMARY KEY (model_id, text_sha256)
)
"""
# A rowid table on purpose: WITHOUT ROWID stores ~1.5 KiB blobs inside the B-tree and tripled the file
# size in a 10k x 384 probe (47 MB instead of ~16 MB).


def text_key(text: str) -> str:
    """The cache key of a text: the hex SHA-256 of its UTF-8 bytes.

    Args:
        text: Any text.

    Returns:
        64 hex characters.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheStats:
    """What one :meth:`EmbeddingCache.get_or_encode` call did, counted over DISTINCT texts.

    Attributes:
        hits: Distinct texts read from the cache.
        misses: Distinct texts embedded now (and written to the cache).
    """

    hits: int
    misses: int

    @property
    def distinct(self) -> int:
        """``hits + misses``: the number of distinct texts in the call."""
        return self.hits + self.misses


class EmbeddingCache(Closing):
    """Embeddings in a SQLite file, keyed by ``(model_id, sha256(text))``.

    Args:
        path: The SQLite file (created with its parent folder if missing; moved aside and recreated if
            corrupt).
        timeout: Seconds to wait for another process's SQLite write lock before failing.
        commit_every: Texts embedded and committed per chunk; default ``batch_size x BATCHES_PER_COMMIT``
            of the encoder in each call.
    """

    def __init__(self, path: Path, timeout: float = 60.0, *, commit_every: int | None = None) -> None:
        if commit_every is not None and commit_every < 1:
            raise ValueError(f"commit_every must be >= 1, got {commit_every}")
        self.commit_every = commit_every
        self._store = SQLiteStore(path, schema=_SCHEMA, table="embeddings", what=_WHAT, timeout=timeout)
        self.path = self._store.path
        self.lock_path = self._store.lock_path

    # -- public API ------------------------------------------------------------------------------

    def get_or_encode(
        self, encoder: Encoder, texts: Sequence[str], progress: ProgressCallback | None = None
    ) -> tuple[np.ndarray, CacheStats]:
        """Vectors for ``texts``, embedding only the ones not cached yet, committing chunk by chunk.

        Texts are de-duplicated by hash; the missing distinct ones go to ``encoder.encode`` in chunks of
        :meth:`chunk_size` texts (no call when everything is cached, so the model is not even loaded).
        Each chunk is looked up again, embedded and committed under the cache's file lock, so a chunk
        another process stored meanwhile is read instead of embedded, and a killed run keeps every
        committed chunk.

        Args:
            encoder: The encoder; its ``model_id`` selects the cache entries.
            texts: The texts, in order (duplicates allowed).
            progress: Called as ``progress(done, total)`` over the missing distinct texts after each chunk.

        Returns:
            ``(vectors, stats)``: an ``(len(texts), dim)`` float32 array in input order, and
            :class:`CacheStats` over distinct texts (``misses``: embedded by this call).

        Raises:
            ValueError: If the encoder returns the wrong shape, or a dimension that disagrees with the
                vectors already cached for its ``model_id``.
        """
        keys = [text_key(t) for t in texts]
        first_text = dict(zip(keys, texts))  # distinct key -> text, in first-seen order
        found = self.lookup(encoder.model_id, list(first_text))
        missing = [k for k in first_text if k not in found]
        embedded = done = 0
        for chunk in _chunks(missing, self.chunk_size(encoder)):
            stop.check()  # a signal to the runner stops the embedding between chunks (each chunk is committed)
            with self._store.file_locked():
                stored_meanwhile = self.lookup(encoder.model_id, chunk)
                todo = [k for k in chunk if k not in stored_meanwhile]
                found.update(stored_meanwhile)
                if todo:
                    found.update(self._encode_and_store(encoder, [first_text[k] for k in todo], todo))
            embedded += len(todo)
            done += len(chunk)
            if progress is not None:
                progress(done, len(missing))
        stats = CacheStats(hits=len(first_text) - embedded, misses=embedded)
        return _assemble(keys, found, encoder), stats

    def chunk_size(self, encoder: Encoder) -> int:
        """Texts embedded and committed together: ``commit_every``, or the encoder's batch size x a few.

        Args:
            encoder: The encoder of the call.

        Returns:
            A positive count.
        """
        if self.commit_every is not None:
            return self.commit_every
        batch = getattr(encoder, "batch_size", None)
        batch = batch if isinstance(batch, int) and batch > 0 else DEFAULT_BATCH_SIZE
        return batch * BATCHES_PER_COMMIT

    def lookup(self, model_id: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the given text keys (see :func:`text_key`); absent keys are left out.

        Args:
            model_id: The encoder's ``model_id``.
            keys: Text keys.

        Returns:
            ``{key: float32 vector}`` for the keys present. A damaged entry (see :func:`_damage`) is deleted
            and left out, so it is embedded again; a :class:`CorruptFileWarning` names the cache file.
        """

        def run(conn: sqlite3.Connection) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
            found: dict[str, np.ndarray] = {}
            damaged: list[tuple[str, str]] = []
            for chunk in _chunks(list(keys), _LOOKUP_CHUNK):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT text_sha256, dim, vector FROM embeddings WHERE model_id = ? AND text_sha256 IN ({marks})",
                    (model_id, *chunk),
                ).fetchall()
                for key, dim, blob in rows:
                    why = _damage(blob, dim)
                    if why is None:
                        found[key] = _decode(blob, dim)
                    else:
                        damaged.append((key, why))
            if damaged:
                conn.executemany("DELETE FROM embeddings WHERE model_id = ? AND text_sha256 = ?", [(model_id, k) for k, _ in damaged])
            return found, damaged

        found, damaged = self._store.run(run)
        if damaged:
            warnings.warn(
                f"{_WHAT} {self.path}: {len(damaged)} damaged vector(s) of model {model_id!r} deleted, to be embedded again"
                f" (text sha256 {damaged[0][0][:12]}...: {damaged[0][1]})",
                CorruptFileWarning,
                stacklevel=2,
            )
        return found

    def store(self, model_id: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Write vectors in one transaction (``INSERT OR IGNORE``: existing entries are kept).

        Args:
            model_id: The encoder's ``model_id``.
            keys: Text keys, one per row of ``vectors``.
            vectors: A 2-D array.
        """
        matrix = np.ascontiguousarray(vectors, dtype=_DTYPE)
        if matrix.ndim != 2 or matrix.shape[0] != len(keys):
            raise ValueError(f"store: {len(keys)} keys but vectors of shape {matrix.shape}")
        dim = int(matrix.shape[1])
        rows = [(model_id, key, dim, matrix[i].tobytes()) for i, key in enumerate(keys)]
        self._store.write_many("INSERT OR IGNORE INTO embeddings (model_id, text_sha256, dim, vector) VALUES (?, ?, ?, ?)", rows)

    def count(self, model_id: str | None = None) -> int:
        """Number of cached vectors, for one model or all.

        Args:
            model_id: Restrict to this model; ``None`` counts everything.

        Returns:
            The row count.
        """
        if model_id is None:
            (n,) = self._store.run(lambda conn: conn.execute("SELECT COUNT(*) FROM embeddings").fetchone())
        else:
            (n,) = self._store.run(lambda conn: conn.execute("SELECT COUNT(*) FROM embeddings WHERE model_id = ?", (model_id,)).fetchone())
        return int(n)

    def close(self) -> None:
        """Close the connection (the file stays)."""
        self._store.close()

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.path)!r})"

    # -- helpers ---------------------------------------------------------------------------------

    def stored_dim(self, model_id: str) -> int | None:
        """The dimension of the vectors cached for ``model_id``, or ``None`` if there are none."""
        row = self._store.run(lambda conn: conn.execute("SELECT dim FROM embeddings WHERE model_id = ? LIMIT 1", (model_id,)).fetchone())
        return None if row is None else int(row[0])

    def _encode_and_store(self, encoder: Encoder, texts: list[str], keys: list[str]) -> dict[str, np.ndarray]:
        """Embed one chunk of missing distinct texts in one call, check the result, store it, return it by key."""
        vectors = np.asarray(encoder.encode(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"{encoder.model_id}: encode({len(texts)} texts) returned shape {vectors.shape}")
        bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        if bad.size:
            raise ValueError(
                f"{encoder.model_id}: encode returned NaN or infinite values for {bad.size} of {len(texts)} texts"
                f" (the first: {texts[int(bad[0])][:80]!r}); nothing of this chunk was cached in {self.path}"
            )
        known = self.stored_dim(encoder.model_id)
        if known is not None and known != vectors.shape[1]:
            raise ValueError(
                f"{encoder.model_id}: new vectors have dim {vectors.shape[1]} but the cache at {self.path} "
                f"holds dim {known} for this model_id (one id used for two different models?)"
            )
        self.store(encoder.model_id, keys, vectors)
        return {key: vectors[i] for i, key in enumerate(keys)}


def _damage(blob: object, dim: object) -> str | None:
    """Why a stored entry cannot be used (a blob of the wrong length, NaN or infinite values), or None."""
    if not isinstance(dim, int) or dim < 1 or not isinstance(blob, bytes):
        return f"dim {dim!r} and a {type(blob).__name__} stored"
    if len(blob) != dim * _DTYPE.itemsize:
        return f"{len(blob)} bytes stored, dim {dim} needs {dim * _DTYPE.itemsize}"
    if not np.isfinite(np.frombuffer(blob, dtype=_DTYPE)).all():
        return "NaN or infinite values stored"
    return None


def _decode(blob: bytes, dim: int) -> np.ndarray:
    """A stored blob back to a float32 vector, checking its length."""
    vector = np.frombuffer(blob, dtype=_DTYPE)
    if vector.shape[0] != dim:
        raise ValueError(f"corrupt cache entry: {vector.shape[0]} floats stored, dim says {dim}")
    return vector.astype(np.float32)


def _assemble(keys: list[str], vectors: dict[str, np.ndarray], encoder: Encoder) -> np.ndarray:
    """Stack vectors in input order (an empty input asks the encoder for its dim)."""
    if not keys:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.stack([vectors[k] for k in keys]).astype(np.float32, copy=False)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
