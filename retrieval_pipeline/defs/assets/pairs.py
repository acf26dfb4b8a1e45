"""Extraction: (query, gold target) pairs from the cases, resolved against the corpus."""

import contextlib

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.common.cache.result_cache import using_result_cache
from retrieval_pipeline.core.common.frames import from_frame
from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.pairs.extract import extract_pairs, needs_llm
from retrieval_pipeline.defs.assets.datasets import CASE_JSON_FIELDS
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import LLMResource, PipelineSettings, llm_metadata

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
def qa_pairs(
    context: dg.AssetExecutionContext,
    settings: PipelineSettings,
    llm: LLMResource,
    raw_cases: pd.DataFrame,
    corpus: pd.DataFrame,
) -> dg.MaterializeResult[pd.DataFrame]:
    """Extracted (query, gold target) pairs, one per case: the qrels.

    api_understanding golds are resolved by exact, alias and suffix matching, then (when the dataset names a
    library environment, ``verifier.python``) by importing the rest there, in one sandboxed run; each
    method's share is in the metadata. fix_error targets are the primary subject found by static analysis
    (AST) of the solution file, else from the description; the metadata counts both sources and lists
    every disagreement between the code's target and the description's (``fix_error_targets`` table).
    NQ: the question's own de-duplicated long answer. Context QA: every chunk whose similarity to the
    expected context reaches the threshold (settings and ratios kept as evidence). BEIR: the qrels.
    Unresolved cases stay in the table with the reason; multiple-choice cases are routed to the verifier.
    Results that are pure functions of their inputs (context-QA similarity matches) are kept in the result
    cache under ``settings.cache_path()``, keyed by their inputs' content, so an unchanged re-run reuses them.
    """
    cases = from_frame(raw_cases, Case, CASE_JSON_FIELDS)
    config = settings.dataset(context.partition_key)
    with (
        llm.open() if needs_llm(cases, config.targets) else contextlib.nullcontext() as client,
        using_result_cache(settings.cache_path()),
        progress_to(context.log.info),
    ):
        result = extract_pairs(cases, from_frame(corpus, Document), config, client)
        llm_meta = llm_metadata(client)
    for warning in result.warnings:
        context.log.warning(warning)
    return dg.MaterializeResult(value=result.frame, metadata=dagster_metadata(result.metadata(llm_meta)))
