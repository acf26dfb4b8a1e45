"""Per-query values of any parsed metric name, ranked the way trec_eval ranks a run.

The formulas of :mod:`retrieval_pipeline.core.evaluation.metrics` (``hit_rate``, ``recall``, ``precision``,
``reciprocal_rank``, ``ndcg``) are reused as they are, fed arrays cut at the requested depth; this
module adds the ones it lacks: average precision (``map``, ``map@k``), R-precision, ``mrr@k`` and
``ndcg`` over the full run.

Conventions, the same as :mod:`retrieval_pipeline.core.evaluation.metrics` and checked against pytrec_eval in
``retrieval_pipeline_tests/test_api.py``:

* **Ranking**: each query's documents by score descending, ties by doc id descending, with scores
  compared in single precision (trec_eval reads scores as C ``float``, so ``0.5`` and ``0.5 - 1e-9``
  tie). This is the order trec_eval and pytrec_eval evaluate.
* **Relevance** is ``grade >= 1``; nDCG's gain is the grade.
* **Queries**: every query of the qrels; one missing from the run scores 0 (pytrec_eval leaves it
  out of its output). Run queries without qrels are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from retrieval_pipeline.core.evaluation import metrics as formulas
from retrieval_pipeline.core.evaluation.metric_names import MetricName

#: ``{query_id: {doc_id: score}}``: scores, any order.
ScoreRun = Mapping[str, Mapping[str, float]]


def trec_eval_order(scores: Mapping[str, float]) -> list[str]:
    """Doc ids best first: score descending in float32, then doc id descending (trec_eval's rule)."""
    doc_ids = list(scores)
    single = np.asarray([scores[d] for d in doc_ids], dtype=np.float64).astype(np.float32).tolist()
    return [doc_id for _, doc_id in sorted(zip(single, doc_ids), reverse=True)]


def ranked_run(run: ScoreRun, query_ids: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """The run of ``query_ids`` as best-first lists (the :data:`~retrieval_pipeline.core.types.Run` shape)."""
    return {q: [(d, float(run[q][d])) for d in trec_eval_order(run[q])] for q in query_ids if q in run}


def average_precision(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Average precision at ``k`` (trec_eval ``map`` over the full run, ``map_cut_k``).

    Formula::

        AP@k = sum(precision@i * rel_i for i in 1..k) / R        (0 when R = 0)
    """
    hits = relevant[:, :k].astype(float)
    precision_at = np.cumsum(hits, axis=1) / np.arange(1, hits.shape[1] + 1)
    total = (precision_at * hits).sum(axis=1)
    return np.divide(total, n_relevant, out=np.zeros(len(total)), where=n_relevant > 0)


def r_precision(relevant: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """Precision at rank R, R being each query's number of relevant documents (trec_eval ``Rprec``).

    Formula::

        R-prec = sum(rel_i for i in 1..R) / R        (0 when R = 0)
    """
    within = np.arange(relevant.shape[1]) < n_relevant[:, None]
    retrieved = (relevant & within).sum(axis=1)
    return np.divide(retrieved, n_relevant, out=np.zeros(len(retrieved)), where=n_relevant > 0)


def per_query_values(run: ScoreRun, qrels: Mapping[str, Mapping[str, int]], metrics: Sequence[MetricName]) -> dict[str, np.ndarray]:
    """``{canonical metric name: values}`` in qrels query order.

    Args:
        run: ``{query_id: {doc_id: score}}``.
        qrels: ``{query_id: {doc_id: grade}}``, not empty.
        metrics: Parsed names (:func:`~retrieval_pipeline.core.evaluation.metric_names.parse_metrics`).

    Returns:
        One float array per metric, one value per qrels query.
    """
    query_ids = list(qrels)
    ranked = ranked_run(run, query_ids)
    max_run = max((len(hits) for hits in ranked.values()), default=0)
    max_relevant = max(sum(1 for g in judged.values() if g >= formulas.RELEVANCE_THRESHOLD) for judged in qrels.values())
    cutoffs = [m.k for m in metrics if m.k is not None]
    depth = max([max_run, max_relevant, *cutoffs, 1])
    judged = formulas._judge(ranked, {q: dict(qrels[q]) for q in query_ids}, depth, depth)
    relevant = judged.gains > 0
    n_relevant = judged.n_relevant
    values: dict[str, np.ndarray] = {}
    for m in metrics:
        k = depth if m.k is None else m.k
        if m.family == "hit_rate":
            values[m.name] = formulas.hit_rate(relevant, k)
        elif m.family == "recall":
            values[m.name] = formulas.recall(relevant, n_relevant, k)
        elif m.family == "precision":
            values[m.name] = formulas.precision(relevant, k)
        elif m.family == "ndcg":
            values[m.name] = formulas.ndcg(judged.gains, judged.ideal_gains, k)
        elif m.family == "mrr":
            first = judged.first_relevant_rank
            values[m.name] = formulas.reciprocal_rank(np.where(first <= k, first, np.nan))
        elif m.family == "map":
            values[m.name] = average_precision(relevant, n_relevant, k)
        elif m.family == "r_prec":
            values[m.name] = r_precision(relevant, n_relevant)
        else:  # pragma: no cover - parse_metric only makes the families above
            raise ValueError(f"no formula for metric family {m.family!r}")
    return values
