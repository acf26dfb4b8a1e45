"""A persistent embedding cache: never embed an unchanged text twice.

Embedding is the slow step (all-MiniLM-L6-v2 does ~20 passages/s on this machine), so vectors are kept
in one SQLite file keyed by ``(model_id, sha256(text))``:

.. math::  \\text{key}(t) = (\\text{model\\_id},\\; \\mathrm{SHA256}(\\mathrm{utf8}(t))), \\qquad
           \\text{value} = \\text{float32 little-endian bytes of } E(t) \\in \\mathbb{R}^{d}.

A changed text has a new hash, hence a new entry; an unchanged one is read back bit-for-bit.

Concurrency: the file is opened in WAL mode (readers never block the writer) with a busy timeout,
and each batch of new vectors is written in one ``BEGIN IMMEDIATE`` transaction with
``INSERT OR IGNORE``, so two processes may fill the same cache at once (if both embed the same new
text, the first row wins; both rows are the same vector anyway).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval_pipeline.core.closing import Closing
from retrieval_pipeline.core.retrieval.encoders import Encoder

#: Vectors are stored as little-endian float32.
_DTYPE = np.dtype("<f4")
#: Keys per ``IN (...)`` lookup; well under SQLite's bound-parameter limit.
_LOOKUP_CHUNK = 900

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
        path: The SQLite file (created with its parent folder if missing).
        timeout: Seconds to wait for another process's write lock before failing.
    """

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = _connect(self.path, timeout)

    # -- public API ------------------------------------------------------------------------------

    def get_or_encode(self, encoder: Encoder, texts: Sequence[str]) -> tuple[np.ndarray, CacheStats]:
        """Vectors for ``texts``, embedding only the ones not cached yet.

        Texts are de-duplicated by hash; the missing distinct ones go to ``encoder.encode`` in ONE call
        (none when everything is cached, so the model is not even loaded), and are written in ONE
        transaction.

        Args:
            encoder: The encoder; its ``model_id`` selects the cache entries.
            texts: The texts, in order (duplicates allowed).

        Returns:
            ``(vectors, stats)``: an ``(len(texts), dim)`` float32 array in input order, and
            :class:`CacheStats` over distinct texts.

        Raises:
            ValueError: If the encoder returns the wrong shape, or a dimension that disagrees with the
                vectors already cached for its ``model_id``.
        """
        keys = [text_key(t) for t in texts]
        first_text = dict(zip(keys, texts))  # distinct key -> text, in first-seen order
        found = self.lookup(encoder.model_id, list(first_text))
        missing = [k for k in first_text if k not in found]
        if missing:
            found.update(self._encode_and_store(encoder, [first_text[k] for k in missing], missing))
        stats = CacheStats(hits=len(first_text) - len(missing), misses=len(missing))
        return _assemble(keys, found, encoder), stats

    def lookup(self, model_id: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the given text keys (see :func:`text_key`); absent keys are left out.

        Args:
            model_id: The encoder's ``model_id``.
            keys: Text keys.

        Returns:
            ``{key: float32 vector}`` for the keys present.
        """
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for chunk in _chunks(list(keys), _LOOKUP_CHUNK):
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT text_sha256, dim, vector FROM embeddings WHERE model_id = ? AND text_sha256 IN ({marks})",
                    (model_id, *chunk),
                )
                for key, dim, blob in rows:
                    found[key] = _decode(blob, dim)
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
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO embeddings (model_id, text_sha256, dim, vector) VALUES (?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def count(self, model_id: str | None = None) -> int:
        """Number of cached vectors, for one model or all.

        Args:
            model_id: Restrict to this model; ``None`` counts everything.

        Returns:
            The row count.
        """
        with self._lock:
            if model_id is None:
                (n,) = self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()
            else:
                (n,) = self._conn.execute("SELECT COUNT(*) FROM embeddings WHERE model_id = ?", (model_id,)).fetchone()
        return int(n)

    def close(self) -> None:
        """Close the connection (the file stays)."""
        with self._lock:
            self._conn.close()


    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.path)!r})"

    # -- helpers ---------------------------------------------------------------------------------

    def stored_dim(self, model_id: str) -> int | None:
        """The dimension of the vectors cached for ``model_id``, or ``None`` if there are none."""
        with self._lock:
            row = self._conn.execute("SELECT dim FROM embeddings WHERE model_id = ? LIMIT 1", (model_id,)).fetchone()
        return None if row is None else int(row[0])

    def _encode_and_store(self, encoder: Encoder, texts: list[str], keys: list[str]) -> dict[str, np.ndarray]:
        """Embed the missing distinct texts in one call, check the result, store it, return it by key."""
        vectors = np.asarray(encoder.encode(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"{encoder.model_id}: encode({len(texts)} texts) returned shape {vectors.shape}")
        known = self.stored_dim(encoder.model_id)
        if known is not None and known != vectors.shape[1]:
            raise ValueError(
                f"{encoder.model_id}: new vectors have dim {vectors.shape[1]} but the cache at {self.path} "
                f"holds dim {known} for this model_id (one id used for two different models?)"
            )
        self.store(encoder.model_id, keys, vectors)
        return {key: vectors[i] for i, key in enumerate(keys)}


def _connect(path: Path, timeout: float) -> sqlite3.Connection:
    """Open the cache file in autocommit + WAL mode with a busy timeout, and create the table."""
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(_SCHEMA)
    return conn


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
