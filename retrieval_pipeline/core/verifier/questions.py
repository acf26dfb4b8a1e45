"""The question check of one dataset: verify its multiple-choice cases, propose fixes, write the reports.

Every multiple-choice case is verified (:func:`~retrieval_pipeline.core.verifier.verify.run_verification`:
the library probed once, questions in parallel, the proofs of a question in one sandbox); Ambiguous and
Incorrect ones get a proposed fix, re-verified (:func:`~retrieval_pipeline.core.verifier.fixes.remediation.remediate`,
several flagged questions at once: :func:`propose_fixes`). The quality report is written as JSON and
Markdown (titled with the dataset and the library under test, with the seconds each step took), the
proposals to a separate file (never over an input). A dataset without multiple-choice cases gets an
empty report: nothing is probed or run.

**Library drift.** Every proposed fix is re-verified against the library under test *and* against each interpreter
in ``verifier.compare_pythons`` (other versions of the same library, e.g. ``.venvs/adk120/bin/python``; each probed
once, and only when something is flagged); a fix is accepted only when it is Valid against all of them. An
Unverifiable question that is Valid as it stands against another version has a stale distractor, and gets a fix
(:mod:`~retrieval_pipeline.core.verifier.fixes.remediation`). ``check_questions(compare_pythons=...)`` overrides the setting.

**Which prover.** The offline prover always runs first. With ``verifier.prover: llm`` *and* an LLM client (an
endpoint is configured), an :class:`~retrieval_pipeline.core.verifier.proofs.llm_prover.LLMProver` is asked about the
options the offline proofs left open; with ``llm`` but no client, the offline prover alone runs and the report
says so (:data:`NO_ENDPOINT_WARNING`). Every option records which prover decided it (the ``decided_by`` column).
"""

from __future__ import annotations

import contextlib
import json
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown, Metadata, md_preview
from retrieval_pipeline.core.common.atomic import atomic_write_text
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.llm.client import LLMClient
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.fixes.remediation import Environment, Proposal, flaggable, remediate, write_proposals
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex, LibrarySettingError, probe_environment
from retrieval_pipeline.core.verifier.proofs.llm_prover import LLMProver
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.report import STANDARD_LIBRARY, markdown_report, quality_report, run_meta
from retrieval_pipeline.core.verifier.settings import VerifierSettings
from retrieval_pipeline.core.verifier.verdicts.verdict import VERDICTS, Verdict
from retrieval_pipeline.core.verifier.verdicts.verdict_cache import VerdictCache, using_verdict_cache
from retrieval_pipeline.core.verifier.verify import VerificationRun, default_parallel, run_verification

VERDICT_COLUMNS = [
    "case_id",
    "verdict",
    "marked",
    "proven_true",
    "proven_false",
    "undecided",
    "reasons",
    "seconds",
    "decided_by",
    "evidence",
]
#: The prover setting (``verifier.prover``) when the registry has none.
DEFAULT_PROVER = "offline"
#: The report's warning when ``verifier.prover`` is ``llm`` and no LLM endpoint is configured.
NO_ENDPOINT_WARNING = "verifier.prover is llm but no LLM endpoint is configured: the offline prover decided alone"
#: The most options an LLM prover asks about in one check (its budget; the client caps retries per call).
LLM_MAX_CALLS = 400
FLAGGED_COLUMNS = ["case_id", "verdict", "status", "note", "proposed", "tries"]
#: The ``VerifierSettings`` field listing the other interpreters a fix is re-verified against (read with a default).
COMPARE_FIELD = "compare_pythons"
#: Characters of the Markdown report shown in the asset metadata.
REPORT_PREVIEW_CHARS = 20000


@dataclass
class QuestionCheck:
    """Verdicts and flagged questions of one dataset, with their metadata and the files written.

    Attributes:
        verdicts: One row per multiple-choice question (:data:`VERDICT_COLUMNS`).
        flagged: One row per proposal (:data:`FLAGGED_COLUMNS`).
        verdicts_metadata: Counts per verdict, time per question, library and a preview.
        report_metadata: Counts per verdict, proposals, the report (path and Markdown) and the proposals file.
        incorrect: Case ids whose marked answer was disproven.
        report_path: ``quality_report.json`` (the Markdown beside it, ``.md``).
        proposals_path: The proposals file, when there were proposals.
    """

    verdicts: pd.DataFrame
    flagged: pd.DataFrame
    verdicts_metadata: Metadata
    report_metadata: Metadata
    incorrect: list[str] = field(default_factory=list)
    report_path: Path | None = None
    proposals_path: Path | None = None

    @property
    def passed(self) -> bool:
        """No marked answer was disproven."""
        return not self.incorrect

    def check_description(self) -> str:
        """One line for the ``no_incorrect_questions`` check."""
        if self.incorrect:
            return f"{len(self.incorrect)} question(s) whose marked answer was disproven: findings to review, see quality_report.md"
        return "no marked answer was disproven"

    def check_metadata(self) -> Metadata:
        """The check's metadata: the disproven case ids and the number of questions."""
        return {"incorrect": list(self.incorrect), "questions": len(self.verdicts)}


def check_questions(
    cases: Sequence[Case],
    settings: VerifierSettings,
    *,
    dataset: str,
    report_path: Path,
    proposals_path: Path,
    inputs: Sequence[str | Path] = (),
    registry_path: str | None = None,
    llm: LLMClient | None = None,
    compare_pythons: Sequence[str | Path] | None = None,
    cache_dir: str | Path | None = None,
) -> QuestionCheck:
    """Verify every multiple-choice case of a dataset, propose fixes and write the quality report.

    Args:
        cases: The dataset's cases; those not multiple choice are ignored.
        settings: The dataset's verifier settings (interpreter, library, limits).
        dataset: The dataset's name, recorded in the report.
        report_path: Where ``quality_report.json`` goes; the Markdown is written beside it (``.md``).
        proposals_path: Where proposed fixes go (only written when there are proposals).
        inputs: The dataset's input files: proposals are never written over one of them.
        registry_path: The registry file, named in the error about a missing interpreter.
        llm: An open LLM client when an endpoint is configured; used only with ``verifier.prover: llm``.
        compare_pythons: Other versions of the library a fix is re-verified against; None: ``verifier.compare_pythons``.
        cache_dir: The project's cache folder: a question whose proofs cannot have changed reuses its verdict from
            there (:mod:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache`); None: every question is proven.
            Proposed fixes are always re-verified.

    Raises:
        InputError: ``settings.python`` or a comparison interpreter does not exist or cannot import the library,
            or ``verifier.prover`` is unknown.
    """
    questions = [c for c in cases if c.benchmark_type == "multiple_choice"]
    python = settings.python or sys.executable
    if settings.python and not settings.python.exists():
        raise InputError(
            f"the verifier environment {settings.python} does not exist: create it with `make adk-env`",
            path=registry_path,
            case_id=f"dataset {dataset}",
        )
    mode = prover_setting(settings, dataset=dataset, registry_path=registry_path)
    sandbox = SandboxSettings(python=python, timeout_s=settings.timeout_s, memory_mb=settings.memory_mb) if questions else None
    with VerdictCache.open(cache_dir) if cache_dir is not None and questions else contextlib.nullcontext() as cache:
        run = (
            run_verification(
                questions,
                sandbox_settings=sandbox,
                library=settings.library,
                import_name=settings.import_name,
                fallback_for=lambda index: llm_fallback(mode, llm, index),
                cache=cache,
            )  # fmt: skip
            if questions
            else None
        )
        verdicts = run.verdicts if run else []
        started = time.monotonic()
        pythons = compare_setting(settings) if compare_pythons is None else [Path(p) for p in compare_pythons]
        compare: list[Environment] = []
        if run and sandbox and any(flaggable(v) for v in verdicts):
            compare = compare_environments(pythons, settings, dataset=dataset, registry_path=registry_path, target=python)
        proposals = (
            propose_fixes(
                verdicts, questions, OfflineProver(run.index), sandbox, label=index_label(run.index), compare=compare, cache=cache
            )
            if run and sandbox
            else []
        )
    meta = run_meta(run, suite=dataset, settings=sandbox) if run else unprobed_meta(dataset, settings, python)
    meta["compare"] = [{"label": env.label, "python": str(env.settings.python)} for env in compare]
    meta.update({"dataset": dataset, "python": str(python), "remediation_seconds": round(time.monotonic() - started, 3) if run else 0.0,
                 "prover_setting": mode})  # fmt: skip
    if mode == "llm" and llm is None:
        meta["prover_warning"] = NO_ENDPOINT_WARNING
    if llm is not None and mode == "llm":
        meta["llm"] = llm.usage()
    report = quality_report(verdicts, meta, proposals, index=run.index if run else None)
    md = write_report(report, report_path)
    written = write_proposals(proposals, questions, proposals_path, inputs=[str(p) for p in inputs]) if proposals else None
    frame = verdict_frame(verdicts, report)
    counts = {f"verdict/{v}": int((frame["verdict"] == v).sum()) for v in VERDICTS}
    per_question = (run.total_seconds / len(verdicts)) if run and verdicts else 0.0
    return QuestionCheck(
        verdicts=frame,
        flagged=flagged_frame(proposals),
        verdicts_metadata={
            "questions": len(verdicts),
            **counts,
            "seconds_per_question": round(per_question, 3),
            "library": str(meta["library"]),
            "library_version": str(meta["library_version"] or "unknown"),
            **cache_counts(run),
            "preview": Markdown(md_preview(frame[["case_id", "verdict", "marked", "proven_true"]], n=40)),
        },
        report_metadata={
            **counts,
            "proposals": len(proposals),
            **cache_counts(run),
            "report_json": report_path,
            "report": Markdown(md[:REPORT_PREVIEW_CHARS]),
            **({"proposed_fixes": written} if written else {}),
        },
        incorrect=frame[frame["verdict"] == "Incorrect"]["case_id"].tolist(),
        report_path=report_path,
        proposals_path=written,
    )


def cache_counts(run: VerificationRun | None) -> dict[str, int]:
    """``verdicts_reused`` (from the verdict cache) and ``verdicts_proven`` (in this run); empty when no cache was asked for."""
    if run is None or run.cache_status is None:
        return {}
    return {"verdicts_reused": len(run.reused), "verdicts_proven": run.proven}


def compare_setting(settings: VerifierSettings) -> list[Path]:
    """``verifier.compare_pythons`` (:data:`COMPARE_FIELD`): the other environments of the library (none by default)."""
    return [Path(p) for p in settings.compare_pythons]


def index_label(index: LibraryIndex) -> str:
    """``google-adk 2.13.0`` (the distribution and its version), else ``python 3.11.7`` for the standard library."""
    if index.distribution:
        return f"{index.distribution} {index.version or 'unknown'}"
    return f"python {index.python_version}"


def compare_environments(
    pythons: Sequence[Path],
    settings: VerifierSettings,
    *,
    dataset: str,
    registry_path: str | None = None,
    target: str | Path | None = None,
) -> list[Environment]:
    """Probe each comparison interpreter (same library, limits and import name as the target) into an environment.

    Raises:
        InputError: An interpreter that does not exist, is the library under test itself, or cannot import the
            library (the message names ``verifier.compare_pythons[i]``, the interpreter and the dataset).
    """
    environments: list[Environment] = []
    for position, python in enumerate(Path(p).absolute() for p in pythons):
        name = f"verifier.{COMPARE_FIELD}[{position}] {python}"

        def bad(why: str, name: str = name) -> InputError:
            return InputError(f"{name}: {why}", path=registry_path, case_id=f"dataset {dataset}")

        if not Path(python).exists():
            raise bad("the interpreter does not exist")
        if target is not None and Path(python).absolute() == Path(target).absolute():
            raise bad("names the library under test itself (verifier.python)")
        sandbox = SandboxSettings(python=Path(python), timeout_s=settings.timeout_s, memory_mb=settings.memory_mb)
        try:
            index = probe_environment(sandbox, settings.library, import_name=settings.import_name)
        except (LibrarySettingError, RuntimeError, OSError) as exc:
            raise bad(f"the library cannot be probed there: {exc}") from exc
        environments.append(Environment(index_label(index), OfflineProver(index), sandbox))
    return environments


def prover_setting(settings: VerifierSettings, *, dataset: str, registry_path: str | None = None) -> str:
    """``verifier.prover`` (``offline`` or ``llm``; :data:`DEFAULT_PROVER` when empty), validated again for settings built in code.

    Raises:
        InputError: An unknown value (the message names the dataset and the registry).
    """
    mode = str(settings.prover or DEFAULT_PROVER)
    if mode not in ("offline", "llm"):
        raise InputError(f"verifier.prover must be offline or llm, not {mode!r}", path=registry_path, case_id=f"dataset {dataset}")
    return mode


def llm_fallback(mode: str, llm: LLMClient | None, index: LibraryIndex) -> LLMProver | None:
    """The LLM prover asked about what the offline proofs left open: only with ``verifier.prover: llm`` and a client."""
    if mode != "llm" or llm is None:
        return None
    library = f"{index.distribution} {index.version}" if index.distribution else index.import_name
    return LLMProver(llm, library=library, import_name=index.import_name, max_calls=LLM_MAX_CALLS, index=index)


def propose_fixes(
    verdicts: Sequence[Verdict],
    questions: Sequence[Case],
    prover: OfflineProver,
    sandbox: SandboxSettings,
    *,
    parallel: int | None = None,
    label: str = "target",
    compare: Sequence[Environment] = (),
    cache: VerdictCache | None = None,
) -> list[Proposal]:
    """:func:`~retrieval_pipeline.core.verifier.fixes.remediation.remediate`, several flagged questions at once.

    Each flagged question's candidate fixes are tried in turn, as ``remediate`` does (re-verified against
    ``compare`` too); the questions run in parallel (up to the number of cores, each proof batch in its own
    sandbox). Proposals come back in the order of the verdicts. With ``cache``, a re-verification whose proofs cannot
    have changed reuses its verdict (:func:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache.using_verdict_cache`).
    """
    flagged = [v for v in verdicts if flaggable(v)]
    if not flagged:
        return []

    def fix(verdict: Verdict) -> list[Proposal]:
        with using_verdict_cache(cache):  # in the worker thread: a context variable does not cross into it by itself
            return remediate([verdict], questions, prover, sandbox, label=label, compare=compare)

    with ThreadPoolExecutor(max_workers=max(1, min(parallel or default_parallel(), len(flagged)))) as pool:
        batches = list(pool.map(fix, flagged))
    return [proposal for batch in batches for proposal in batch]


def unprobed_meta(dataset: str, settings: VerifierSettings, python: str | Path) -> dict[str, Any]:
    """The report's ``meta`` when nothing was verified (no multiple-choice case): what would have been checked."""
    return {
        "suite": dataset,
        "library": settings.library or settings.import_name or STANDARD_LIBRARY,
        "import_name": settings.import_name,
        "distribution": settings.library,
        "library_version": None if (settings.library or settings.import_name) else platform.python_version(),
        "python_version": platform.python_version() if not settings.python else None,
        "python": str(python),
        "prover": None,
        "total_seconds": 0.0,
        "skipped_cases": [],
    }


def write_report(report: Mapping[str, Any], path: Path) -> str:
    """Write the report as JSON to ``path`` and as Markdown beside it (``.md``); returns the Markdown."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(report, indent=2, default=str))
    md = markdown_report(report)
    atomic_write_text(path.with_suffix(".md"), md)
    return md


def verdict_frame(verdicts: Sequence[Verdict], report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per verdict; ``evidence`` is the report's entry for the case, as JSON text."""
    rows = [
        {
            "case_id": v.case_id,
            "verdict": v.verdict,
            "marked": v.marked,
            "proven_true": list(v.proven_true),
            "proven_false": list(v.proven_false),
            "undecided": list(v.undecided),
            "reasons": list(v.reasons),
            "seconds": v.duration_s,
            "decided_by": json.dumps({e.letter: e.decided_by for e in v.evidence}),
            "evidence": json.dumps(report_case(report, v.case_id), default=str),
        }
        for v in verdicts
    ]
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def flagged_frame(proposals: Sequence[Proposal]) -> pd.DataFrame:
    """One row per proposal: the original verdict, whether the fix re-verified, and the fix as JSON text."""
    rows = [
        {
            "case_id": p.case_id,
            "verdict": p.original_verdict,
            "status": p.status,
            "note": p.note,
            "proposed": json.dumps(p.proposed, default=str),
            "tries": len(p.attempts),
        }
        for p in proposals
    ]
    return pd.DataFrame(rows, columns=FLAGGED_COLUMNS)


def report_case(report: Mapping[str, Any], case_id: str) -> dict[str, Any]:
    """The report's entry for one case (its evidence per option); empty when the case is not in it."""
    for entry in report.get("cases", []):
        if entry.get("case_id") == case_id:
            return dict(entry)
    return {}
