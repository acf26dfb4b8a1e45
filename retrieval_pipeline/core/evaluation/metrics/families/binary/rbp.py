"""rbp(p=x): rank-biased precision with persistence p (Moffat & Zobel 2008; ir_measures' ``RBP(p=x,rel=1)``)."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged

#: ir_measures' default persistence: ``RBP`` is ``RBP(p=0.8)``.
DEFAULT_PERSISTENCE = 0.8


def rank_biased_precision(judged: Judged, p: int | float | None) -> np.ndarray:
    """Rank-biased precision over the whole ranking, binary relevance (``grade >= 1``).

    Formula::

        RBP(p) = (1 - p) * sum(rel_i * p^(i - 1) for i in 1..depth)

    The residual (what unjudged or unretrieved documents could add) is not reported.
    """
    persistence = DEFAULT_PERSISTENCE if p is None else float(p)
    weights = persistence ** np.arange(judged.depth, dtype=float)
    return (1.0 - persistence) * (judged.relevant @ weights)


ENTRIES = (
    per_query(
        "rbp(p={k})",
        "Mean rank-biased precision with persistence {k}: (1 - {k}) times the sum of {k}^(rank - 1) over "
        "the relevant results, binary relevance (ir_measures RBP(p={k}, rel=1)).",
        rank_biased_precision,
        aliases=("rbp",),
        default_k=DEFAULT_PERSISTENCE,
    ),
)
