"""The metrics: each one's formula and entry in one module under ``families/``, everything else derived from them.

==================  ==========================================================================================
module              holds
==================  ==========================================================================================
``families/``       one module per metric: its formula beside its entries (name, description, direction,
                    aggregation, aliases, cut-off rule, trec_eval name, views, tuning, frame column), in a
                    sub-folder by the judgements the formula reads: ``binary/``, ``graded/``, ``incomplete/``
``columns``         the entries of the columns computed elsewhere (context-QA, the LLM judge, summaries)
``entry``           what an entry holds (:class:`MetricInfo`) and the rules it must keep
``judging``         a run judged against the qrels (:class:`Judged`): in list order, or ranked as trec_eval ranks
``registry``        the entries collected, and every lookup: descriptions, directions, headline and views
``names``           the names a user types, parsed (:func:`parse_metric`): aliases and cut-off rules of the entries
``frame``           the pipeline's per-query frame (:func:`per_query_metrics`, columns from the entries) and
                    :func:`aggregate`
``ranked``          per-query values of parsed names on a run of scores (the public API's ``evaluate``)
==================  ==========================================================================================

**Adding a metric** is one module in a sub-folder of ``families/`` (copy ``incomplete/judged.py``: a formula
``(Judged, k) -> values`` and ``ENTRIES``) and its test. The registry finds it; with ``aliases`` the API and CLI parse it; with
``frame`` the pipeline's per-query frame has it; ``views`` and ``objective`` put it in the console, the
report and the fusion sweep.
"""

from __future__ import annotations

from retrieval_pipeline.core.evaluation.metrics.entry import VIEWS, MetricInfo, View
from retrieval_pipeline.core.evaluation.metrics.frame import METRIC_DESCRIPTIONS, aggregate, per_query_metrics
from retrieval_pipeline.core.evaluation.metrics.judging import RELEVANCE_THRESHOLD, Judged, judge, judge_scores
from retrieval_pipeline.core.evaluation.metrics.names import MetricName, known_metrics_hint, parse_metric, parse_metrics
from retrieval_pipeline.core.evaluation.metrics.registry import (
    DEFAULT_KS,
    HEADLINE_COLUMNS,
    METRICS,
    UnknownMetricError,
    compute_metric,
    describe_metric,
    headline_columns,
    higher_is_better,
    is_metric_column,
    known_metric_names,
    metric,
    metric_definitions_md,
    metric_descriptions,
    metric_label,
    resolve_metric,
    tuning_objectives,
    validate_metric_name,
    view_columns,
)

__all__ = [
    "DEFAULT_KS",
    "HEADLINE_COLUMNS",
    "METRICS",
    "METRIC_DESCRIPTIONS",
    "RELEVANCE_THRESHOLD",
    "VIEWS",
    "Judged",
    "MetricInfo",
    "MetricName",
    "UnknownMetricError",
    "View",
    "aggregate",
    "compute_metric",
    "describe_metric",
    "headline_columns",
    "higher_is_better",
    "is_metric_column",
    "judge",
    "judge_scores",
    "known_metric_names",
    "known_metrics_hint",
    "metric",
    "metric_definitions_md",
    "metric_descriptions",
    "metric_label",
    "parse_metric",
    "parse_metrics",
    "per_query_metrics",
    "resolve_metric",
    "tuning_objectives",
    "validate_metric_name",
    "view_columns",
]
