"""Extraction: (query, gold target) pairs from the cases, resolved against the corpus."""

import contextlib

import pandas as pd
import dagster as dg

from retrieval_pipeline.core.context_pairs import ContextMatcher
from retrieval_pipeline.core.frames import from_frame, to_frame
from retrieval_pipeline.core.mining.fix_targets import AstTargetInferer
from retrieval_pipeline.core.mining.llm_targets import LLMTargetInferer
from retrieval_pipeline.core.mining.gold import CorpusLookup
from retrieval_pipeline.core.pairs import QAPair, build_pairs, pairs_report
from retrieval_pipeline.core.reports import md_preview
from retrieval_pipeline.core.types import Case, Document
from retrieval_pipeline.defs.ingest import CASE_JSON_FIELDS
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import LLMResource, PipelineSettings, llm_metadata

PAIR_JSON_FIELDS = ("evidence", "warnings")


@dg.asset(partitions_def=dataset_partitions, group_name="dataset", kinds={"pandas"})
def qa_pairs(
    context: dg.AssetExecutionContext,
    settings: PipelineSettings,
    llm: LLMResource,
    raw_cases: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult[pd.DataFrame]:
    """Extracted (query, gold target) pairs, one per case: the qrels.

    api_understanding golds are resolved by exact, alias and suffix matching; fix_error targets are the
    primary subject found by static analysis (AST) of the solution file, else from the description.
    NQ: the question's own de-duplicated long answer. Context QA: every chunk whose similarity to the
    expected context reaches the threshold (settings and ratios kept as evidence). BEIR: the qrels.
    Unresolved cases stay in the table with the reason; multiple-choice cases are routed to the verifier.
    """
    cases = from_frame(raw_cases, Case, CASE_JSON_FIELDS)
    documents = from_frame(corpus, Document)
    config = settings.dataset(context.partition_key)
    matcher = None
    if config.kind == "context_qa":
        matcher = ContextMatcher(documents, config.context_qa.similarity.settings())
    wants_llm = config.targets.inferer != "ast" and any(c.benchmark_type == "fix_error" for c in cases)
    with (llm.open() if wants_llm else contextlib.nullcontext()) as client:
        if config.targets.inferer == "llm" and client is None:
            context.log.warning("targets.inferer is llm but no LLM endpoint is configured: using the AST inferer")
        inferer = LLMTargetInferer(client) if client is not None else AstTargetInferer()
        pairs = build_pairs(cases, CorpusLookup.from_documents(documents), inferer, matcher.pair if matcher else None)
        llm_meta = llm_metadata(client)
    for pair in pairs:
        for warning in pair.warnings:
            context.log.warning(warning)
    report = pairs_report(pairs)
    frame = to_frame(pairs, QAPair, PAIR_JSON_FIELDS)
    unresolved = frame[frame["status"] == "unresolved"][["query_id", "benchmark_type", "method", "warnings"]]
    disagreements = [{"case": p.query_id, "ast": p.evidence.get("ast"), "llm": p.evidence.get("llm"), "kept": p.gold_doc_ids}
                     for p in pairs if p.evidence.get("agree") is False]
    if disagreements:
        llm_meta["ast_llm_disagreements_list"] = dg.MetadataValue.json(disagreements)
    return dg.MaterializeResult(
        value=frame,
        metadata={
            **{k: v for k, v in report.items() if not isinstance(v, dict)},
            "target_inferer": inferer.name,
            **llm_meta,
            "api_gold_by_method": dg.MetadataValue.json(report["api_gold_by_method"]),
            "unresolved_cases": dg.MetadataValue.md(md_preview(unresolved, n=50)),
        },
    )
