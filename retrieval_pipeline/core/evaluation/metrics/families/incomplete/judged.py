"""judged@k: the share of the top k that the qrels judge (ir_measures' ``Judged@k``)."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut, ratio


def judged_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """Share of the top ``k`` documents that have a judgement in the qrels, any grade (ir_measures ``Judged@k``).

    Formula::

        judged@k = |{i in 1..k : the qrels grade the document at rank i}| / min(k, n_retrieved)

    As in ir_measures, the divisor is the number of documents in the top ``k`` (fewer when the run is
    shorter); 0 for a query that retrieved nothing. A negative grade counts as judged.
    """
    labels = judged.need_labels("judged@k")
    depth = cut(judged, k)
    counted = (~np.isnan(labels[:, :depth])).sum(axis=1).astype(float)
    return ratio(counted, np.minimum(judged.n_retrieved, depth))


ENTRIES = (
    per_query(
        "judged@{k}",
        "Mean share of the top {k} results that the qrels judge, any grade; divided by the number of results "
        "in the top {k} (ir_measures Judged@{k}).",
        judged_at,
        aliases=("judged",),
    ),
)
