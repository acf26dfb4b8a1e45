"""Dense retrieval: cosine search over sentence embeddings in FAISS, exact (flat) or, on large corpora, HNSW.

Documents and queries are embedded by an :class:`~retrieval_pipeline.core.retrieval.models.encoders.Encoder`
into unit vectors, so the inner product IS the cosine similarity:

.. math::  \\mathrm{score}(q, d) = E(q) \\cdot E(d) = \\cos(E(q), E(d)) \\in [-1, 1].

``IndexFlatIP`` is exhaustive (no approximation): 86,000 x 384 builds in 0.1 s and answers a batch
of 1,000 queries in 0.46 s on this machine (``machine-notes.md``).

Ranking is deterministic: score descending, then corpus position ascending. FAISS does not promise
an order among equal scores, nor which of several tied documents survives the cut at ``k``, so the
search fetches past the cut until the ``k``-th score is strictly above the last fetched one, and the
hits are re-sorted by ``(-score, position)``.

Models such as e5 and bge expect a prefix before queries and passages (``"query: "``,
``"passage: "``). The retriever prepends them itself, so the prefixed text is what is embedded and
what the embedding cache is keyed by, and saves them in ``params.json``: a loaded index embeds its
queries exactly as the one that was built.

Index choice by size (:class:`~retrieval_pipeline.core.retrieval.engines.faiss_index.IndexSettings`): exact
``IndexFlatIP`` up to ``flat_max_docs`` documents, an approximate index (HNSW) above; see
:mod:`~retrieval_pipeline.core.retrieval.engines.faiss_index`, which also measures the approximation's recall. The
tie-break still applies to the hits an approximate index returns, but which documents it returns is
approximate. ``params.json`` records the index kind, its parameters, the build seconds with and without
embedding and the serialised index's bytes, and :meth:`DenseRetriever.load` restores ``efSearch``.

Shards and progress: with an embedding cache the corpus is embedded in shards, the cache's committed
chunks of ``batch_size x BATCHES_PER_COMMIT`` texts (see
:mod:`~retrieval_pipeline.core.retrieval.models.embed_cache`). A killed build loses at most the one shard in
progress, and the next build embeds only the shards still missing. ``build(..., progress=...)`` is
called after every committed shard (:class:`~retrieval_pipeline.core.common.progress.Progress` turns those calls
into throttled log lines and a bar on a terminal).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_pipeline.core.common.progress import ProgressCallback
from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.engines.faiss_index import (
    FLAT,
    IndexSettings,
    faiss_threads,
    filled_index,
    index_kind,
    index_settings,
    serialised_bytes,
)
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.models.encoders import Encoder, SentenceTransformerEncoder, l2_normalise

INDEX_FILE = "index.faiss"
DOC_IDS_FILE = "doc_ids.json"
PARAMS_FILE = "params.json"
METRIC = "inner_product"


class EncoderMismatchError(ValueError):
    """A saved index was loaded with an encoder other than the one that built it."""


@dataclass(frozen=True)
class BuildStats:
    """What :meth:`DenseRetriever.build` did.

    The timings and the size are left out of ``==`` (two builds of one corpus are equal).

    Attributes:
        n_docs: Documents indexed.
        embedded_now: Distinct texts embedded by this build (all of them without a cache).
        from_cache: Distinct texts read from the embedding cache.
        seconds: Wall time of the build, embedding included.
        embed_seconds: Wall time of embedding (cache look-ups included).
        index_seconds: Wall time of building the FAISS index alone.
        index_bytes: Size of the serialised FAISS index (what it holds in memory, give or take).
    """

    n_docs: int
    embedded_now: int
    from_cache: int
    seconds: float
    embed_seconds: float = field(default=0.0, compare=False)
    index_seconds: float = field(default=0.0, compare=False)
    index_bytes: int = field(default=0, compare=False)


class DenseRetriever:
    """Inner-product (= cosine) search over normalised embeddings: exact, or approximate on large corpora.

    Use ``DenseRetriever(name).build(doc_ids, texts, encoder, cache)`` or :meth:`load`.

    Args:
        name: The retriever's name in runs and reports.
        query_prefix: Prepended to every query before it is embedded (e5: ``"query: "``).
        passage_prefix: Prepended to every document text before it is embedded (e5: ``"passage: "``).
        index: Which index to build by corpus size (:class:`IndexSettings`, a mapping of them, or ``None``
            for the defaults: flat up to 50,000 documents).

    Attributes:
        build_stats: Set by :meth:`build`; ``None`` after :meth:`load`.
        index_settings: The validated :class:`IndexSettings`.

    Raises:
        ValueError: Invalid ``index`` settings (the message names the retriever).
    """

    def __init__(
        self,
        name: str = "dense_minilm",
        query_prefix: str = "",
        passage_prefix: str = "",
        index: IndexSettings | Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.index_settings = index_settings(name, index)
        self.build_stats: BuildStats | None = None
        self._index: Any | None = None
        self._index_kind = FLAT
        self._doc_ids: list[str] = []
        self._encoder: Encoder | None = None
        self._cache: EmbeddingCache | None = None

    # -- build / search --------------------------------------------------------------------------

    def build(
        self,
        doc_ids: Sequence[str],
        texts: Sequence[str],
        encoder: Encoder,
        cache: EmbeddingCache | None = None,
        progress: ProgressCallback | None = None,
    ) -> DenseRetriever:
        """Embed the corpus (through ``cache`` when given, shard by shard) and index it.

        With a cache, the texts not cached yet are embedded in shards (the cache's committed chunks of
        ``batch_size x BATCHES_PER_COMMIT`` texts): a build killed mid-way loses at most the shard in
        progress, and the next build reads every committed shard back and embeds only the rest.

        Args:
            doc_ids: Unique document ids; their order is the corpus position used to break ties.
            texts: One text per document.
            encoder: The encoder for documents and, later, queries.
            cache: Optional embedding cache; unchanged texts are never embedded again.
            progress: Called as ``progress(done, total)`` over the distinct texts to embed, after each
                committed shard (once, at the end, without a cache; never when nothing is missing).

        Returns:
            ``self``, built.

        Raises:
            ValueError: On length mismatch or duplicate doc ids.
        """
        import faiss  # noqa: F401  (imported before the clock starts: index_seconds times the build alone)

        _check_corpus(doc_ids, texts)
        start = time.perf_counter()
        vectors, embedded_now, from_cache = _embed(encoder, cache, [self.passage_prefix + t for t in texts], progress)
        embedded = time.perf_counter()
        self._index_kind = self.index_settings.kind_for(len(doc_ids))
        index = _make_index(vectors, encoder, self._index_kind, self.index_settings)
        indexed = time.perf_counter()
        self._install(index, list(doc_ids), encoder, cache)
        self.build_stats = BuildStats(
            len(doc_ids), embedded_now, from_cache, indexed - start, embedded - start, indexed - embedded, serialised_bytes(index)
        )
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` documents per query, best first; ties by corpus position ascending.

        A batch of one query runs FAISS with 1 OpenMP thread (restored afterwards): on this 2-core
        machine a single flat search took 6.3 ms with 1 thread but 15.9 ms with 2, because the
        thread start-up costs more than the work (``machine-notes.md``). Batches keep the default.

        Args:
            queries: Query texts.
            k: Hits per query (fewer if the corpus is smaller).

        Returns:
            One list of ``(doc_id, score)`` per query.
        """
        index, encoder = self._require_built()
        if not queries:
            return []
        if k <= 0 or index.ntotal == 0:
            return [[] for _ in queries]
        vectors, _, _ = _embed(encoder, self._cache, [self.query_prefix + q for q in queries])
        with faiss_threads(1 if len(queries) == 1 else None):
            scores, positions = _search_past_ties(index, vectors, min(k, index.ntotal))
        return [self._ranked(s, p, k) for s, p in zip(scores, positions)]

    def _ranked(self, scores: np.ndarray, positions: np.ndarray, k: int) -> list[Hit]:
        """One query's FAISS output as hits sorted by ``(-score, position)``, cut at ``k``."""
        pairs = sorted((-float(s), int(p)) for s, p in zip(scores, positions) if p >= 0)
        return [(self._doc_ids[p], -neg) for neg, p in pairs[:k]]

    # -- persistence -----------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write ``index.faiss``, ``doc_ids.json`` and ``params.json`` into ``directory``.

        Args:
            directory: Target folder (created if missing).
        """
        import faiss

        index, encoder = self._require_built()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        faiss.write_index(index, str(directory / INDEX_FILE))
        (directory / DOC_IDS_FILE).write_text(json.dumps(self._doc_ids), encoding="utf-8")
        params = self.params(encoder, index)
        (directory / PARAMS_FILE).write_text(json.dumps(params, indent=2, sort_keys=True), encoding="utf-8")

    def params(self, encoder: Encoder, index: Any) -> dict[str, Any]:
        """The ``params.json`` content: what is needed to check and reproduce this index."""
        return {
            "kind": "dense",
            "name": self.name,
            "model_id": encoder.model_id,
            "dim": int(index.d),
            "metric": METRIC,
            "index_type": type(index).__name__,
            "index": {
                "kind": self._index_kind,
                "exact": self._index_kind == FLAT,
                "settings": self.index_settings.model_dump(),
                **index_kind(self._index_kind).describe(index),
            },
            "n_docs": int(index.ntotal),
            "normalised": True,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "tie_break": "score desc, corpus position asc",
            "build_stats": asdict(self.build_stats) if self.build_stats else None,
            "versions": _library_versions(),
        }

    @classmethod
    def load(
        cls,
        directory: Path,
        encoder: Encoder | None = None,
        cache: EmbeddingCache | None = None,
    ) -> DenseRetriever:
        """Load a saved index; searches then return exactly what the saved retriever returned.

        Args:
            directory: A folder written by :meth:`save`.
            encoder: The query encoder. ``None`` builds the default
                :class:`~retrieval_pipeline.core.retrieval.models.encoders.SentenceTransformerEncoder`, which is
                only allowed when the index was built with that model. The query prefix is the saved one.
            cache: Optional embedding cache for queries.

        Returns:
            The loaded retriever (``build_stats`` is ``None``), with the saved index settings and the
            approximate index's search-time parameters (``efSearch``) restored. An index saved before
            index settings existed is a flat one with the default settings.

        Raises:
            EncoderMismatchError: If the encoder's ``model_id`` or ``dim`` differs from ``params.json``.
            ValueError: If the saved files disagree with each other or name an unknown index kind.
        """
        import faiss

        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        encoder = encoder if encoder is not None else _default_encoder(params, directory)
        _check_encoder(params, encoder, directory)
        index = faiss.read_index(str(directory / INDEX_FILE))
        doc_ids = json.loads((directory / DOC_IDS_FILE).read_text(encoding="utf-8"))
        _check_saved(params, index, doc_ids, directory)
        saved = params.get("index") or {}
        retriever = cls(params["name"], params.get("query_prefix", ""), params.get("passage_prefix", ""), saved.get("settings"))
        retriever._index_kind = str(saved.get("kind", FLAT))
        index_kind(retriever._index_kind, directory / PARAMS_FILE).tune(index, retriever.index_settings)
        retriever._install(index, doc_ids, encoder, cache)
        return retriever

    # -- internals -------------------------------------------------------------------------------

    @property
    def doc_ids(self) -> list[str]:
        """Document ids in corpus order."""
        return list(self._doc_ids)

    @property
    def faiss_index(self) -> Any:
        """The FAISS index itself (to inspect its parameters; searching it directly skips the tie-break)."""
        index, _ = self._require_built()
        return index

    @property
    def index_type(self) -> str:
        """The FAISS index class (``IndexFlatIP``, ``IndexHNSWFlat``)."""
        index, _ = self._require_built()
        return type(index).__name__

    @property
    def dim(self) -> int:
        """The vectors' dimension (read from the index: never loads the model)."""
        index, _ = self._require_built()
        return int(index.d)

    def _install(self, index: Any, doc_ids: list[str], encoder: Encoder, cache: EmbeddingCache | None) -> None:
        self._index, self._doc_ids, self._encoder, self._cache = index, doc_ids, encoder, cache

    def _require_built(self) -> tuple[Any, Encoder]:
        if self._index is None or self._encoder is None:
            raise RuntimeError(f"{self.name}: call build() or load() first")
        return self._index, self._encoder

    def __repr__(self) -> str:
        n = 0 if self._index is None else self._index.ntotal
        return f"DenseRetriever(name={self.name!r}, n_docs={n})"


# -- module helpers ------------------------------------------------------------------------------


def _check_corpus(doc_ids: Sequence[str], texts: Sequence[str]) -> None:
    """Same length, unique ids."""
    if len(doc_ids) != len(texts):
        raise ValueError(f"{len(doc_ids)} doc ids but {len(texts)} texts")
    if len(set(doc_ids)) != len(doc_ids):
        dupes = sorted(d for d, n in Counter(doc_ids).items() if n > 1)
        raise ValueError(f"duplicate doc ids: {dupes[:10]}")


def _embed(
    encoder: Encoder, cache: EmbeddingCache | None, texts: Sequence[str], progress: ProgressCallback | None = None
) -> tuple[np.ndarray, int, int]:
    """Normalised vectors for ``texts`` plus ``(embedded_now, from_cache)`` counts of distinct texts."""
    if cache is None:
        vectors = encoder.encode(list(texts)) if texts else np.zeros((0, encoder.dim), np.float32)
        if progress is not None and texts:
            progress(len(texts), len(texts))
        return l2_normalise(vectors), len(texts), 0
    vectors, stats = cache.get_or_encode(encoder, list(texts), progress=progress)
    return l2_normalise(vectors), stats.misses, stats.hits


def _make_index(vectors: np.ndarray, encoder: Encoder, kind: str, settings: IndexSettings) -> Any:
    """An index of ``kind`` (:data:`FLAT` or approximate) holding ``vectors`` (shape ``(n, dim)``)."""
    dim = int(vectors.shape[1]) if vectors.shape[0] else int(encoder.dim)
    return filled_index(index_kind(kind), vectors, dim, settings)


def _search_past_ties(index: Any, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """FAISS search that fetches enough hits to resolve ties at the ``k``-th place.

    Let :math:`s_{(k)}` be a query's ``k``-th best score and :math:`s_{(m)}` the last of ``m`` fetched.
    If :math:`s_{(k)} = s_{(m)}` (and ``m < n``), some unfetched document may tie with the ``k``-th and
    sit earlier in the corpus, so ``m`` doubles until :math:`s_{(k)} > s_{(m)}` for every query or
    ``m = n``. Real embeddings almost never tie, so this is one search with ``m = k + 1``.
    """
    n = int(index.ntotal)
    fetch = min(n, k + 1)
    while True:
        scores, positions = index.search(vectors, fetch)
        if fetch == n or not np.any(scores[:, k - 1] <= scores[:, fetch - 1]):
            return scores, positions
        fetch = min(n, fetch * 2)


def _library_versions() -> dict[str, str | None]:
    """Installed versions of the libraries that shape the vectors (read without importing them)."""
    versions: dict[str, str | None] = {}
    for dist in ("faiss-cpu", "numpy", "sentence-transformers", "torch", "transformers"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def _default_encoder(params: dict[str, Any], directory: Path) -> Encoder:
    """The default sentence-transformers encoder, if the saved index was built with its model."""
    default = SentenceTransformerEncoder()
    built_with = str(params.get("model_id"))
    if not built_with.startswith(f"{default.name}@") or built_with != default.model_id:
        raise EncoderMismatchError(
            f"{directory}: index built with model {built_with!r}; pass an encoder for it (the default encoder is {default.name!r})"
        )
    return default


def _check_encoder(params: dict[str, Any], encoder: Encoder, directory: Path) -> None:
    """Refuse an encoder other than the one that built the index."""
    if encoder.model_id != params.get("model_id"):
        raise EncoderMismatchError(
            f"{directory}: index built with model {params.get('model_id')!r} but the encoder is "
            f"{encoder.model_id!r}; query vectors would not be comparable"
        )
    if params.get("metric") != METRIC or not params.get("normalised", False):
        raise ValueError(f"{directory}: expected a normalised {METRIC} index, params say {params!r}")
    if int(encoder.dim) != int(params["dim"]):
        raise EncoderMismatchError(f"{directory}: index dim {params['dim']} but encoder dim {encoder.dim}")


def _check_saved(params: dict[str, Any], index: Any, doc_ids: list[str], directory: Path) -> None:
    """The three saved files must agree."""
    if not (int(index.ntotal) == len(doc_ids) == int(params["n_docs"])) or int(index.d) != int(params["dim"]):
        raise ValueError(
            f"{directory}: inconsistent save: index has {index.ntotal} x {index.d}, "
            f"{len(doc_ids)} doc ids, params say {params['n_docs']} x {params['dim']}"
        )
