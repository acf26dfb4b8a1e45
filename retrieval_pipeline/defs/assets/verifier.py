"""The question verifier: every multiple-choice option proven or disproven with pytest in a sandbox."""

import contextlib

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.common.frames import from_frame
from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.verifier.questions import check_questions
from retrieval_pipeline.defs.assets.datasets import CASE_JSON_FIELDS
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions, partitioned_check_spec
from retrieval_pipeline.defs.resources import LLMResource, PipelineSettings

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


@dg.multi_asset(
    name="question_verdicts",  # the step's name on the run page: after its main asset (quality_report summarises it)
    outs={
        "question_verdicts": dg.AssetOut(
            group_name=GROUP, kinds={"pandas"}, description="One verdict per multiple-choice question, with the evidence per option."
        ),
        "quality_report": dg.AssetOut(
            group_name=GROUP, kinds={"json"}, description="Flagged questions with the proposed fixes; quality_report.json and .md."
        ),
    },
    partitions_def=dataset_partitions,
    check_specs=[
        partitioned_check_spec(
            "no_incorrect_questions", asset="quality_report", description="No multiple-choice question's marked answer was disproven."
        )
    ],
)
def verify_questions(context: dg.AssetExecutionContext, settings: PipelineSettings, llm: LLMResource, raw_cases: pd.DataFrame):
    """Prove every option of every multiple-choice question by running pytest against the installed library.

    Claims come from the question and options alone (the marked answer is never shown to the provers);
    each proof runs under bubblewrap (no network, read-only root, private /tmp, cleared environment,
    time, memory and process limits). Verdicts: Valid, Ambiguous (a distractor also works), Incorrect
    (the marked answer is disproven), Unverifiable. Ambiguous and Incorrect questions get a proposed fix,
    re-verified (at most 3 tries), written to a separate file, never over the suite.
    """
    dataset = context.partition_key
    config = settings.dataset(dataset)
    # the LLM prover only when the dataset asks for it (`verifier.prover: llm`); None without an endpoint
    with llm.open() if config.verifier.prover == "llm" else contextlib.nullcontext() as client, progress_to(context.log.info):
        checked = check_questions(
            from_frame(raw_cases, Case, CASE_JSON_FIELDS),
            config.verifier,
            dataset=dataset,
            report_path=settings.export_path(dataset, "quality_report.json"),
            proposals_path=settings.export_path(dataset, "proposed_fixes.yaml"),
            inputs=config.input_paths(),
            registry_path=str(settings.registry_path),
            llm=client,
            cache_dir=settings.cache_path(),
        )
    yield dg.Output(checked.verdicts, "question_verdicts", metadata=dagster_metadata(checked.verdicts_metadata))
    yield dg.Output(checked.flagged, "quality_report", metadata=dagster_metadata(checked.report_metadata))
    yield dg.AssetCheckResult(
        check_name="no_incorrect_questions",
        asset_key="quality_report",
        passed=checked.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=checked.check_description(),
        metadata=dagster_metadata(checked.check_metadata()),
    )
