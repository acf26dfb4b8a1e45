"""precision@k: the fraction of the top k that is relevant."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut


def precision(relevant: np.ndarray, k: int) -> np.ndarray:
    """Fraction of the top ``k`` that is relevant (trec_eval ``P_k``).

    Formula::

        precision@k = sum(rel_i for i in 1..k) / k

    The divisor is always ``k``, even when fewer than ``k`` documents were retrieved (as in trec_eval).

    Args:
        relevant: Boolean relevance by rank, shape ``(n_queries, depth)``.
        k: Cutoff rank.

    Returns:
        Precision per query, in [0, 1].
    """
    return relevant[:, :k].sum(axis=1) / k


def precision_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`precision` of the top ``k``."""
    return precision(judged.relevant, cut(judged, k))


ENTRIES = (
    per_query(
        "precision@{k}",
        "Mean fraction of the top {k} results that are relevant, always divided by {k} (TREC P@{k}).",
        precision_at,
        headline=(5,),
        objective=(5,),
        aliases=("precision", "p"),
        trec_eval="P.{k}",
        frame="precision_ks",
        order=30,
    ),
)
