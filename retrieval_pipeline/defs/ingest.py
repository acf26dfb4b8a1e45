"""Ingest: benchmark cases and the target corpus, each with its rejects kept beside it."""

import dagster as dg

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.frames import to_frame
from retrieval_pipeline.core.reports import md_preview
from retrieval_pipeline.core.sources.api_index import introspect_modules, load_ranked_targets
from retrieval_pipeline.core.sources.dataset_suites import load_suites
from retrieval_pipeline.core.types import Case, Document, Rejected
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import PipelineSettings

CASE_JSON_FIELDS = ("gold_fqns", "files", "options", "extra")


@dg.multi_asset(
    outs={
        "raw_cases": dg.AssetOut(description="Every validated case of the dataset's suites, one row per case.",
                                 group_name="ingest", kinds={"pandas"}),
        "case_rejects": dg.AssetOut(description="Suite rows that failed validation, with file, case id and reason.",
                                    group_name="ingest", kinds={"pandas"}),
    },
    partitions_def=dataset_partitions,
)
def raw_cases(context: dg.AssetExecutionContext, settings: PipelineSettings):
    """Load and validate the dataset's benchmark suites (api_understanding, fix_errors, multiple choice).

    Invalid rows go to ``case_rejects`` with the file, the case id and the reason;
    ``cases + rejects == rows read`` is asserted and shown in the metadata.
    """
    config = settings.dataset(context.partition_key)
    loaded = load_suites(config.suites)
    if len(loaded.cases) + len(loaded.rejects) != loaded.total:
        raise RuntimeError(f"case counts do not add up: {len(loaded.cases)} + {len(loaded.rejects)} != {loaded.total}")
    if not loaded.cases:
        raise InputError(f"no valid case in {len(config.suites)} suite file(s); first reject: "
                         f"{loaded.rejects[0].reason if loaded.rejects else 'files are empty'}",
                         path=", ".join(map(str, config.suites)))
    cases = to_frame(loaded.cases, Case, CASE_JSON_FIELDS)
    rejects = to_frame(loaded.rejects, Rejected)
    for r in loaded.rejects:
        context.log.warning(f"rejected {r.source_file} case {r.case_id!r} (row {r.index}): {r.reason}")
    by_type = cases["benchmark_type"].value_counts().to_dict()
    common = {"rows_read": loaded.total, "accepted": len(loaded.cases), "rejected": len(loaded.rejects)}
    yield dg.Output(cases, "raw_cases", metadata={**common, **{f"type/{k}": int(v) for k, v in by_type.items()},
                                                 "preview": dg.MetadataValue.md(md_preview(cases[["case_id", "benchmark_type", "query"]]))})
    yield dg.Output(rejects, "case_rejects", metadata={**common, "reasons": dg.MetadataValue.md(md_preview(rejects))})


@dg.multi_asset(
    outs={
        "corpus": dg.AssetOut(description="The target corpus: one document per API object (FQN, text, kind, module, aliases).",
                              group_name="ingest", kinds={"pandas"}),
        "corpus_rejects": dg.AssetOut(description="Index entries or modules that could not become documents, with reasons.",
                                      group_name="ingest", kinds={"pandas"}),
    },
    partitions_def=dataset_partitions,
)
def corpus(context: dg.AssetExecutionContext, settings: PipelineSettings):
    """Build the target corpus from a ``ranked_targets.yaml`` API index or by introspecting Python modules.

    Document text = name, FQN, signature, docstring (and member signatures for index classes).
    Duplicates and unimportable modules are rejected with a reason; missing docstrings are counted.
    """
    config = settings.dataset(context.partition_key)
    if config.corpus.ranked_targets:
        loaded = load_ranked_targets(config.corpus.ranked_targets)
        source = str(config.corpus.ranked_targets)
    else:
        modules = config.corpus_modules()
        loaded = introspect_modules(modules)
        source = f"introspection of {len(modules)} modules"
    if not loaded.documents:
        raise InputError("the corpus is empty: no document could be built", path=source)
    docs = to_frame(loaded.documents, Document)
    rejects = to_frame(loaded.rejects, Rejected)
    report = {k: v for k, v in loaded.report.items() if isinstance(v, (int, float, str))}
    yield dg.Output(docs, "corpus", metadata={"source": source, "documents": len(docs), **report,
                                              "by_kind": dg.MetadataValue.json(docs["kind"].value_counts().to_dict())})
    yield dg.Output(rejects, "corpus_rejects", metadata={"rejected": len(rejects),
                                                         "reasons": dg.MetadataValue.md(md_preview(rejects))})
