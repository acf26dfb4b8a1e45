"""hit_rate@k: whether any relevant document is in the top k (and ``hit@k``, its context-QA column name)."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut


def hit_rate(relevant: np.ndarray, k: int) -> np.ndarray:
    """Whether any relevant document is in the top ``k`` (trec_eval ``success_k``, ranx ``hit_rate@k``).

    Formula::

        hit_rate@k = 1 if sum(rel_i for i in 1..k) > 0 else 0

    This is not recall. With one relevant document per query it equals ``recall@k``.

    Args:
        relevant: Boolean relevance by rank, shape ``(n_queries, depth)``.
        k: Cutoff rank.

    Returns:
        1.0 or 0.0 per query.
    """
    return relevant[:, :k].any(axis=1).astype(float)


def hit_rate_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`hit_rate` of the top ``k``."""
    return hit_rate(judged.relevant, cut(judged, k))


ENTRIES = (
    per_query(
        "hit_rate@{k}",
        "Share of queries with at least one relevant document in the top {k} (TREC Success@{k}); "
        "with one relevant document per query it equals recall@{k}.",
        hit_rate_at,
        aggregation="rate",
        headline=(1, 5, 10),
        objective=(1, 5, 10),
        views={"console": (1, 5), "summary": (1, 5), "chart": (5,), "sweep": (1, 5)},
        label="hit@{k}",
        aliases=("hit_rate", "hit", "hits", "success"),
        trec_eval="success.{k}",
        frame="ks",
        order=10,
    ),
    per_query(
        "hit@{k}",
        "Same as hit_rate@{k} under the name context-QA reports use: share of queries with a relevant chunk in the top {k}.",
        hit_rate_at,
        aggregation="rate",
        order=110,
    ),
)
