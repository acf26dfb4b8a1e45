"""The verified retrieval dataset: forward-RAG-filtered tuples with hard negatives, in Parquet and JSONL."""

import contextlib
import json

import pandas as pd
import dagster as dg

from retrieval_pipeline.core.frames import from_frame
from retrieval_pipeline.core.judges.llm import LLMForwardRagJudge
from retrieval_pipeline.core.judges.offline import OfflineLexicalJudge, passthrough_decision
from retrieval_pipeline.core.negatives import SiblingIndex, bm25_negatives
from retrieval_pipeline.core.reports import md_preview
from retrieval_pipeline.core.retrieval.bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval_dataset import build_record, write_jsonl
from retrieval_pipeline.core.types import Document
from retrieval_pipeline.defs.indexes import bm25_index
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import LLMResource, PipelineSettings, llm_metadata


@dg.asset(partitions_def=dataset_partitions, group_name="dataset", kinds={"pandas"}, deps=[bm25_index])
def verified_pairs(
    context: dg.AssetExecutionContext,
    settings: PipelineSettings,
    llm: LLMResource,
    qa_pairs: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult[pd.DataFrame]:
    """Forward-RAG filter: every retrieval pair kept, dropped or undecided, with the judge's name and reason.

    Sufficiency (the gold context answers the query) and necessity (random contexts do not) are decided
    by an LLM when an endpoint is configured (its answers and rationales stored), else by
    ``offline_lexical``, a deterministic stand-in. A pair whose LLM calls failed is undecided: kept
    out, with the error, and asked again on the next run (decided calls come from the cache).
    Kept pairs get hard negatives: sibling objects of the gold's module and top BM25 non-gold hits.
    """
    config = settings.dataset(context.partition_key)
    docs = from_frame(corpus, Document)
    texts = {d.doc_id: d.text for d in docs}
    pairs = qa_pairs[qa_pairs["status"] != "not_retrieval"].reset_index(drop=True)
    resolved = [(p.query_id, p.query, list(p.gold_doc_ids)) for p in pairs.itertuples(index=False) if p.status == "resolved"]
    fs = config.filter
    with (llm.open() if fs.judge in ("auto", "llm") else contextlib.nullcontext()) as client:
        if fs.judge == "llm" and client is None:
            context.log.warning("filter.judge is llm but no LLM endpoint is configured: using offline_lexical")
        if fs.judge == "none":
            judge_name, decisions = "none", [passthrough_decision(q) for q, _, _ in resolved]
        elif client is not None:
            judge = LLMForwardRagJudge(client, texts, random_contexts=fs.random_contexts, seed=fs.seed)
            judge_name, decisions = judge.name, judge.decide_all(resolved)
        else:
            offline = OfflineLexicalJudge(texts, random_contexts=fs.random_contexts, min_description_tokens=fs.min_description_tokens,
                                          max_random_coverage=fs.max_random_coverage, seed=fs.seed)
            judge_name, decisions = offline.name, [offline.decide(q, text, golds) for q, text, golds in resolved]
        llm_meta = llm_metadata(client)
    decision_of = {d.query_id: d for d in decisions}
    siblings = SiblingIndex(docs)
    bm25 = BM25Retriever.load(settings.index_dir(context.partition_key, "bm25"))
    neg = config.negatives

    rows = []
    for pair in pairs.itertuples(index=False):
        golds = list(pair.gold_doc_ids)
        decision = decision_of.get(pair.query_id)
        if decision is None:
            row = {"keep": False, "undecided": False, "judge": "none", "reason": f"dropped: gold target unresolved ({pair.method})",
                   "sufficiency": None, "best_random": None, "random_doc_ids": [], "judge_details": "{}"}
        else:
            row = {"keep": decision.keep, "undecided": decision.undecided, "judge": decision.judge, "reason": decision.reason,
                   "sufficiency": decision.sufficiency, "best_random": decision.best_random,
                   "random_doc_ids": decision.random_doc_ids, "judge_details": json.dumps(decision.details, default=str)}
        sib = siblings.siblings(golds, neg.per_query_siblings) if row["keep"] else []
        hard = bm25_negatives(bm25.search([pair.query], neg.per_query_bm25 + len(golds) + len(sib))[0], golds, neg.per_query_bm25, sib) if row["keep"] else []
        rows.append({"query_id": pair.query_id, "suite": pair.suite, "benchmark_type": pair.benchmark_type,
                     "query": pair.query, "gold_doc_ids": golds, "gold_grades": list(pair.gold_grades) or [1] * len(golds),
                     "gold_method": pair.method, **row,
                     "sibling_negatives": sib, "bm25_negatives": hard})
    frame = pd.DataFrame(rows)
    kept = int(frame["keep"].sum()) if len(frame) else 0
    undecided = int(frame["undecided"].sum()) if len(frame) else 0
    reasons = frame["reason"].str.split(":").str[0].value_counts().to_dict() if len(frame) else {}
    notes = {"none": "filter off", "offline_lexical": "offline_lexical is a deterministic stand-in for an LLM judge"}
    return dg.MaterializeResult(
        value=frame,
        metadata={
            "pairs": len(frame), "kept": kept, "dropped": len(frame) - kept - undecided, "undecided": undecided,
            "judge": judge_name, "judge_note": notes.get(judge_name, "an LLM decided; answers and rationales in judge_details"),
            **llm_meta,
            "decisions_by_reason": dg.MetadataValue.json({str(k): int(v) for k, v in reasons.items()}),
            "dropped_pairs": dg.MetadataValue.md(md_preview(frame[~frame["keep"]][["query_id", "reason"]] if len(frame) else frame, n=50)),
        },
    )


@dg.asset(partitions_def=dataset_partitions, group_name="dataset", kinds={"pandas", "jsonl"})
def retrieval_dataset(
    context: dg.AssetExecutionContext, settings: PipelineSettings, verified_pairs: pd.DataFrame, corpus: pd.DataFrame
) -> dg.MaterializeResult[pd.DataFrame]:
    """The verified retrieval-evaluation dataset: (query, positives, hard negatives, metadata) per kept pair.

    Also exported as ``retrieval_dataset.jsonl`` in the shape
    ``{id, source, query, positive_ctxs: [{fqn, text, rank_relevance}], negative_ctxs: [{fqn, text, is_hard_negative}], metadata}``.
    """
    docs = {d.doc_id: d for d in from_frame(corpus, Document)}
    kept = verified_pairs[verified_pairs["keep"]] if len(verified_pairs) else verified_pairs
    records = []
    for pair in kept.itertuples(index=False):
        records.append(build_record(
            query_id=pair.query_id, source=f"{context.partition_key}/{pair.suite}", query=pair.query,
            gold_doc_ids=list(pair.gold_doc_ids), gold_grades=list(pair.gold_grades), docs=docs,
            sibling_ids=list(pair.sibling_negatives),
            bm25_ids=list(pair.bm25_negatives), random_ids=list(pair.random_doc_ids),
            metadata={"benchmark_type": pair.benchmark_type, "gold_method": pair.gold_method,
                      "judge": pair.judge, "judge_reason": pair.reason, "dataset": context.partition_key},
        ))
    if not records:
        raise ValueError(f"dataset {context.partition_key}: the filter kept no pair, nothing to evaluate "
                         f"({len(verified_pairs)} pairs judged; see verified_pairs for the reasons)")
    path = settings.export_path(context.partition_key, "retrieval_dataset.jsonl")
    write_jsonl(records, path)
    frame = pd.DataFrame(records)
    frame["metadata"] = frame["metadata"].map(lambda m: json.dumps(m, sort_keys=True))
    n_neg = frame["negative_ctxs"].map(len)
    return dg.MaterializeResult(
        value=frame,
        metadata={"tuples": len(frame), "jsonl_path": dg.MetadataValue.path(str(path)),
                  "positives_per_query": float(frame["positive_ctxs"].map(len).mean()),
                  "negatives_per_query": float(n_neg.mean()),
                  "preview": dg.MetadataValue.md(md_preview(frame[["id", "query"]]))},
    )
