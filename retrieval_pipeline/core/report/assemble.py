"""What the ``evaluation_report`` asset puts together: the report's data, its MLflow runs, its metadata.

The means are computed from ``query_results`` here, not read from ``retrieval_metrics``: a failing ERROR
floor there (a blocking check) must not stop the report, which is what one opens to see why. The weekly
trend joins the current evaluation to the dataset's earlier ``retrieval_metrics`` materialisations.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd
from pydantic import BaseModel

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.evaluation.scoring import metric_table
from retrieval_pipeline.core.evaluation.statistics.stats import StatisticsSettings
from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import TuningSettings
from retrieval_pipeline.core.report.data import ReportData, trend_frame
from retrieval_pipeline.core.report.mlflow_log import RetrieverResult
from retrieval_pipeline.core.report.ui_summary import headline_metadata


class ReportedSettings(Protocol):
    """What the report reads of a dataset's settings (the registry's ``DatasetConfig`` is one; report never imports it)."""

    description: str
    retrievers: list[str]
    statistics: StatisticsSettings
    tuning: TuningSettings

    @property
    def baseline_retriever(self) -> str: ...

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


@dataclass
class AssembledReport:
    """The report's data, and what the asset logs and shows about it."""

    data: ReportData
    empty: list[str]  # input frames without data (their sections say so)
    mlflow_params: dict[str, Any]  # the parent run's
    mlflow_retrievers: dict[str, RetrieverResult]  # a child run each


def assemble_report(
    dataset: str,
    config: ReportedSettings,
    history: Sequence[tuple[float, Mapping[str, Any]]],
    *,
    metric_significance: pd.DataFrame,
    retriever_pairs: pd.DataFrame,
    query_results: pd.DataFrame,
    fusion_sweep: pd.DataFrame,
    failure_buckets: pd.DataFrame,
    retrieval_dataset: pd.DataFrame,
    corpus: pd.DataFrame,
    specs: Mapping[str, BaseModel],
) -> AssembledReport:
    """The report of one dataset's evaluation.

    ``history``: ``(timestamp, metadata)`` of earlier evaluations, newest first. ``specs``: the registry's
    retriever specs by name, whose settings become the MLflow params of each retriever's child run.
    """
    table = metric_table(query_results, config.retrievers)
    trend = trend_frame([(time.time(), {"metrics": table.by_retriever}), *history])
    data = ReportData(
        dataset=dataset,
        description=config.description,
        baseline=config.baseline_retriever,
        retrievers=config.retrievers,
        metrics=table.frame,
        significance=metric_significance,
        pairs=retriever_pairs,
        query_results=query_results,
        fusion_sweep=fusion_sweep,
        failure_buckets=failure_buckets,
        retrieval_dataset=retrieval_dataset,
        corpus=corpus,
        trend=trend,
        alpha=config.statistics.alpha,
        confidence=config.statistics.confidence,
        objective=config.tuning.objective,
    )
    params = {
        **config.model_dump(mode="json"),
        "baseline": config.baseline_retriever,
        "queries": int(query_results["query_id"].nunique()),
        "corpus_documents": len(corpus),
    }
    empty = [name for name, frame in data.frames().items() if frame.empty]
    return AssembledReport(data, empty, params, mlflow_retrievers(table.frame, metric_significance, specs))


def mlflow_retrievers(metrics: pd.DataFrame, significance: pd.DataFrame, specs: Mapping[str, BaseModel]) -> dict[str, RetrieverResult]:
    """A child run per retriever of the metric table, in its order: its spec's settings, every mean, and the CIs.

    ``metrics``: the metric table (a ``retriever`` column, one numeric column per metric). ``significance``:
    the ``metric_significance`` frame, whose ``ci_low``/``ci_high`` give each (retriever, metric) its interval.
    A retriever without a spec in ``specs`` (evaluated under an earlier registry) gets no params.
    """
    means = metrics.set_index("retriever").select_dtypes("number").to_dict("index")
    intervals: dict[str, dict[str, tuple[float, float]]] = {}
    for row in significance[["retriever", "metric", "ci_low", "ci_high"]].itertuples(index=False):
        intervals.setdefault(str(row.retriever), {})[str(row.metric)] = (row.ci_low, row.ci_high)
    return {
        str(name): RetrieverResult(
            settings=specs[name].model_dump(mode="json") if name in specs else {},
            means=values,
            intervals=intervals.get(str(name), {}),
        )
        for name, values in means.items()
    }


def report_metadata(report: AssembledReport, text: str, summary: str) -> dict[str, Any]:
    """Plain metadata of a written report (the asset adds the path and the MLflow run)."""
    return {
        "size_kb": round(len(text.encode("utf-8")) / 1024, 1),
        "trend_weeks": int(report.data.trend["week"].nunique()),
        "trend_points": len(report.data.trend),
        "inputs_without_data": report.empty,
        "headline": headline_metadata(report.data),
        "summary": Markdown(summary),
    }
