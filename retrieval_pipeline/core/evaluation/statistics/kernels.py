"""Numba kernels of :mod:`retrieval_pipeline.core.evaluation.statistics.stats`, loaded only for large tests (importing Numba
and compiling cost about a second the first time; ``cache=True`` keeps the machine code for later processes)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def row_sums(table: np.ndarray, flips: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Per row of ``flips`` (packed sign bytes), the sum over bytes ``j`` of ``table[j, flips[row, j]]``."""
    out = np.empty(flips.shape[0])
    for row in range(flips.shape[0]):
        total = 0.0
        for j in range(flips.shape[1]):
            total += table[j, flips[row, j]]
        out[row] = total
    return out
