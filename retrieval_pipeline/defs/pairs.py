"""Extraction: (query, gold target) pairs from the cases, resolved against the corpus."""

import pandas as pd
import dagster as dg

from retrieval_pipeline.core.frames import from_frame, to_frame
from retrieval_pipeline.core.mining.fix_targets import AstTargetInferer
from retrieval_pipeline.core.mining.gold import CorpusLookup
from retrieval_pipeline.core.pairs import QAPair, build_pairs, pairs_report
from retrieval_pipeline.core.reports import md_preview
from retrieval_pipeline.core.types import Case, Document
from retrieval_pipeline.defs.ingest import CASE_JSON_FIELDS
from retrieval_pipeline.defs.partitions import dataset_partitions

PAIR_JSON_FIELDS = ("evidence", "warnings")


@dg.asset(partitions_def=dataset_partitions, group_name="dataset", kinds={"pandas"})
def qa_pairs(context: dg.AssetExecutionContext, raw_cases: pd.DataFrame, corpus: pd.DataFrame) -> dg.MaterializeResult[pd.DataFrame]:
    """Extracted (query, gold target) pairs, one per case.

    api_understanding golds are resolved by exact, alias and suffix matching; fix_error targets are the
    primary subject found by static analysis (AST) of the solution file, else from the description.
    Unresolved cases stay in the table with the reason; multiple-choice cases are routed to the verifier.
    """
    cases = from_frame(raw_cases, Case, CASE_JSON_FIELDS)
    lookup = CorpusLookup.from_documents(from_frame(corpus, Document))
    pairs = build_pairs(cases, lookup, AstTargetInferer())
    for pair in pairs:
        for warning in pair.warnings:
            context.log.warning(warning)
    report = pairs_report(pairs)
    frame = to_frame(pairs, QAPair, PAIR_JSON_FIELDS)
    unresolved = frame[frame["status"] == "unresolved"][["query_id", "benchmark_type", "method", "warnings"]]
    return dg.MaterializeResult(
        value=frame,
        metadata={
            **{k: v for k, v in report.items() if not isinstance(v, dict)},
            "api_gold_by_method": dg.MetadataValue.json(report["api_gold_by_method"]),
            "unresolved_cases": dg.MetadataValue.md(md_preview(unresolved, n=50)),
        },
    )
