"""Numba kernel of :meth:`BM25Retriever.search_tokens <retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25.BM25Retriever.search_tokens>`,
loaded only for large indexes (importing Numba and loading the compiled code cost about a second; ``cache=True`` keeps
the machine code for later processes)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _worse(score_a: float, position_a: int, score_b: float, position_b: int) -> bool:  # pragma: no cover - compiled
    """Whether hit a ranks below hit b: a lower score, or the same score at a later corpus position."""
    return score_a < score_b or (score_a == score_b and position_a > position_b)


@njit(cache=True, nogil=True)
def _sift_down(scores: np.ndarray, positions: np.ndarray, size: int) -> None:  # pragma: no cover - compiled
    """Restore the heap (the worst hit at its root) after its root was replaced."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and _worse(scores[child + 1], positions[child + 1], scores[child], positions[child]):
            child += 1
        if not _worse(scores[child], positions[child], scores[i], positions[i]):
            return
        scores[i], scores[child] = scores[child], scores[i]
        positions[i], positions[child] = positions[child], positions[i]
        i = child


@njit(cache=True, nogil=True)
def _offer(scores: np.ndarray, positions: np.ndarray, size: int, width: int, score: float, doc: int) -> int:  # pragma: no cover
    """Offer a hit to the heap of the ``width`` best; returns the heap's new size."""
    if size < width:
        i = size
        scores[i] = score
        positions[i] = doc
        while i > 0:
            parent = (i - 1) // 2
            if not _worse(scores[i], positions[i], scores[parent], positions[parent]):
                break
            scores[i], scores[parent] = scores[parent], scores[i]
            positions[i], positions[parent] = positions[parent], positions[i]
            i = parent
        return size + 1
    if _worse(scores[0], positions[0], score, doc):
        scores[0] = score
        positions[0] = doc
        _sift_down(scores, positions, size)
    return size


@njit(cache=True, nogil=True)
def search(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_docs: int,
    query_indptr: np.ndarray,
    query_terms: np.ndarray,
    k: int,
    sparse_below: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per query, its ``k`` best positive scores, by score descending then corpus position ascending.

    Query ``q``'s term ids are ``query_terms[query_indptr[q]:query_indptr[q + 1]]`` (query order, repeats kept). Each
    document's score is summed from 0.0 over them in that order, one float64 addition per posting: the reference's
    additions one by one (rank_bm25 adds ``+0.0`` for a term a document lacks, which changes nothing), so the scores
    are bit-identical. The best ``k`` are kept in a heap: over every document in position order for a query with many
    postings, over the documents it touches (listed as first touched) for one with fewer than ``sparse_below`` postings.

    Returns:
        ``(positions, scores, counts)``: ``(queries, min(k, n_docs))`` arrays, row ``q`` valid up to ``counts[q]``.
    """
    n_queries = query_indptr.shape[0] - 1
    width = min(k, n_docs)
    out_positions = np.zeros((n_queries, width), dtype=np.int64)
    out_scores = np.zeros((n_queries, width), dtype=np.float64)
    counts = np.zeros(n_queries, dtype=np.int64)
    if width == 0:
        return out_positions, out_scores, counts
    totals = np.zeros(n_docs, dtype=np.float64)
    seen = np.zeros(n_docs, dtype=np.bool_)
    touched = np.empty(n_docs, dtype=np.int64)
    heap_scores = np.empty(width, dtype=np.float64)
    heap_positions = np.empty(width, dtype=np.int64)
    for q in range(n_queries):
        postings = 0
        for j in range(query_indptr[q], query_indptr[q + 1]):
            postings += indptr[query_terms[j] + 1] - indptr[query_terms[j]]
        size = 0
        if postings < sparse_below:
            n_touched = 0
            for j in range(query_indptr[q], query_indptr[q + 1]):
                term = query_terms[j]
                for p in range(indptr[term], indptr[term + 1]):
                    doc = indices[p]
                    if not seen[doc]:
                        seen[doc] = True
                        touched[n_touched] = doc
                        n_touched += 1
                    totals[doc] += data[p]
            for i in range(n_touched):
                doc = touched[i]
                score = totals[doc]
                totals[doc] = 0.0
                seen[doc] = False
                if score > 0.0:
                    size = _offer(heap_scores, heap_positions, size, width, score, doc)
        else:
            for j in range(query_indptr[q], query_indptr[q + 1]):
                term = query_terms[j]
                for p in range(indptr[term], indptr[term + 1]):
                    totals[indices[p]] += data[p]
            floor = 0.0  # in position order a later tie ranks below: only a higher score enters a full heap
            for doc in range(n_docs):
                score = totals[doc]
                if score > floor:
                    size = _offer(heap_scores, heap_positions, size, width, score, doc)
                    if size == width:
                        floor = heap_scores[0]
            totals[:] = 0.0
        counts[q] = size
        while size > 0:  # pop the worst first: the row fills from its end
            size -= 1
            out_scores[q, size] = heap_scores[0]
            out_positions[q, size] = heap_positions[0]
            heap_scores[0] = heap_scores[size]
            heap_positions[0] = heap_positions[size]
            _sift_down(heap_scores, heap_positions, size)
    return out_positions, out_scores, counts
