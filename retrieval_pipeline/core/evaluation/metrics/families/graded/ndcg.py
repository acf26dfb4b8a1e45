"""ndcg@k and ndcg: graded gain discounted by rank, over the best achievable from the qrels."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import VIEWS, per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut


def ndcg(gains: np.ndarray, ideal_gains: np.ndarray, k: int) -> np.ndarray:
    """Normalised discounted cumulative gain at ``k`` (trec_eval ``ndcg_cut_k``, ranx ``ndcg@k``).

    Formula::

        DCG@k  = sum(g_i / log2(i + 1) for i in 1..k)
        nDCG@k = DCG@k / IDCG@k        (0 when IDCG@k = 0)

    The gain is the grade itself (Järvelin & Kekäläinen, as in trec_eval), not ``2^g - 1``. IDCG@k is
    the DCG@k of the qrels' relevant grades sorted best first, so relevant documents the run never
    retrieved still lower the score. 0 when IDCG@k is 0.

    Args:
        gains: Grade by rank (0 when not relevant), shape ``(n_queries, depth)``; ranks past ``depth`` gain 0.
        ideal_gains: Relevant grades from the qrels sorted descending, shape ``(n_queries, any)``.
        k: Cutoff rank.

    Returns:
        nDCG per query, in [0, 1].
    """
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = gains[:, :k] @ discounts[: min(k, gains.shape[1])]
    idcg = ideal_gains[:, :k] @ discounts[: min(k, ideal_gains.shape[1])]
    return np.divide(dcg, idcg, out=np.zeros(len(dcg)), where=idcg > 0)


def ndcg_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`ndcg` of the top ``k``."""
    return ndcg(judged.gains, judged.ideal_gains, cut(judged, k))


_ALIASES = ("ndcg", "ndcg_cut")

ENTRIES = (
    per_query(
        "ndcg@{k}",
        "Mean nDCG@{k}: graded gain (the qrels grade) discounted by log2(rank + 1), "
        "divided by the best achievable from the qrels (trec_eval ndcg_cut).",
        ndcg_at,
        headline=(10,),
        objective=(10,),
        views=dict.fromkeys(VIEWS, (10,)),
        label="nDCG@{k}",
        aliases=_ALIASES,
        trec_eval="ndcg_cut.{k}",
        frame="ndcg_k",
        order=80,
    ),
    per_query(
        "ndcg",
        "Mean nDCG over the run's full depth: graded gain discounted by log2(rank + 1), "
        "divided by the best achievable from the qrels (trec_eval ndcg).",
        ndcg_at,
        aliases=_ALIASES,
        trec_eval="ndcg",
        order=130,
    ),
)
