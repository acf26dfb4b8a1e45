"""Evaluation: per-query results, the metric table (its checks are declared in ``checks.py``), significance, every
retriever against every other, exports."""

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.common.cache.result_cache import using_result_cache
from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.evaluation.exports.results import evaluation_results, write_evaluation_results
from retrieval_pipeline.core.evaluation.exports.tables import pairs_metadata, significance_metadata
from retrieval_pipeline.core.evaluation.exports.trec_writer import write_trec_qrels, write_trec_run
from retrieval_pipeline.core.evaluation.history import SNAPSHOT_KEY, Evaluation, snapshot_path, write_snapshot
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.core.evaluation.scoring import JUDGE_COLUMNS, evaluate_dataset, evaluated_qrels, per_query_results
from retrieval_pipeline.core.evaluation.statistics.pairwise import retriever_pairs as all_pairs
from retrieval_pipeline.core.evaluation.statistics.significance import significance_table
from retrieval_pipeline.core.filtering.judges.llm import LLMRetrievalJudge
from retrieval_pipeline.core.retrieval.run_loop import frame_to_runs
from retrieval_pipeline.defs.assets.trends import trend_observation
from retrieval_pipeline.defs.checks import CHECK_SPECS, check_results
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import LLMResource, PipelineSettings, llm_metadata

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


class JudgeConfig(dg.Config):
    """The LLM judge of retrieved results: off unless asked for (it costs one LLM call per query and retriever)."""

    judge_retrieved: bool = False
    judge_top_k: int = 5
    pass_at: float = 0.7


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
def query_results(
    context: dg.AssetExecutionContext,
    config: JudgeConfig,
    settings: PipelineSettings,
    llm: LLMResource,
    retrieval_runs: pd.DataFrame,
    retrieval_dataset: pd.DataFrame,
    raw_cases: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult[pd.DataFrame]:
    """Per-query metrics for every retriever (kept so any aggregate can be traced to its queries).

    Context-QA datasets add, per max hits k in 1/5/10: context coverage (best similarity of a retrieved
    chunk to the expected context), best-match position and MRR@k, with the similarity settings recorded.
    With ``judge_retrieved``, an LLM scores each query's top k for quality, completeness and relevance in
    [0, 1] (pass at >= 0.7); otherwise those columns are null, never 0.
    """
    judge_cfg = config
    config = settings.dataset(context.partition_key)
    adapter = adapter_for(config)
    with using_result_cache(settings.cache_path()):  # context-QA similarities computed once per (text, context, settings)
        frame = per_query_results(
            retrieval_runs, retrieval_dataset, adapter.extra_query_columns(config, raw_cases, corpus, per_query_metrics)
        )
    meta: dict = {"rows": len(frame), "queries": int(frame["query_id"].nunique())}
    if judge_cfg.judge_retrieved:
        with llm.open() as client, progress_to(context.log.info):
            if client is None:
                context.log.warning("judge_retrieved is on but no LLM endpoint is configured: judge scores stay null")
            else:
                frame = _judge_retrieved(frame, client, retrieval_dataset, corpus, judge_cfg)
                meta.update(llm_metadata(client))
    meta["judged_queries"] = int(frame["judge_quality"].notna().sum())
    meta.update(adapter.metadata(config))
    return dg.MaterializeResult(value=frame, metadata=dagster_metadata(meta))


def _judge_retrieved(frame: pd.DataFrame, client, retrieval_dataset: pd.DataFrame, corpus: pd.DataFrame, cfg: JudgeConfig) -> pd.DataFrame:
    """Fill the judge columns: one LLM call per (retriever, query) over the top ``judge_top_k`` texts."""
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    questions = dict(zip(retrieval_dataset["id"], retrieval_dataset["query"]))
    items = [
        (questions[q], [texts[d] for d in list(hits)[: cfg.judge_top_k] if d in texts])
        for q, hits in zip(frame["query_id"], frame["top_hits"])
    ]
    scores = pd.DataFrame(LLMRetrievalJudge(client, pass_at=cfg.pass_at).score_all(items), index=frame.index)
    frame = frame.copy()
    for col in JUDGE_COLUMNS:
        frame[col] = scores[col]
    return frame


def _earlier_evaluations(context: dg.AssetExecutionContext, metric: str, limit: int = 50) -> list[Evaluation]:
    """This dataset's earlier ``retrieval_metrics`` materialisations (newest first), with their run tags."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[context.partition_key]), limit=limit
    ).records
    out = []
    for record in records:
        meta = record.asset_materialization.metadata
        run = context.instance.get_run_by_id(record.run_id)
        snapshot = meta.get(SNAPSHOT_KEY)
        out.append(
            Evaluation(
                run_id=record.run_id,
                timestamp=record.timestamp,
                tags=dict(run.tags) if run else {},
                snapshot=str(snapshot.value) if snapshot is not None else None,
                values=_metric_values(meta, metric),
            )
        )
    return out


def _metric_values(meta: dict, metric: str) -> dict[str, float]:
    """``{retriever: value}`` of ``metric`` from a materialisation's metadata (``metrics`` JSON, else flat keys)."""
    table = meta.get("metrics")
    if table is not None and isinstance(table.value, dict):
        return {r: float(ms[metric]) for r, ms in table.value.items() if isinstance(ms, dict) and ms.get(metric) is not None}
    suffix = f"/{metric}"
    return {k[: -len(suffix)]: float(v.value) for k, v in meta.items() if k.endswith(suffix) and v.value is not None}


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"}, check_specs=CHECK_SPECS)
def retrieval_metrics(context: dg.AssetExecutionContext, settings: PipelineSettings, query_results: pd.DataFrame):
    """Retrievers compared: hit rate and recall @1/5/10, P@5, F1@5, MRR, nDCG@10, not-found rate, average rank, latency.

    The asset page shows the ``headline`` table (hit@1/5/10, MRR, nDCG@10, not-found rate, queries per retriever)
    without a click; the same numbers over time, per dataset, are on ``metric_trends/<dataset>``.

    ``hit_rate@k`` = share of queries with ANY gold document in the top k (Success@k);
    ``recall@k`` = mean share of a query's gold documents in the top k. Checks compare every checked
    retriever with the dataset's thresholds, and the drift metric with the blessed baseline evaluation
    (the previous one unless a run tagged ``retrieval_pipeline/blessed=true`` or ``drift.blessed_run_id``
    names another). Each evaluation keeps its per-query results under ``data/out/history/<dataset>/``.
    """
    dataset = context.partition_key
    config = settings.dataset(dataset)
    snapshot = write_snapshot(query_results, snapshot_path(settings.out_dir, dataset, context.run.run_id))
    evaluated = evaluate_dataset(config, query_results, _earlier_evaluations(context, config.drift.metric))
    # the dataset's own time series (metric_trends/<dataset>): a plot of this partitioned asset would join datasets
    context.log_event(trend_observation(dataset, config, evaluated.table.by_retriever, context.run.run_id))
    roles = {config.baseline_retriever: "baseline", **({config.production: "production"} if config.production else {})}
    return dg.MaterializeResult(
        value=evaluated.table.frame,
        metadata=dagster_metadata(
            {
                **evaluated.metadata(roles=roles),
                SNAPSHOT_KEY: dg.MetadataValue.path(str(snapshot)),
                "queries": int(query_results["query_id"].nunique()),
            }
        ),
        check_results=check_results(evaluated.gates, dataset, context.log),
    )


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
def metric_significance(
    context: dg.AssetExecutionContext, settings: PipelineSettings, query_results: pd.DataFrame
) -> dg.MaterializeResult[pd.DataFrame]:
    """Every headline metric of every retriever with its 95% CI, and its test against the dataset's baseline.

    CIs: percentile bootstrap over queries, paired (one draw of queries for all retrievers), seeded.
    Tests against the baseline retriever on the same queries: Fisher's randomisation test and the paired
    t-test, Holm-corrected across the retrievers per metric. Too few queries: CIs only, no p-value.
    Settings: ``statistics`` in ``datasets.yaml``.
    """
    config = settings.dataset(context.partition_key)
    table = significance_table(query_results, config.retrievers, config.baseline_retriever, config.statistics)
    return dg.MaterializeResult(value=table, metadata=dagster_metadata(significance_metadata(table, config.statistics)))


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
def retriever_pairs(
    context: dg.AssetExecutionContext, settings: PipelineSettings, query_results: pd.DataFrame
) -> dg.MaterializeResult[pd.DataFrame]:
    """Every retriever against every other on the headline metrics: paired delta, its 95% CI, Holm-corrected p.

    One row per metric and pair (the later retriever in the dataset's list against the earlier): the mean
    per-query difference, its paired percentile bootstrap CI, Fisher's randomisation test, Holm-corrected over the
    pairs of each metric. The metadata has a verdict line per metric and a matrix per metric. Too few queries:
    CIs only, no p-value (the note says so). Settings: ``statistics`` in ``datasets.yaml``.
    """
    config = settings.dataset(context.partition_key)
    pairs = all_pairs(query_results, config.retrievers, config.statistics, dataset=context.partition_key)
    return dg.MaterializeResult(value=pairs, metadata=dagster_metadata(pairs_metadata(pairs, config.retrievers, config.statistics)))


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"json"})
def evaluation_exports(
    context: dg.AssetExecutionContext, settings: PipelineSettings, retrieval_runs: pd.DataFrame, retrieval_dataset: pd.DataFrame
) -> dg.MaterializeResult:
    """TREC run and qrels files (read unchanged by trec_eval, ranx, ir_measures) and ``evaluation_results.json``.

    Written to ``data/out/exports/<dataset>/``: ``qrels.txt``, ``<retriever>.run`` and
    ``evaluation_results.json`` (per search type: metrics and per-question results).
    """
    records = retrieval_dataset.to_dict("records")
    qrels = evaluated_qrels(retrieval_runs, retrieval_dataset)
    runs = frame_to_runs(retrieval_runs)
    qrels_path = settings.export_path(context.partition_key, "qrels.txt")
    write_trec_qrels(qrels, qrels_path)
    run_paths = {}
    for name, tr in runs.items():
        run_paths[name] = settings.export_path(context.partition_key, f"{name}.run")
        write_trec_run(tr.run, run_paths[name], tag=name)
    questions = {r["id"]: r["query"] for r in records if r["id"] in qrels}
    results_path = settings.export_path(context.partition_key, "evaluation_results.json")
    write_evaluation_results(evaluation_results(runs, qrels, questions), results_path)
    return dg.MaterializeResult(
        metadata={
            "qrels": dg.MetadataValue.path(str(qrels_path)),
            "evaluation_results": dg.MetadataValue.path(str(results_path)),
            **{f"run/{name}": dg.MetadataValue.path(str(p)) for name, p in run_paths.items()},
        }
    )
