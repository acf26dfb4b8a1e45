"""r_prec: precision at rank R, R being the query's number of relevant documents."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged


def r_precision(relevant: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """Precision at rank R, R being each query's number of relevant documents (trec_eval ``Rprec``).

    Formula::

        R-prec = sum(rel_i for i in 1..R) / R        (0 when R = 0)
    """
    within = np.arange(relevant.shape[1]) < n_relevant[:, None]
    retrieved = (relevant & within).sum(axis=1)
    return np.divide(retrieved, n_relevant, out=np.zeros(len(retrieved)), where=n_relevant > 0)


def r_precision_of(judged: Judged, k: int | float | None = None) -> np.ndarray:
    """:func:`r_precision` (no cut-off: each query is cut at its ``R``; the arrays must be at least ``R`` deep)."""
    return r_precision(judged.relevant, judged.n_relevant)


ENTRIES = (
    per_query(
        "r_prec",
        "Mean precision at rank R, R being the query's number of relevant documents (trec_eval Rprec).",
        r_precision_of,
        aliases=("r_prec", "r-prec", "rprec"),
        trec_eval="Rprec",
        order=150,
    ),
)
