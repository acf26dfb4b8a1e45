"""Per-query values of any parsed metric name, on a run of scores ranked the way trec_eval ranks it.

Every parsed name is a metric of the registry, computed by its formula
(:func:`~retrieval_pipeline.core.evaluation.metrics.registry.compute_metric`). A name without a cut-off
reads the full ranking. The run is judged by
:func:`~retrieval_pipeline.core.evaluation.metrics.judging.judge_scores`, on flat arrays over all queries.

Conventions, the same as :mod:`~retrieval_pipeline.core.evaluation.metrics.frame` and checked against
pytrec_eval in ``retrieval_pipeline_tests/test_api.py``:

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

from retrieval_pipeline.core.evaluation.metrics.judging import FlatScores, ScoreRun, judge_scores
from retrieval_pipeline.core.evaluation.metrics.names import MetricName
from retrieval_pipeline.core.evaluation.metrics.registry import compute_metric


def per_query_values(
    run: ScoreRun | FlatScores, qrels: Mapping[str, Mapping[str, int]], metrics: Sequence[MetricName]
) -> dict[str, np.ndarray]:
    """``{canonical metric name: values}`` in qrels query order.

    Args:
        run: ``{query_id: {doc_id: score}}``, or the same as flat arrays (:class:`FlatScores`).
        qrels: ``{query_id: {doc_id: grade}}``, not empty.
        metrics: Parsed names (:func:`~retrieval_pipeline.core.evaluation.metrics.names.parse_metrics`).

    Returns:
        One float array per metric, one value per qrels query.
    """
    judged = judge_scores(run, qrels)
    return {m.name: compute_metric(m.name, judged) for m in metrics}
