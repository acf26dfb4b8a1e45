"""The evaluation report: one self-contained HTML file per dataset, and its summary in the Dagster UI."""

import time
from datetime import datetime, timezone
from typing import Any

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.atomic import atomic_write_text
from retrieval_pipeline.core.evaluation.scoring import metric_table
from retrieval_pipeline.core.report.data import ReportData, trend_frame
from retrieval_pipeline.core.report.html import build_report, headline_metadata, summary_markdown
from retrieval_pipeline.core.result_cache import using_result_cache
from retrieval_pipeline.defs.mlflow_resource import MLflowResource
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import PipelineSettings

#: How many past ``retrieval_metrics`` materialisations of the dataset feed the weekly trend (newest first).
TREND_HISTORY_LIMIT = 500
#: Upper bound of the markdown metadata entry (charts are left out beyond it; Dagster stores metadata in its database).
SUMMARY_MAX_BYTES = 300_000

_METRICS_KEY = dg.AssetKey("retrieval_metrics")


def metrics_history(
    instance: dg.DagsterInstance, partition: str, limit: int = TREND_HISTORY_LIMIT, *, exclude_run: str | None = None
) -> list[tuple[float, dict[str, Any]]]:
    """``(timestamp, plain metadata)`` of the dataset's past ``retrieval_metrics`` materialisations, newest first.

    ``exclude_run``: leave out that run's materialisation (the report adds the current evaluation itself).
    """
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=_METRICS_KEY, asset_partitions=[partition]), limit=limit
    ).records
    return [
        (record.timestamp, {k: v.value for k, v in record.asset_materialization.metadata.items()})
        for record in records
        if exclude_run is None or record.run_id != exclude_run
    ]


def _run_id(context: dg.AssetExecutionContext) -> str | None:
    """The Dagster run's id; None when the asset function is invoked directly (tests), outside any run."""
    try:
        return context.run.run_id
    except dg.DagsterError:  # DagsterInvalidPropertyError: no run when invoked directly
        return None


@dg.asset(partitions_def=dataset_partitions, group_name="evaluation", kinds={"html"})
def evaluation_report(
    context: dg.AssetExecutionContext,
    settings: PipelineSettings,
    mlflow: MLflowResource,
    metric_significance: pd.DataFrame,
    query_results: pd.DataFrame,
    fusion_sweep: pd.DataFrame,
    failure_buckets: pd.DataFrame,
    retrieval_dataset: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult:
    """A self-contained HTML report of the dataset's evaluation, at ``data/out/exports/<dataset>/report.html``.

    Comparison table with confidence intervals and significance marks against the baseline, bars with
    CI whiskers, the rank histogram, the fusion sweep curve, the weekly trend of the headline metrics
    (from this dataset's past ``retrieval_metrics`` materialisations), the failure buckets and the worst
    queries with their top hits. The metadata holds the path, the size, the headline means (4 digits)
    and a compact table with two charts. With ``MLFLOW_TRACKING_URI`` set (the ``mlflow`` resource), the
    evaluation is also logged to MLflow: params, every mean with the evaluation week as step, the report.
    """
    dataset = context.partition_key
    config = settings.dataset(dataset)
    run_id = _run_id(context)
    # the means are computed here, not read from retrieval_metrics: a failing ERROR floor there (a blocking
    # check) must not stop the report, which is what one opens to see why
    table = metric_table(query_results, config.retrievers)
    retrieval_metrics = table.frame
    current = (time.time(), {"metrics": table.by_retriever})
    trend = trend_frame([current, *metrics_history(context.instance, dataset, exclude_run=run_id)])
    data = ReportData(
        dataset=dataset,
        description=config.description,
        baseline=config.baseline_retriever,
        retrievers=config.retrievers,
        metrics=retrieval_metrics,
        significance=metric_significance,
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
    with using_result_cache(settings.cache_path()):  # charts drawn once per content (html_report.chart_key)
        text = build_report(data)
        summary = summary_markdown(data, max_bytes=SUMMARY_MAX_BYTES)
    path = atomic_write_text(settings.export_path(dataset, "report.html"), text)
    empty = [name for name, frame in data.frames().items() if frame.empty]
    if empty:
        context.log.info(f"evaluation_report {dataset}: no data in {', '.join(empty)}; those sections say so")
    logged = mlflow.log(
        dataset,
        datetime.now(timezone.utc),
        params={
            "retrievers": list(config.retrievers),
            "baseline": config.baseline_retriever,
            "queries": int(query_results["query_id"].nunique()),
            "statistics": config.statistics.model_dump(),
            "tuning_objective": config.tuning.objective,
        },
        metrics=retrieval_metrics.set_index("retriever").select_dtypes("number").to_dict("index"),
        artifacts=[path],
        dagster_run_id=run_id,
    )
    tracked = {} if logged is None else {"mlflow_run_id": logged.run_id, "mlflow_step": logged.step, "mlflow_metrics": logged.n_metrics}
    return dg.MaterializeResult(
        metadata={
            **tracked,
            "report": dg.MetadataValue.path(str(path)),
            "size_kb": round(len(text.encode("utf-8")) / 1024, 1),
            "trend_weeks": int(trend["week"].nunique()),
            "trend_points": len(trend),
            "inputs_without_data": dg.MetadataValue.json(empty),
            "headline": dg.MetadataValue.json(headline_metadata(data)),
            "summary": dg.MetadataValue.md(summary),
        }
    )
