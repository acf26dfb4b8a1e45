"""f1@k: the harmonic mean of precision@k and recall@k."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.families.binary.precision import precision_at
from retrieval_pipeline.core.evaluation.metrics.families.binary.recall import recall_at
from retrieval_pipeline.core.evaluation.metrics.judging import Judged


def f1(precision_at_k: np.ndarray, recall_at_k: np.ndarray) -> np.ndarray:
    """Harmonic mean of precision@k and recall@k (ranx ``f1@k``).

    Formula::

        f1@k = 2 * precision@k * recall@k / (precision@k + recall@k)        (0 when both are 0)

    Args:
        precision_at_k: Precision@k per query.
        recall_at_k: Recall@k per query, same ``k``.

    Returns:
        F1 per query, in [0, 1].
    """
    total = precision_at_k + recall_at_k
    product = 2.0 * precision_at_k * recall_at_k
    return np.divide(product, total, out=np.zeros(len(total)), where=total > 0)


def f1_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`f1` of precision and recall of the top ``k``."""
    return f1(precision_at(judged, k), recall_at(judged, k))


ENTRIES = (
    per_query(
        "f1@{k}",
        "Mean harmonic mean of precision@{k} and recall@{k} per query (0 when both are 0).",
        f1_at,
        headline=(5,),
        objective=(5,),
        frame="f1_k",
        order=40,
    ),
)
