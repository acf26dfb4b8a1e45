"""Verify multiple-choice cases: decompose -> prove in the sandbox -> decide, with timing.

The marked answer is used only by :func:`~retrieval_pipeline.core.verifier.verdict.decide`; the
claims and the proofs are made from the question and the options alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from retrieval_pipeline.core.types import Case
from retrieval_pipeline.core.verifier.claims import decompose
from retrieval_pipeline.core.verifier.provers import LibraryIndex, OfflineProver, Prover, probe_environment
from retrieval_pipeline.core.verifier.sandbox import Execution, SandboxSettings, run_pytest
from retrieval_pipeline.core.verifier.verdict import OptionEvidence, Verdict, decide, option_evidence


@dataclass
class VerificationRun:
    """Verdicts plus what they were checked against."""

    verdicts: list[Verdict]
    index: LibraryIndex
    prover: str
    total_seconds: float
    skipped: list[str]  # case ids that are not multiple choice


def verify_question(
    case_id: str,
    question: str,
    options: Mapping[str, str],
    marked: str,
    prover: Prover,
    settings: SandboxSettings,
    *,
    workers: int = 2,
) -> Verdict:
    """Verify one question; ``marked`` reaches only the verdict step."""
    started = time.monotonic()
    claims = decompose(case_id, question, options)
    proofs = [prover.prove(claim) for claim in claims]

    def run(index: int) -> Execution | None:
        proof = proofs[index]
        if proof.status != "proof" or proof.test_source is None or proof.filename is None:
            return None
        return run_pytest(proof.test_source, proof.filename, settings)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        executions = list(pool.map(run, range(len(proofs))))
    evidence: list[OptionEvidence] = [option_evidence(p, e) for p, e in zip(proofs, executions)]
    verdict = decide(case_id, marked, evidence)
    verdict.duration_s = round(time.monotonic() - started, 3)
    return verdict


def run_verification(
    cases: Sequence[Case],
    prover: Prover | None = None,
    sandbox_settings: SandboxSettings | None = None,
    library: str | None = None,
    *,
    workers: int = 2,
    index: LibraryIndex | None = None,
    progress: Callable[[Verdict], None] | None = None,
) -> VerificationRun:
    """Probe the environment once, then verify every multiple-choice case."""
    started = time.monotonic()
    settings = sandbox_settings or SandboxSettings()
    index = index or probe_environment(settings, library)
    prover = prover or OfflineProver(index)
    verdicts: list[Verdict] = []
    skipped: list[str] = []
    for case in cases:
        if case.benchmark_type != "multiple_choice" or not case.options or case.correct_answer is None:
            skipped.append(case.case_id)
            continue
        verdict = verify_question(
            case.case_id, case.query, case.options, case.correct_answer, prover, settings, workers=workers
        )
        verdicts.append(verdict)
        if progress is not None:
            progress(verdict)
    return VerificationRun(verdicts, index, getattr(prover, "name", type(prover).__name__),
                           round(time.monotonic() - started, 3), skipped)  # fmt: skip


def verify_suite(
    cases: Sequence[Case],
    prover: Prover | None = None,
    sandbox_settings: SandboxSettings | None = None,
    library: str | None = None,
) -> list[Verdict]:
    """Verdicts for the multiple-choice cases of a suite (see :func:`run_verification`)."""
    return run_verification(cases, prover, sandbox_settings, library).verdicts
