"""Evaluation: runs per retriever, per-query results, and the metric table with its checks."""

import math
from typing import Optional

import pandas as pd
import dagster as dg

from retrieval_pipeline.core.context_metrics import context_qa_metrics
from retrieval_pipeline.core.evaluate import batched_run, frame_to_runs, runs_to_frame
from retrieval_pipeline.core.evaluation_results import evaluation_results, write_evaluation_results
from retrieval_pipeline.core.metrics import METRIC_DESCRIPTIONS, aggregate, per_query_metrics
from retrieval_pipeline.core.quality_gates import GateResult, check_name, drift_check_name, drift_gate, threshold_gate
from retrieval_pipeline.core.reports import comparison_table
from retrieval_pipeline.core.retrieval.bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval.dense import DenseRetriever
from retrieval_pipeline.core.retrieval.fusion import HybridRetriever
from retrieval_pipeline.core.frames import from_frame
from retrieval_pipeline.core.judges.llm import LLMRetrievalJudge
from retrieval_pipeline.core.retrieval_dataset import qrels_from_records
from retrieval_pipeline.core.types import Case, Document
from retrieval_pipeline.defs.ingest import CASE_JSON_FIELDS
from retrieval_pipeline.core.trec import write_trec_qrels, write_trec_run
from retrieval_pipeline.defs.indexes import bm25_index, dense_index
from retrieval_pipeline.defs.partitions import REGISTRY, dataset_partitions
from retrieval_pipeline.defs.resources import EncoderResource, LLMResource, PipelineSettings, llm_metadata

HEADLINE = ["hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@5", "recall@10", "precision@5", "f1@5", "mrr",
            "context_coverage@5", "best_match_position@5",
            "ndcg@10", "not_found_rate", "avg_rank_when_found", "latency_mean_ms", "latency_p95_ms"]


class RunsConfig(dg.Config):
    """Per-run knobs for ``retrieval_runs``."""

    sample_size: Optional[int] = None  # evaluate only the first N queries (a quick look; metrics say so)


@dg.asset(partitions_def=dataset_partitions, group_name="evaluation", kinds={"pandas"}, deps=[bm25_index, dense_index])
def retrieval_runs(
    context: dg.AssetExecutionContext,
    config: RunsConfig,
    settings: PipelineSettings,
    encoder: EncoderResource,
    retrieval_dataset: pd.DataFrame,
) -> dg.MaterializeResult[pd.DataFrame]:
    """Ranked results of every retriever for every query, with per-query latency.

    All queries are ranked in one batch; latency is measured one query at a time on the first
    ``latency_sample`` queries (the dense retriever's includes encoding the query).

    Retrievers: ``bm25``, ``dense_minilm``, ``hybrid_minmax_a<alpha>`` (weighted min-max fusion) and
    ``hybrid_rrf_k<k>`` (Reciprocal Rank Fusion), each retrieving ``depth`` hits per query.
    """
    pk = context.partition_key
    cfg = settings.dataset(pk).retrievers
    bm25 = BM25Retriever.load(settings.index_dir(pk, "bm25"))
    # no embedding cache for queries here: latency must include encoding the query, as a user would see it
    dense = DenseRetriever.load(settings.index_dir(pk, "dense_minilm"), encoder.get_encoder())
    names = cfg.names
    retrievers = [
        bm25,
        dense,
        HybridRetriever(names[2], [bm25, dense], method="minmax", alpha=cfg.hybrid_minmax.alpha, depth=cfg.depth),
        HybridRetriever(names[3], [bm25, dense], method="rrf", rrf_k=cfg.hybrid_rrf.k, depth=cfg.depth),
    ]
    queries = dict(zip(retrieval_dataset["id"], retrieval_dataset["query"]))
    if config.sample_size is not None:
        queries = dict(list(queries.items())[: config.sample_size])
    runs = [batched_run(r, queries, cfg.depth, latency_sample=cfg.latency_sample) for r in retrievers]
    frame = runs_to_frame(runs)
    return dg.MaterializeResult(value=frame, metadata={
        "queries": len(queries), "queries_in_dataset": len(retrieval_dataset), "depth": cfg.depth, "retrievers": ", ".join(r.name for r in retrievers),
        "latency_sample": min(cfg.latency_sample, len(queries)),
    })


class JudgeConfig(dg.Config):
    """The LLM judge of retrieved results: off unless asked for (it costs one LLM call per query and retriever)."""

    judge_retrieved: bool = False
    judge_top_k: int = 5
    pass_at: float = 0.7


JUDGE_COLUMNS = ["judge", "judge_quality", "judge_completeness", "judge_relevance", "judge_pass", "judge_error"]


@dg.asset(partitions_def=dataset_partitions, group_name="evaluation", kinds={"pandas"})
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
    qrels = _evaluated_qrels(retrieval_runs, retrieval_dataset)
    context_extra = _context_columns(config, raw_cases, corpus) if config.kind == "context_qa" else None
    frames = []
    for name, tr in frame_to_runs(retrieval_runs).items():
        pq = per_query_metrics(tr.run, qrels)
        if context_extra is not None:
            pq = pq.merge(context_extra(tr.run, qrels), on="query_id", how="left")
        pq.insert(0, "retriever", name)
        pq["latency_ms"] = pq["query_id"].map(tr.latency_ms)
        pq["top_hits"] = pq["query_id"].map(lambda q: [d for d, _ in tr.run.get(q, [])[:10]])
        frames.append(pq)
    frame = pd.concat(frames, ignore_index=True)
    meta: dict = {"rows": len(frame), "queries": len(qrels)}
    for col in JUDGE_COLUMNS:
        frame[col] = None
    if judge_cfg.judge_retrieved:
        with llm.open() as client:
            if client is None:
                context.log.warning("judge_retrieved is on but no LLM endpoint is configured: judge scores stay null")
            else:
                frame = _judge_retrieved(frame, client, retrieval_dataset, corpus, judge_cfg)
                meta.update(llm_metadata(client))
    meta["judged_queries"] = int(frame["judge_quality"].notna().sum())
    if config.kind == "context_qa":
        meta["similarity_settings"] = dg.MetadataValue.json(config.context_qa.similarity.model_dump())
    return dg.MaterializeResult(value=frame, metadata=meta)


def _judge_retrieved(frame: pd.DataFrame, client, retrieval_dataset: pd.DataFrame, corpus: pd.DataFrame, cfg: JudgeConfig) -> pd.DataFrame:
    """Fill the judge columns: one LLM call per (retriever, query) over the top ``judge_top_k`` texts."""
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    questions = dict(zip(retrieval_dataset["id"], retrieval_dataset["query"]))
    items = [(questions[q], [texts[d] for d in list(hits)[: cfg.judge_top_k] if d in texts])
             for q, hits in zip(frame["query_id"], frame["top_hits"])]
    scores = pd.DataFrame(LLMRetrievalJudge(client, pass_at=cfg.pass_at).score_all(items), index=frame.index)
    frame = frame.copy()
    for col in JUDGE_COLUMNS:
        frame[col] = scores[col]
    return frame


def _evaluated_qrels(retrieval_runs: pd.DataFrame, retrieval_dataset: pd.DataFrame) -> dict[str, dict[str, int]]:
    """The dataset's qrels for the queries that were run: all of them unless the run was sampled."""
    evaluated = set(retrieval_runs["query_id"])
    return {q: rel for q, rel in qrels_from_records(retrieval_dataset.to_dict("records")).items() if q in evaluated}


def _context_columns(config, raw_cases: pd.DataFrame, corpus: pd.DataFrame):
    """A function (run, qrels) -> the context-QA columns that per_query_metrics does not already give."""
    sim_settings = config.context_qa.similarity.settings()
    expected = {c.case_id: str(c.extra.get("expected_context", "")) for c in from_frame(raw_cases, Case, CASE_JSON_FIELDS)}
    chunks = {d.doc_id: d for d in from_frame(corpus, Document)}

    def columns(run, qrels) -> pd.DataFrame:
        frame = context_qa_metrics(run, qrels, expected, chunks, sim_settings)
        keep = [c for c in frame.columns if c == "query_id" or c.startswith(("context_coverage", "best_match_position", "mrr@", "hit@"))]
        return frame[keep]

    return columns


def _build_check_specs() -> list[dg.AssetCheckSpec]:
    """One floor check per metric any registered dataset sets a threshold on, plus the drift checks."""
    metrics = sorted({m for d in REGISTRY.datasets.values() for m in d.thresholds})
    drift = sorted({d.drift.metric for d in REGISTRY.datasets.values()})
    specs = [dg.AssetCheckSpec(check_name(m), asset="retrieval_metrics", blocking=True,
                               description=f"Every checked retriever's {m} is at least the dataset's floor.") for m in metrics]
    specs += [dg.AssetCheckSpec(drift_check_name(m), asset="retrieval_metrics",
                                description=f"{m} did not fall more than the allowed share below the previous evaluation.") for m in drift]
    return specs


CHECK_SPECS = _build_check_specs()


def _previous_values(context: dg.AssetExecutionContext, metric: str) -> dict[str, float] | None:
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[context.partition_key]), limit=1
    ).records
    if not records:
        return None
    meta = records[0].asset_materialization.metadata
    suffix = f"/{metric}"
    return {k[: -len(suffix)]: float(v.value) for k, v in meta.items() if k.endswith(suffix) and v.value is not None}


def _numeric_metrics(group: pd.DataFrame) -> pd.DataFrame:
    """The per-query frame without bookkeeping columns; judge scores stay (as floats; null when not judged)."""
    frame = group.drop(columns=["retriever", "latency_ms", "top_hits", "judge", "judge_error"], errors="ignore")
    for col in ("judge_quality", "judge_completeness", "judge_relevance", "judge_pass"):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def _check_result(gate: GateResult) -> dg.AssetCheckResult:
    meta = {"threshold": gate.threshold, **{k: (None if math.isnan(v) else v) for k, v in gate.values.items()}}
    return dg.AssetCheckResult(
        check_name=gate.name, passed=gate.passed, description=gate.description,
        severity=dg.AssetCheckSeverity.ERROR if gate.severity == "ERROR" else dg.AssetCheckSeverity.WARN,
        metadata={k: v for k, v in meta.items() if v is not None},
    )


@dg.asset(partitions_def=dataset_partitions, group_name="evaluation", kinds={"pandas"}, check_specs=CHECK_SPECS)
def retrieval_metrics(context: dg.AssetExecutionContext, settings: PipelineSettings, query_results: pd.DataFrame):
    """Retrievers compared: hit rate and recall @1/5/10, P@5, F1@5, MRR, nDCG@10, not-found rate, average rank, latency.

    ``hit_rate@k`` = share of queries with ANY gold document in the top k (Success@k);
    ``recall@k`` = mean share of a query's gold documents in the top k. Checks compare every checked
    retriever with the dataset's floors, and the drift metric with the previous materialisation.
    """
    config = settings.dataset(context.partition_key)
    by_retriever = {
        str(name): aggregate(_numeric_metrics(group), group["latency_ms"].dropna().tolist() or None)
        for name, group in query_results.groupby("retriever", sort=False)
    }
    table = pd.DataFrame(by_retriever).T.reset_index(names="retriever")

    checked = config.checked_retrievers or list(by_retriever)
    gates = [threshold_gate(m, t.min, t.severity, by_retriever, checked) for m, t in config.thresholds.items()]
    gates.append(drift_gate(config.drift.metric, config.drift.max_relative_drop, by_retriever,
                            _previous_values(context, config.drift.metric), checked))
    spec_names = {s.name for s in CHECK_SPECS}
    for gate in gates:
        if gate.name not in spec_names:  # the definitions were loaded from another registry than this run's
            context.log.warning(f"no check named {gate.name} is defined; result not recorded as a check: {gate.description}")
    results = [_check_result(g) for g in gates if g.name in spec_names]
    # checks exist per asset, not per partition: a floor another dataset sets passes here with a note
    results += [dg.AssetCheckResult(check_name=n, passed=True, description=f"no such threshold configured for dataset {context.partition_key}")
                for n in sorted(spec_names - {g.name for g in gates})]

    numeric = {f"{r}/{m}": float(v) for r, ms in by_retriever.items() for m, v in ms.items() if isinstance(v, (int, float)) and not math.isnan(v)}
    columns = [c for c in HEADLINE if c in table.columns]
    return dg.MaterializeResult(
        value=table,
        metadata={
            **numeric,
            "comparison": dg.MetadataValue.md(comparison_table(by_retriever, columns)),
            "metric_definitions": dg.MetadataValue.md("\n".join(f"- **{k}**: {v}" for k, v in METRIC_DESCRIPTIONS.items() if k in columns)),
            "queries": int(query_results["query_id"].nunique()),
        },
        check_results=results,
    )


@dg.asset(partitions_def=dataset_partitions, group_name="evaluation", kinds={"json"})
def evaluation_exports(
    context: dg.AssetExecutionContext, settings: PipelineSettings, retrieval_runs: pd.DataFrame, retrieval_dataset: pd.DataFrame
) -> dg.MaterializeResult:
    """TREC run and qrels files (read unchanged by trec_eval, ranx, ir_measures) and ``evaluation_results.json``.

    Written to ``data/out/exports/<dataset>/``: ``qrels.txt``, ``<retriever>.run`` and
    ``evaluation_results.json`` (per search type: metrics and per-question results).
    """
    records = retrieval_dataset.to_dict("records")
    qrels = _evaluated_qrels(retrieval_runs, retrieval_dataset)
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
    return dg.MaterializeResult(metadata={
        "qrels": dg.MetadataValue.path(str(qrels_path)),
        "evaluation_results": dg.MetadataValue.path(str(results_path)),
        **{f"run/{name}": dg.MetadataValue.path(str(p)) for name, p in run_paths.items()},
    })
