"""Per-query values of any parsed metric name, ranked the way trec_eval ranks a run.

Every parsed name is a metric of the registry, computed by its formula
(:func:`~retrieval_pipeline.core.metric_registry.compute_metric`): ``hit_rate@k``, ``recall@k``,
``precision@k``, ``ndcg`` / ``ndcg@k``, ``mrr`` / ``mrr@k``, ``map`` / ``map@k`` and ``r_prec``. A name
without a cut-off reads the full ranking. This module ranks the run as trec_eval does and judges it.

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

from retrieval_pipeline.core.evaluation.metric_names import MetricName
from retrieval_pipeline.core.evaluation.metrics import judge
from retrieval_pipeline.core.metric_formulas import RELEVANCE_THRESHOLD
from retrieval_pipeline.core.metric_registry import compute_metric

#: ``{query_id: {doc_id: score}}``: scores, any order.
ScoreRun = Mapping[str, Mapping[str, float]]


def trec_eval_order(scores: Mapping[str, float]) -> list[str]:
    """Doc ids best first: score descending in float32, then doc id descending (trec_eval's rule)."""
    doc_ids = list(scores)
    single = np.asarray([scores[d] for d in doc_ids], dtype=np.float64).astype(np.float32).tolist()
    return [doc_id for _, doc_id in sorted(zip(single, doc_ids), reverse=True)]


def ranked_run(run: ScoreRun, query_ids: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """The run of ``query_ids`` as best-first lists (the :data:`~retrieval_pipeline.core.common.types.Run` shape)."""
    return {q: [(d, float(run[q][d])) for d in trec_eval_order(run[q])] for q in query_ids if q in run}


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
    max_relevant = max(sum(1 for g in judged.values() if g >= RELEVANCE_THRESHOLD) for judged in qrels.values())
    cutoffs = [m.k for m in metrics if m.k is not None]
    depth = max([max_run, max_relevant, *cutoffs, 1])
    judged = judge(ranked, {q: dict(qrels[q]) for q in query_ids}, depth, depth)
    return {m.name: compute_metric(m.name, judged) for m in metrics}
