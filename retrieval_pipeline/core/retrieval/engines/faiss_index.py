"""FAISS indexes for dense retrieval: which kind by corpus size, and what approximation costs in recall.

:class:`IndexSettings` chooses: a corpus of at most ``flat_max_docs`` documents gets the exact
``IndexFlatIP``; a larger one an approximate index (``approximate: hnsw``: ``IndexHNSWFlat`` over inner
product, ``M`` links per vector, ``efConstruction`` / ``efSearch`` candidate lists). The FAISS wiki
("Guidelines to choose an index") puts HNSW first when memory is not the limit, with
:math:`4 \\le M \\le 64` and about :math:`4d + 8M` bytes per vector; ``efSearch`` sets the speed/recall
trade-off. A kind is one :class:`IndexKind` entry (:data:`APPROXIMATE`): adding IVF is one more entry.

:func:`approximate_recall` measures the trade-off on any vectors: recall@k of the approximate index
against flat, both build times, single-query latencies and sizes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from retrieval_pipeline.core.retrieval.models.encoders import l2_normalise

#: The index kind of a corpus of at most ``flat_max_docs`` documents (and of every index saved before
#: :class:`IndexSettings` existed).
FLAT = "flat"


class IndexSettings(BaseModel):
    """Which FAISS index a dense retriever builds: exact up to ``flat_max_docs``, approximate above.

    Defaults follow the FAISS wiki's guidance for HNSW: ``M = 32`` (within 4..64; more links, better
    recall, more memory) and ``efConstruction = 200`` (a well-connected graph; build time only).
    ``efSearch = 192`` (the candidate list per query) was chosen on real vectors: all-MiniLM-L6-v2 over
    the 100,000-document subset of ``installed_packages`` with its 2,000 known-item queries, split in
    seeded halves. The smallest efSearch whose recall@10 against flat reached 0.98 on the dev half was
    192 (dev 0.985; 128 gave 0.975). On the test half it gives 0.986 at a single-query P50 of 0.59 ms
    (flat: 9.4 ms). Short queries are harder for the graph than document vectors are: with held-out
    documents as queries, 128 already reached 0.999.

    Attributes:
        flat_max_docs: Largest corpus that keeps the exact ``IndexFlatIP`` (>= 0).
        approximate: The approximate index above that size; a key of :data:`APPROXIMATE` (``hnsw``).
        hnsw_m: HNSW links per vector (>= 4).
        ef_construction: HNSW candidate list while building (>= 1).
        ef_search: HNSW candidate list while searching (>= 1; FAISS uses at least ``k``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    flat_max_docs: int = Field(50_000, ge=0)
    approximate: str = "hnsw"
    hnsw_m: int = Field(32, ge=4)
    ef_construction: int = Field(200, ge=1)
    ef_search: int = Field(192, ge=1)

    @field_validator("approximate")
    @classmethod
    def _known_approximate(cls, value: str) -> str:
        if value not in APPROXIMATE:
            raise ValueError(f"unknown approximate index {value!r}; known: {', '.join(sorted(APPROXIMATE))}")
        return value

    def kind_for(self, n_docs: int) -> str:
        """The index kind for a corpus of ``n_docs``: :data:`FLAT` up to ``flat_max_docs``, else ``approximate``."""
        return FLAT if n_docs <= self.flat_max_docs else self.approximate


def index_settings(owner: str, raw: IndexSettings | Mapping[str, Any] | None) -> IndexSettings:
    """Validated index settings; bad values raise an error that names ``owner``.

    Args:
        owner: Who the settings belong to (the retriever's name), for the message.
        raw: Settings, a mapping of them, or ``None`` for the defaults.

    Returns:
        The settings.

    Raises:
        ValueError: A negative size, ``hnsw_m < 4``, an unknown ``approximate`` kind or an unknown key.
    """
    if isinstance(raw, IndexSettings):
        return raw
    try:
        return IndexSettings.model_validate(dict(raw or {}))
    except ValidationError as exc:
        problems = "; ".join(f"index.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{owner}: invalid index settings: {problems}") from None


@dataclass(frozen=True)
class IndexKind:
    """How one kind of FAISS index is made, re-tuned after loading and described in ``params.json``.

    Attributes:
        new: ``new(dim, settings)``: an empty index over inner product.
        tune: ``tune(index, settings)``: set the search-time parameters (lost by nothing, restored on load).
        describe: ``describe(index)``: its parameters as read back from the index itself.
    """

    new: Callable[[int, IndexSettings], Any]
    tune: Callable[[Any, IndexSettings], None]
    describe: Callable[[Any], dict[str, Any]]


def _new_flat(dim: int, settings: IndexSettings) -> Any:
    import faiss

    return faiss.IndexFlatIP(dim)


def _new_hnsw(dim: int, settings: IndexSettings) -> Any:
    import faiss

    index = faiss.IndexHNSWFlat(dim, settings.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = settings.ef_construction
    _tune_hnsw(index, settings)
    return index


def _tune_hnsw(index: Any, settings: IndexSettings) -> None:
    index.hnsw.efSearch = settings.ef_search


def _describe_hnsw(index: Any) -> dict[str, Any]:
    hnsw = index.hnsw
    return {"hnsw_m": int(hnsw.nb_neighbors(1)), "ef_construction": int(hnsw.efConstruction), "ef_search": int(hnsw.efSearch)}


#: The exact index: no parameters.
FLAT_INDEX = IndexKind(_new_flat, lambda index, settings: None, lambda index: {})
#: ``approximate:`` name -> index kind. Adding IVF is one entry here.
APPROXIMATE: dict[str, IndexKind] = {"hnsw": IndexKind(_new_hnsw, _tune_hnsw, _describe_hnsw)}


def index_kind(name: str, where: object = "index settings") -> IndexKind:
    """The :class:`IndexKind` called ``name`` (:data:`FLAT` or a key of :data:`APPROXIMATE`).

    Raises:
        ValueError: Unknown name; the message names ``where`` it came from.
    """
    kinds = {FLAT: FLAT_INDEX, **APPROXIMATE}
    if name not in kinds:
        raise ValueError(f"{where}: unknown index kind {name!r}; known: {', '.join(sorted(kinds))}")
    return kinds[name]


def filled_index(kind: IndexKind, vectors: np.ndarray, dim: int, settings: IndexSettings) -> Any:
    """A new index of ``kind`` with ``vectors`` added (none added when there are none)."""
    index = kind.new(dim, settings)
    if vectors.shape[0]:
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def serialised_bytes(index: Any) -> int:
    """Bytes of ``index`` serialised by FAISS (what ``index.faiss`` takes on disk; about its RAM size)."""
    import faiss

    return int(faiss.serialize_index(index).nbytes)


@contextmanager
def faiss_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` FAISS OpenMP threads (``None``: leave as is), then restore."""
    if n is None:
        yield
        return
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


# -- approximate vs exact: measured recall and speed ----------------------------------------------


@dataclass(frozen=True)
class RecallReport:
    """What :func:`approximate_recall` measured: the approximate index against the exact one.

    Attributes:
        approximate: The approximate index kind (``hnsw``).
        settings: Its :class:`IndexSettings` as a dict.
        k: The cut-off of recall@k.
        n_docs: Vectors indexed.
        n_queries: Query vectors searched.
        recall_at_k: Mean over queries of ``|flat top-k & approximate top-k| / k``.
        flat_build_seconds: Time to build ``IndexFlatIP`` over the vectors.
        approximate_build_seconds: Time to build the approximate index over them.
        flat_p50_ms: Median single-query search time of the flat index (1 thread, as
            the dense retriever runs one query).
        flat_p95_ms: 95th percentile of the same.
        approximate_p50_ms: Median single-query search time of the approximate index.
        approximate_p95_ms: 95th percentile of the same.
        speedup: ``flat_p50_ms / approximate_p50_ms``.
        flat_bytes: Serialised size of the flat index.
        approximate_bytes: Serialised size of the approximate index.
    """

    approximate: str
    settings: dict[str, Any]
    k: int
    n_docs: int
    n_queries: int
    recall_at_k: float
    flat_build_seconds: float
    approximate_build_seconds: float
    flat_p50_ms: float
    flat_p95_ms: float
    approximate_p50_ms: float
    approximate_p95_ms: float
    speedup: float
    flat_bytes: int
    approximate_bytes: int

    def as_dict(self) -> dict[str, Any]:
        """Every field, for JSON reports and metadata."""
        return asdict(self)


def approximate_recall(vectors: np.ndarray, query_vectors: np.ndarray, k: int = 10, **settings: Any) -> RecallReport:
    """Build the flat and the approximate index over the same vectors and compare them.

    Vectors are L2-normalised first, as the dense retriever's build does, so inner product is cosine.
    The approximate index is built whatever ``flat_max_docs`` says: this measures what it would give.

    Args:
        vectors: The corpus vectors, shape ``(n_docs, dim)``.
        query_vectors: The query vectors, shape ``(n_queries, dim)``.
        k: The cut-off (``1 <= k <= n_docs``).
        **settings: :class:`IndexSettings` fields (``approximate``, ``hnsw_m``, ``ef_construction``,
            ``ef_search``); the rest keep their defaults.

    Returns:
        The :class:`RecallReport`.

    Raises:
        ValueError: Bad settings, shapes that are not 2-D or disagree on ``dim``, no queries, or ``k`` out
            of range.
    """
    chosen = index_settings("approximate_recall", settings)
    docs = _matrix(vectors, "vectors")
    queries = _matrix(query_vectors, "query_vectors")
    if docs.shape[1] != queries.shape[1] or not len(queries) or not 1 <= k <= len(docs):
        raise ValueError(
            f"approximate_recall: need vectors and query_vectors of one dim, >= 1 query and 1 <= k <= n_docs; "
            f"got {docs.shape}, {queries.shape}, k={k}"
        )
    dim = int(docs.shape[1])
    flat, flat_seconds = _timed(lambda: filled_index(FLAT_INDEX, docs, dim, chosen))
    approx, approx_seconds = _timed(lambda: filled_index(APPROXIMATE[chosen.approximate], docs, dim, chosen))
    _, truth = flat.search(queries, k)
    _, found = approx.search(queries, k)
    flat_ms, approx_ms = _latencies_ms(flat, queries, k), _latencies_ms(approx, queries, k)
    return RecallReport(
        approximate=chosen.approximate,
        settings=chosen.model_dump(),
        k=k,
        n_docs=len(docs),
        n_queries=len(queries),
        recall_at_k=recall_at_k(truth, found),
        flat_build_seconds=flat_seconds,
        approximate_build_seconds=approx_seconds,
        flat_p50_ms=float(np.percentile(flat_ms, 50)),
        flat_p95_ms=float(np.percentile(flat_ms, 95)),
        approximate_p50_ms=float(np.percentile(approx_ms, 50)),
        approximate_p95_ms=float(np.percentile(approx_ms, 95)),
        speedup=float(np.percentile(flat_ms, 50) / max(np.percentile(approx_ms, 50), 1e-9)),
        flat_bytes=serialised_bytes(flat),
        approximate_bytes=serialised_bytes(approx),
    )


def recall_at_k(truth: np.ndarray, found: np.ndarray) -> float:
    """Mean over rows of the fraction of ``truth``'s ids that ``found`` holds too.

    Args:
        truth: ``(n_queries, k)`` ids of the exact top-k (FAISS positions; ``-1`` = no hit, ignored).
        found: ``(n_queries, k')`` ids of the approximate top-k (``-1`` ignored).

    Returns:
        A number in ``[0, 1]`` (1.0 for no queries).
    """
    fractions = [len(set(t[t >= 0].tolist()) & set(f[f >= 0].tolist())) / max(int((t >= 0).sum()), 1) for t, f in zip(truth, found)]
    return float(np.mean(fractions)) if fractions else 1.0


def _matrix(vectors: np.ndarray, what: str) -> np.ndarray:
    """``vectors`` as a contiguous float32 2-D array with unit rows."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"approximate_recall: {what} must be 2-D, got shape {matrix.shape}")
    return np.ascontiguousarray(l2_normalise(matrix))


def _timed(make: Callable[[], Any]) -> tuple[Any, float]:
    """``make()`` and the seconds it took."""
    start = time.perf_counter()
    made = make()
    return made, time.perf_counter() - start


def _latencies_ms(index: Any, queries: np.ndarray, k: int) -> np.ndarray:
    """Milliseconds of one single-query search per query, on one FAISS thread."""
    times = np.empty(len(queries))
    with faiss_threads(1):
        for i in range(len(queries)):
            start = time.perf_counter()
            index.search(queries[i : i + 1], k)
            times[i] = (time.perf_counter() - start) * 1000.0
    return times
