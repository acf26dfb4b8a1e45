"""recall@k: the fraction of the relevant documents in the top k."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut


def recall(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Fraction of the relevant documents that are in the top ``k`` (trec_eval ``recall_k``, TREC R@k).

    Formula::

        recall@k = sum(rel_i for i in 1..k) / R        (0 when R = 0)

    Args:
        relevant: Boolean relevance by rank, shape ``(n_queries, depth)``.
        n_relevant: ``R`` per query.
        k: Cutoff rank.

    Returns:
        Recall per query, in [0, 1].
    """
    retrieved = relevant[:, :k].sum(axis=1)
    return np.divide(retrieved, n_relevant, out=np.zeros(len(retrieved)), where=n_relevant > 0)


def recall_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`recall` of the top ``k``."""
    return recall(judged.relevant, judged.n_relevant, cut(judged, k))


ENTRIES = (
    per_query(
        "recall@{k}",
        "Mean fraction of each query's relevant documents found in the top {k} (TREC R@{k}); "
        "with one relevant document per query it equals hit_rate@{k}.",
        recall_at,
        headline=(5, 10),
        objective=(1, 5, 10),
        views={"sweep": (10,)},
        aliases=("recall", "r"),
        trec_eval="recall.{k}",
        frame="ks",
        order=20,
    ),
)
