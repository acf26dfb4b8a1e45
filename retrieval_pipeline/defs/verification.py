"""The question verifier: every multiple-choice option proven or disproven with pytest in a sandbox."""

import json
import platform
import sys

import pandas as pd
import dagster as dg

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.frames import from_frame
from retrieval_pipeline.core.reports import md_preview
from retrieval_pipeline.core.types import Case
from retrieval_pipeline.core.verifier.provers import OfflineProver
from retrieval_pipeline.core.verifier.remediation import remediate, write_proposals
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report as build_quality_report
from retrieval_pipeline.core.verifier.sandbox import SandboxSettings
from retrieval_pipeline.core.verifier.verify import run_verification
from retrieval_pipeline.defs.ingest import CASE_JSON_FIELDS
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import PipelineSettings

VERDICTS = ("Valid", "Ambiguous", "Incorrect", "Unverifiable")


@dg.multi_asset(
    outs={
        "question_verdicts": dg.AssetOut(group_name="verifier", kinds={"pandas"},
                                         description="One verdict per multiple-choice question, with the evidence per option."),
        "quality_report": dg.AssetOut(group_name="verifier", kinds={"json"},
                                      description="Flagged questions with the proposed fixes; quality_report.json and .md."),
    },
    partitions_def=dataset_partitions,
    check_specs=[dg.AssetCheckSpec("no_incorrect_questions", asset="quality_report",
                                   description="No multiple-choice question's marked answer was disproven.")],
)
def verify_questions(context: dg.AssetExecutionContext, settings: PipelineSettings, raw_cases: pd.DataFrame):
    """Prove every option of every multiple-choice question by running pytest against the installed library.

    Claims come from the question and options alone (the marked answer is never shown to the provers);
    each proof runs under bubblewrap (no network, read-only root, private /tmp, cleared environment,
    time, memory and process limits). Verdicts: Valid, Ambiguous (a distractor also works), Incorrect
    (the marked answer is disproven), Unverifiable. Ambiguous and Incorrect questions get a proposed fix,
    re-verified (at most 3 tries), written to a separate file, never over the suite.
    """
    config = settings.dataset(context.partition_key)
    cases = [c for c in from_frame(raw_cases, Case, CASE_JSON_FIELDS) if c.benchmark_type == "multiple_choice"]
    vs = config.verifier
    python = vs.python or sys.executable
    if vs.python and not vs.python.exists():
        raise InputError(f"the verifier environment {vs.python} does not exist: create it with `make adk-env`",
                         path=str(settings.registry_path), case_id=f"dataset {context.partition_key}")
    sandbox = SandboxSettings(python=python, timeout_s=vs.timeout_s, memory_mb=vs.memory_mb) if cases else None
    run = run_verification(cases, sandbox_settings=sandbox, library=vs.library) if cases else None
    verdicts = run.verdicts if run else []
    proposals = remediate(verdicts, cases, OfflineProver(run.index), sandbox) if run else []
    meta = {"dataset": context.partition_key, "python": str(python), "library": vs.library,
            "library_version": run.index.version if run else None,
            "python_version": run.index.python_version if run else platform.python_version(), "prover": run.prover if run else None,
            "seconds": run.total_seconds if run else 0.0}
    report = build_quality_report(verdicts, meta, proposals)
    out = settings.export_path(context.partition_key, "quality_report.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    md = markdown_report(report)
    out.with_suffix(".md").write_text(md, encoding="utf-8")
    proposals_path = write_proposals(proposals, cases, settings.export_path(context.partition_key, "proposed_fixes.yaml"),
                                     inputs=[str(p) for p in config.input_paths()]) if proposals else None

    verdict_frame = pd.DataFrame([{"case_id": v.case_id, "verdict": v.verdict, "marked": v.marked,
                                   "proven_true": list(v.proven_true), "proven_false": list(v.proven_false),
                                   "undecided": list(v.undecided), "reasons": list(v.reasons), "seconds": v.duration_s,
                                   "evidence": json.dumps(report_case(report, v.case_id), default=str)} for v in verdicts],
                                 columns=["case_id", "verdict", "marked", "proven_true", "proven_false", "undecided",
                                          "reasons", "seconds", "evidence"])
    flagged = pd.DataFrame([{"case_id": p.case_id, "verdict": p.original_verdict, "status": p.status, "note": p.note,
                             "proposed": json.dumps(p.proposed, default=str), "tries": len(p.attempts)} for p in proposals],
                           columns=["case_id", "verdict", "status", "note", "proposed", "tries"])
    counts = {v: int((verdict_frame["verdict"] == v).sum()) for v in VERDICTS}
    per_question = (run.total_seconds / len(verdicts)) if verdicts else 0.0
    yield dg.Output(verdict_frame, "question_verdicts", metadata={
        "questions": len(verdicts), **{f"verdict/{v}": n for v, n in counts.items()},
        "seconds_per_question": round(per_question, 3), "library": str(meta["library"]),
        "library_version": str(meta["library_version"]),
        "preview": dg.MetadataValue.md(md_preview(verdict_frame[["case_id", "verdict", "marked", "proven_true"]], n=40)),
    })
    yield dg.Output(flagged, "quality_report", metadata={
        **{f"verdict/{v}": n for v, n in counts.items()}, "proposals": len(flagged),
        "report_json": dg.MetadataValue.path(str(out)), "report": dg.MetadataValue.md(md[:20000]),
        **({"proposed_fixes": dg.MetadataValue.path(str(proposals_path))} if proposals_path else {}),
    })
    incorrect = verdict_frame[verdict_frame["verdict"] == "Incorrect"]["case_id"].tolist()
    yield dg.AssetCheckResult(
        check_name="no_incorrect_questions", asset_key="quality_report", passed=not incorrect,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{len(incorrect)} question(s) whose marked answer was disproven" if incorrect else "no marked answer was disproven",
        metadata={"incorrect": dg.MetadataValue.json(incorrect), "questions": len(verdicts)},
    )


def report_case(report: dict, case_id: str) -> dict:
    """The report's entry for one case (its evidence per option)."""
    for entry in report.get("cases", []):
        if entry.get("case_id") == case_id:
            return entry
    return {}
