"""map@k and map: average precision, cut at k or over the whole run."""

from __future__ import annotations

import numpy as np

from retrieval_pipeline.core.evaluation.metrics.entry import per_query
from retrieval_pipeline.core.evaluation.metrics.judging import Judged, cut


def average_precision(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Average precision at ``k`` (trec_eval ``map`` over the full run, ``map_cut_k``).

    Formula::

        AP@k = sum(precision@i * rel_i for i in 1..k) / R        (0 when R = 0)
    """
    hits = relevant[:, :k].astype(float)
    precision_at = np.cumsum(hits, axis=1) / np.arange(1, hits.shape[1] + 1)
    total = (precision_at * hits).sum(axis=1)
    return np.divide(total, n_relevant, out=np.zeros(len(total)), where=n_relevant > 0)


def average_precision_at(judged: Judged, k: int | float | None) -> np.ndarray:
    """:func:`average_precision` of the top ``k``."""
    return average_precision(judged.relevant, judged.n_relevant, cut(judged, k))


_ALIASES = ("map", "ap", "map_cut")

ENTRIES = (
    per_query(
        "map@{k}",
        "Mean average precision in the top {k}: the precision at each relevant rank up to {k}, summed and divided "
        "by the query's number of relevant documents (trec_eval map_cut_{k}).",
        average_precision_at,
        aliases=_ALIASES,
        trec_eval="map_cut.{k}",
        order=140,
    ),
    per_query(
        "map",
        "Mean average precision over the run's full depth (trec_eval map).",
        average_precision_at,
        aliases=_ALIASES,
        trec_eval="map",
        order=141,
    ),
)
