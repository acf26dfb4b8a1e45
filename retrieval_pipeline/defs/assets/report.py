"""The evaluation report: one self-contained HTML file per dataset, and its summary in the Dagster UI."""

from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.common.atomic import atomic_write_text
from retrieval_pipeline.core.common.cache.result_cache import using_result_cache
from retrieval_pipeline.core.report.assemble import assemble_report, report_metadata
from retrieval_pipeline.core.report.html import build_report
from retrieval_pipeline.core.report.ui_summary import summary_markdown
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.mlflow_resource import MLflowResource
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import PipelineSettings

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]

#: How many past ``retrieval_metrics`` materialisations of the dataset feed the weekly trend (newest first).
TREND_HISTORY_LIMIT = 500
#: Upper bound of the markdown metadata entry (charts are left out beyond it; Dagster stores metadata in its database).
SUMMARY_MAX_BYTES = 300_000

_METRICS_KEY = dg.AssetKey("retrieval_metrics")
_EXPORTS_KEY = dg.AssetKey("evaluation_exports")


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


def export_artifacts(settings: PipelineSettings, dataset: str, retrievers: Iterable[str]) -> list[Path]:
    """The dataset's ``evaluation_exports`` files that exist: ``evaluation_results.json``, ``qrels.txt``, ``<retriever>.run``."""
    names = ["evaluation_results.json", "qrels.txt", *(f"{r}.run" for r in retrievers)]
    return [path for path in (settings.export_path(dataset, name) for name in names) if path.is_file()]


# after evaluation_exports, so that the exports logged to MLflow are this evaluation's. The upstream frames are
# assemble_report's keyword arguments again (core/report/assemble.py), on purpose: Dagster wires an input by its
# parameter's name, and core never imports Dagster
@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"html"}, deps=[_EXPORTS_KEY])
def evaluation_report(
    context: dg.AssetExecutionContext,
    settings: PipelineSettings,
    mlflow: MLflowResource,
    metric_significance: pd.DataFrame,
    retriever_pairs: pd.DataFrame,
    query_results: pd.DataFrame,
    fusion_sweep: pd.DataFrame,
    failure_buckets: pd.DataFrame,
    retrieval_dataset: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult:
    """A self-contained HTML report of the dataset's evaluation, at ``data/out/exports/<dataset>/report.html``.

    Comparison table with confidence intervals and significance marks against the baseline, every retriever
    against every other (a verdict line and a matrix per headline metric), bars with
    CI whiskers, the rank histogram, the fusion sweep curve, the weekly trend of the headline metrics
    (from this dataset's past ``retrieval_metrics`` materialisations), the failure buckets and the worst
    queries with their top hits. The metadata holds the path, the size, the headline means (4 digits)
    and a compact table with two charts. With ``MLFLOW_TRACKING_URI`` set (the ``mlflow`` resource), the
    evaluation is also logged to MLflow: a parent run with the dataset's settings, the report and the
    exports (:func:`export_artifacts`), and a child run per retriever with its spec's settings, every mean
    and its CI, at the evaluation week as step.
    """
    dataset = context.partition_key
    run_id = _run_id(context)
    history = metrics_history(context.instance, dataset, exclude_run=run_id)
    inputs = {"metric_significance": metric_significance, "query_results": query_results, "fusion_sweep": fusion_sweep}
    inputs |= {"retriever_pairs": retriever_pairs}
    inputs |= {"failure_buckets": failure_buckets, "retrieval_dataset": retrieval_dataset, "corpus": corpus}
    report = assemble_report(dataset, settings.dataset(dataset), history, **inputs, specs=settings.registry().retrievers.specs)
    with using_result_cache(settings.cache_path()):  # charts drawn once per content (chart_key)
        text = build_report(report.data)
        summary = summary_markdown(report.data, max_bytes=SUMMARY_MAX_BYTES)
    path = atomic_write_text(settings.export_path(dataset, "report.html"), text)
    if report.empty:
        context.log.info(f"evaluation_report {dataset}: no data in {', '.join(report.empty)}; those sections say so")
    when = datetime.now(timezone.utc)
    artifacts = [path, *export_artifacts(settings, dataset, report.mlflow_retrievers)]
    logged = mlflow.log(dataset, when, report.mlflow_params, report.mlflow_retrievers, artifacts, dagster_run_id=run_id)
    tracked = {}
    if logged is not None:
        tracked = {"mlflow_run_id": logged.run_id, "mlflow_step": logged.step, "mlflow_metrics": logged.n_metrics}
        tracked["mlflow_child_runs"] = dict(logged.child_run_ids)
    metadata = {**tracked, "report": dg.MetadataValue.path(str(path)), **report_metadata(report, text, summary)}
    return dg.MaterializeResult(metadata=dagster_metadata(metadata))
