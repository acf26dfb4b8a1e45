"""err@k: expected reciprocal rank under the cascade model, graded (gdeval's ``err@k``, as ir_measures computes ``ERR@k``)."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut

#: The top grade of gdeval's scale: a grade ``g`` stops the user with probability ``(2^g - 1) / 2^MAX_GRADE``.
MAX_GRADE = 4


def expected_reciprocal_rank(judged: Judged, k: int | float | None) -> np.ndarray:
    """Expected reciprocal rank at ``k`` (Chapelle et al. 2009) with gdeval's stopping probabilities.

    Formula (``g_i`` the grade at rank ``i``, 0 when not relevant)::

        p_i   = (2^g_i - 1) / 2^4
        ERR@k = sum(p_i / i * prod(1 - p_j for j < i) for i in 1..k)

    The scale is gdeval's (grades 0..4, the TREC Web track's), which ir_measures runs for ``ERR@k``.

    Raises:
        ValueError: A relevant grade above 4 (gdeval refuses such qrels).
    """
    gains = judged.gains[:, : cut(judged, k)]
    if gains.size and gains.max() > MAX_GRADE:
        raise ValueError(f"err@k takes grades up to {MAX_GRADE} (gdeval's scale), got {gains.max():g}")
    stop = (np.exp2(gains) - 1.0) / 2.0**MAX_GRADE
    reach = np.cumprod(np.hstack([np.ones((len(stop), 1)), 1.0 - stop[:, :-1]]), axis=1)
    return (stop * reach / np.arange(1, stop.shape[1] + 1)).sum(axis=1)


ENTRIES = (
    per_query(
        "err@{k}",
        "Mean expected reciprocal rank in the top {k}: a user stops at each result with probability "
        "(2^grade - 1) / 16 and gains 1 / rank (gdeval's ERR@{k}, as in ir_measures).",
        expected_reciprocal_rank,
        aliases=("err",),
    ),
)
