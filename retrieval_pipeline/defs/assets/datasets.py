"""Ingest: benchmark cases and the target corpus, each with its rejects kept beside it."""

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from retrieval_pipeline.core.common.asset_metadata import md_preview
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.frames import to_frame
from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.common.types import Case, Document, Rejected
from retrieval_pipeline.core.datasets import CASE_JSON_FIELDS
from retrieval_pipeline.core.datasets.inputs import build_corpus, load_cases
from retrieval_pipeline.core.registry import DatasetConfig
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions, datasets_note
from retrieval_pipeline.defs.resources import PipelineSettings

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]

#: One output of an ingest asset: the frame and its metadata.
Part = tuple[Any, dict[str, Any]]
#: What an ingest asset computes for one dataset: the main output, then its rejects.
Ingest = Callable[[dg.AssetExecutionContext, DatasetConfig], tuple[Part, Part]]


def _with_rejects(name: str, description: str, rejects: str, rejects_description: str) -> Callable[[Ingest], dg.AssetsDefinition]:
    """A partitioned two-output asset of this group, ``name`` and its ``rejects``, computed by the decorated function.

    The function's docstring describes the step; ``description`` and ``rejects_description`` describe the outputs.
    """

    def make(ingest: Ingest) -> dg.AssetsDefinition:
        @dg.multi_asset(
            name=name,
            description=inspect.cleandoc(ingest.__doc__ or ""),
            outs={
                name: dg.AssetOut(description=description + datasets_note(), group_name=GROUP, kinds={"pandas"}),
                rejects: dg.AssetOut(description=rejects_description, group_name=GROUP, kinds={"pandas"}),
            },
            partitions_def=dataset_partitions,
        )
        def _asset(context: dg.AssetExecutionContext, settings: PipelineSettings) -> Iterator[dg.Output]:
            (frame, metadata), (rejected, rejects_metadata) = ingest(context, settings.dataset(context.partition_key))
            yield dg.Output(frame, name, metadata=dagster_metadata(metadata))
            yield dg.Output(rejected, rejects, metadata=dagster_metadata(rejects_metadata))

        return _asset

    return make


@_with_rejects(
    "raw_cases",
    "Every validated query of the dataset (suite case, NQ question, QA pair, BEIR query).",
    "case_rejects",
    "Input rows that failed validation, with file, case id and reason.",
)
def raw_cases(context: dg.AssetExecutionContext, config: DatasetConfig) -> tuple[Part, Part]:
    """Load and validate the dataset's queries: benchmark cases, NQ questions, QA pairs or BEIR queries.

    Invalid rows go to ``case_rejects`` with the file, the case id and the reason;
    ``cases + rejects == rows read`` is asserted and shown in the metadata.
    """
    with progress_to(context.log.info):  # a long load (the installed-packages corpus) reports its progress
        loaded = load_cases(config)  # counts checked there: nothing is lost, and no valid case is an error
    cases = to_frame(loaded.cases, Case, CASE_JSON_FIELDS)
    rejects = to_frame(loaded.rejects, Rejected)
    for r in loaded.rejects:
        context.log.warning(f"rejected {r.source_file} case {r.case_id!r} (row {r.index}): {r.reason}")
    by_type = cases["benchmark_type"].value_counts().to_dict()
    common = {"rows_read": loaded.total, "accepted": len(loaded.cases), "rejected": len(loaded.rejects)}
    report = {k: v for k, v in loaded.report.items() if isinstance(v, (int, float, str))}
    metadata = {
        **common,
        **report,
        **{f"type/{k}": int(v) for k, v in by_type.items()},
        "preview": dg.MetadataValue.md(md_preview(cases[["case_id", "benchmark_type", "query"]])),
    }
    return (cases, metadata), (rejects, {**common, "reasons": dg.MetadataValue.md(md_preview(rejects))})


@_with_rejects(
    "corpus",
    "The corpus retrievers index: API objects, passages or chunks (id, text, kind, module).",
    "corpus_rejects",
    "Entries that could not become documents, with reasons.",
)
def corpus(context: dg.AssetExecutionContext, config: DatasetConfig) -> tuple[Part, Part]:
    """Build the corpus: an API index or introspected modules (suites), de-duplicated long answers (NQ),
    markdown-aware chunks of the documents (context QA), or a BEIR corpus.

    Duplicates and unreadable entries are rejected with a reason; missing docstrings are counted.
    """
    with progress_to(context.log.info):
        built = build_corpus(config)
    if not built.documents:
        raise InputError("the corpus is empty: no document could be built", path=built.source)
    docs = to_frame(built.documents, Document)
    rejects = to_frame(built.rejects, Rejected)
    report = {k: v for k, v in built.report.items() if isinstance(v, (int, float, str))}
    metadata = {
        "source": built.source,
        "documents": len(docs),
        **report,
        "by_kind": dg.MetadataValue.json(docs["kind"].value_counts().to_dict()),
    }
    return (docs, metadata), (rejects, {"rejected": len(rejects), "reasons": dg.MetadataValue.md(md_preview(rejects))})
