"""infap: inferred average precision from sampled judgements (trec_eval ``infAP``)."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import RELEVANCE_THRESHOLD, Judged, ratio

#: trec_eval's ``INFAP_EPSILON``: keeps the precision estimate defined when nothing above was judged.
EPSILON = 0.00001


def inferred_average_precision(judged: Judged, k: int | float | None = None) -> np.ndarray:
    """Inferred AP (Yilmaz & Aslam 2006), as trec_eval computes it: a negative grade marks a pooled document
    left unjudged, a document not in the qrels is outside the pool.

    Formula: for each relevant document at 0-based rank ``j`` (``r``, ``n`` and ``u``: relevant, judged
    non-relevant and pooled-unjudged documents at ranks 0..j, ``r`` counting this one)::

        term_0 = 1
        term_j = 1/(j+1) + j/(j+1) * ((r-1+n+u)/j) * ((r-1+eps) / (r-1+n+2*eps))
        infAP  = sum of terms / R        (0 when R = 0)

    With complete judgements (every retrieved document judged, no negative grade) it equals AP up to
    ``eps``; unlike AP it counts documents outside the pool in ``j`` but neither as relevant nor as not.
    """
    labels = judged.need_labels("infAP")
    relevant = labels >= RELEVANCE_THRESHOLD
    r = np.cumsum(relevant, axis=1) - 1.0
    n = np.cumsum((labels >= 0) & ~relevant, axis=1).astype(float)
    u = np.cumsum(labels < 0, axis=1).astype(float)
    j = np.arange(labels.shape[1], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((r + n + u) / j) * ((r + EPSILON) / (r + n + 2 * EPSILON))
    terms[:, 0] = 1.0
    return ratio(np.where(relevant, terms, 0.0).sum(axis=1), judged.n_relevant)


ENTRIES = (
    per_query(
        "infap",
        "Mean inferred average precision: AP estimated from a sample of judged documents, negative grades marking "
        "pooled documents left unjudged; equals AP when every retrieved document is judged (trec_eval infAP).",
        inferred_average_precision,
        aliases=("infap", "inf_ap"),
        trec_eval="infAP",
    ),
)
