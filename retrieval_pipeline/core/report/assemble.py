"""What the ``evaluation_report`` asset puts together: the report's data, its MLflow params, its metadata.

The means are computed from ``query_results`` here, not read from ``retrieval_metrics``: a failing ERROR
floor there (a blocking check) must not stop the report, which is what one opens to see why. The weekly
trend joins the current evaluation to the dataset's earlier ``retrieval_metrics`` materialisations.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval_pipeline.core.asset_metadata import Markdown
from retrieval_pipeline.core.datasets.config import DatasetConfig
from retrieval_pipeline.core.evaluation.scoring import metric_table
from retrieval_pipeline.core.report.data import ReportData, trend_frame
from retrieval_pipeline.core.report.html import headline_metadata


@dataclass
class AssembledReport:
    """The report's data, and what the asset logs and shows about it."""

    data: ReportData
    empty: list[str]  # input frames without data (their sections say so)
    mlflow_params: dict[str, Any]
    mlflow_metrics: dict[str, dict[str, float]]


def assemble_report(
    dataset: str,
    config: DatasetConfig,
    history: Sequence[tuple[float, Mapping[str, Any]]],
    *,
    metric_significance: pd.DataFrame,
    retriever_pairs: pd.DataFrame,
    query_results: pd.DataFrame,
    fusion_sweep: pd.DataFrame,
    failure_buckets: pd.DataFrame,
    retrieval_dataset: pd.DataFrame,
    corpus: pd.DataFrame,
) -> AssembledReport:
    """The report of one dataset's evaluation; ``history``: ``(timestamp, metadata)`` of earlier evaluations, newest first."""
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
        "retrievers": list(config.retrievers),
        "baseline": config.baseline_retriever,
        "queries": int(query_results["query_id"].nunique()),
        "statistics": config.statistics.model_dump(),
        "tuning_objective": config.tuning.objective,
    }
    metrics = table.frame.set_index("retriever").select_dtypes("number").to_dict("index")
    empty = [name for name, frame in data.frames().items() if frame.empty]
    return AssembledReport(data, empty, params, metrics)


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
