"""mrr: the reciprocal rank of the first relevant document, over the whole run or cut at k."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import VIEWS, per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged


def reciprocal_rank(first_relevant_rank: np.ndarray) -> np.ndarray:
    """Reciprocal of the rank of the first relevant document, over the whole run (trec_eval ``recip_rank``).

    Formula::

        rr = 1 / min(i : rel_i = 1)        (0 when no relevant document was retrieved)
        mrr = mean of rr over queries

    There is no cutoff: the run's full depth counts. The mean over queries is the MRR.

    Args:
        first_relevant_rank: 1-based rank per query, NaN when not found.

    Returns:
        Reciprocal rank per query, in [0, 1].
    """
    found = ~np.isnan(first_relevant_rank)
    return np.divide(1.0, first_relevant_rank, out=np.zeros(len(found)), where=found)


def reciprocal_rank_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`reciprocal_rank` over the whole ranking (``k`` None), or of the top ``k`` (0 when the first relevant is deeper)."""
    first = judged.first_relevant_rank
    return reciprocal_rank(first if k is None else np.where(first <= k, first, np.nan))


_ALIASES = ("mrr", "rr", "recip_rank")

ENTRIES = (
    per_query(
        "mrr",
        "Mean reciprocal rank of the first relevant document over the run's full depth (0 when none is retrieved).",
        reciprocal_rank_at,
        headline=True,
        objective=True,
        views=dict.fromkeys(VIEWS, True),
        label="MRR",
        aliases=_ALIASES,
        trec_eval="recip_rank",
        frame="plain",
        order=50,
    ),
    per_query(
        "mrr@{k}",
        "Mean reciprocal rank of the first relevant document when it is in the top {k}, else 0 (MRR cut at {k}).",
        reciprocal_rank_at,
        aliases=_ALIASES,
        order=100,
    ),
)
