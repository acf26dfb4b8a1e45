"""bpref: the binary preference measure of judged documents only (trec_eval ``bpref``)."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import RELEVANCE_THRESHOLD, Judged, ratio


def bpref(judged: Judged, k: int | float | None = None) -> np.ndarray:
    """Binary preference (Buckley & Voorhees 2004), as trec_eval computes it (``m_bpref.c``).

    Formula, over the ranking's judged documents only (unjudged ones, and negative grades, are skipped)::

        bpref = sum over relevant retrieved d of (1 - min(n_d, R) / min(N, R)) / R        (0 when R = 0)

    ``n_d`` is the number of judged non-relevant documents (grade 0) ranked above ``d`` (the term is 1 when
    there is none), ``N`` the number the qrels hold and ``R`` the number of relevant documents.
    """
    labels = judged.need_labels("bpref")
    relevant = labels >= RELEVANCE_THRESHOLD
    above = np.cumsum((labels >= 0) & ~relevant, axis=1)
    n_relevant = judged.n_relevant[:, None]
    denominator = np.broadcast_to(np.minimum(judged.n_judged_nonrelevant[:, None], n_relevant), above.shape)
    share = np.divide(np.minimum(above, n_relevant), denominator, out=np.zeros(above.shape), where=(above > 0) & (denominator > 0))
    return ratio(((1.0 - share) * relevant).sum(axis=1), judged.n_relevant)


ENTRIES = (
    per_query(
        "bpref",
        "Mean binary preference: for each relevant document retrieved, the share of the judged non-relevant ones "
        "(at most R) ranked below it, over R; unjudged documents are skipped (trec_eval bpref).",
        bpref,
        aliases=("bpref",),
        trec_eval="bpref",
    ),
)
