"""Numba kernels of :mod:`~retrieval_pipeline.core.evaluation.metrics.judging`, loaded only for large runs (importing
Numba and loading the compiled code cost about a second; ``cache=True`` keeps the machine code for later processes)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def above_and_tied(
    singles: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: np.ndarray, own: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """For each judged document ``i`` (score ``own[i]``, query ``rows[i]``): how many documents of its query score
    higher, and how many the same (itself included), all in float32."""
    higher = np.zeros(own.shape[0], dtype=np.int64)
    same = np.zeros(own.shape[0], dtype=np.int64)
    for i in range(own.shape[0]):
        score = own[i]
        for t in range(starts[rows[i]], ends[rows[i]]):
            if singles[t] > score:
                higher[i] += 1
            elif singles[t] == score:
                same[i] += 1
    return higher, same


@njit(cache=True, nogil=True)
def repeats_within(starts: np.ndarray, doc_index: np.ndarray, n_docs: int) -> bool:  # pragma: no cover - compiled
    """Whether a query (rows ``starts[q]:starts[q + 1]``) lists a document twice: one pass, the last query that listed
    each document kept beside it."""
    last = np.full(n_docs, -1, dtype=np.int64)
    for q in range(starts.shape[0] - 1):
        for t in range(starts[q], starts[q + 1]):
            if last[doc_index[t]] == q:
                return True
            last[doc_index[t]] = q
    return False
