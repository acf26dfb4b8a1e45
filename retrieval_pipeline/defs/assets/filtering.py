"""The verified retrieval dataset: forward-RAG-filtered tuples with hard negatives, in Parquet and JSONL."""

import contextlib

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.common.frames import from_frame
from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.common.types import PAIR_JSON_FIELDS, Document, QAPair
from retrieval_pipeline.core.filtering.filter import filter_pairs, needs_llm
from retrieval_pipeline.core.filtering.retrieval_dataset import build_dataset
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import LLMResource, PipelineSettings, llm_metadata

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
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
    Kept pairs get hard negatives: sibling objects of the gold's module and top BM25 non-gold hits (a default
    BM25 built here, independent of the retrievers under evaluation).
    """
    config = settings.dataset(context.partition_key)
    pairs = from_frame(qa_pairs, QAPair, PAIR_JSON_FIELDS)
    with llm.open() if needs_llm(config.filter) else contextlib.nullcontext() as client, progress_to(context.log.info):
        result = filter_pairs(pairs, from_frame(corpus, Document), config.filter, config.negatives, client)
        llm_meta = llm_metadata(client)
    for warning in result.warnings:
        context.log.warning(warning)
    return dg.MaterializeResult(value=result.frame, metadata=dagster_metadata(result.metadata(llm_meta)))


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas", "jsonl"}, output_required=False)
def retrieval_dataset(context: dg.AssetExecutionContext, settings: PipelineSettings, verified_pairs: pd.DataFrame, corpus: pd.DataFrame):
    """The verified retrieval-evaluation dataset: (query, positives, hard negatives, metadata) per kept pair.

    Also exported as ``retrieval_dataset.jsonl`` in the shape
    ``{id, source, query, positive_ctxs: [{fqn, text, rank_relevance}], negative_ctxs: [{fqn, text, is_hard_negative}], metadata}``.

    A dataset without any retrieval case (multiple-choice questions only: those go to the verifier) has
    nothing to evaluate: no output and no file, a warning and an observation saying so; the retrieval and
    evaluation steps after it are skipped, and the run succeeds. Retrieval pairs that were all dropped or
    undecided are still an error (the filter kept no pair).
    """
    dataset = context.partition_key
    if verified_pairs.empty:
        message = nothing_to_evaluate(dataset)
        context.log.warning(message)
        context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=dataset, metadata={"nothing_to_evaluate": message}))
        return
    path = settings.export_path(dataset, "retrieval_dataset.jsonl")
    result = build_dataset(verified_pairs, from_frame(corpus, Document), dataset, path)
    yield dg.MaterializeResult(value=result.frame, metadata=dagster_metadata(result.metadata()))


def nothing_to_evaluate(dataset: str) -> str:
    """What a dataset without retrieval cases says instead of a retrieval dataset."""
    return (
        f"dataset {dataset}: nothing to evaluate for retrieval, it has no retrieval case (its multiple-choice "
        "questions are checked by the verifier: question_verdicts, quality_report); retrieval_dataset is not "
        "materialised and the retrieval and evaluation steps after it are skipped"
    )
