"""Verify multiple-choice cases: decompose -> prove in the sandbox -> decide, with timing.

The marked answer is used only by :func:`~retrieval_pipeline.core.verifier.verdict.decide`; the
claims and the proofs are made from the question and the options alone.

The library under test is probed first (:func:`~retrieval_pipeline.core.verifier.provers.probe_environment`):
a library setting that names nothing importable stops the run with a
:class:`~retrieval_pipeline.core.verifier.provers.LibrarySettingError` before any verdict. A proof that
ran out of wall-clock time (not CPU time) is run once more with :data:`TIMEOUT_RETRY_FACTOR` times the
limit: a busy machine must not turn a decidable option into an undecided one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from retrieval_pipeline.core.types import Case
from retrieval_pipeline.core.verifier.claims import decompose
from retrieval_pipeline.core.verifier.provers import LibraryIndex, OfflineProver, Prover, probe_environment
from retrieval_pipeline.core.verifier.sandbox import Execution, SandboxSettings, run_pytest
from retrieval_pipeline.core.verifier.verdict import OptionEvidence, Verdict, decide, option_evidence

#: A proof stopped by the wall clock is retried once with this many times the limit.
TIMEOUT_RETRY_FACTOR = 3.0


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
        execution = run_pytest(proof.test_source, proof.filename, settings)
        if execution.outcome == "timeout" and execution.limit == "wall_clock":  # the machine was busy, or it hangs
            slower = dataclasses.replace(settings, timeout_s=settings.timeout_s * TIMEOUT_RETRY_FACTOR)
            execution = run_pytest(proof.test_source, proof.filename, slower)
        return execution

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
    import_name: str | None = None,
    workers: int = 2,
    index: LibraryIndex | None = None,
    progress: Callable[[Verdict], None] | None = None,
) -> VerificationRun:
    """Probe the environment once, then verify every multiple-choice case.

    Args:
        cases: The suite; cases that are not multiple choice are skipped (listed in the run).
        prover: Writes the proofs; default: :class:`OfflineProver` over the probed index.
        sandbox_settings: The target environment and limits; default: this interpreter.
        library: The distribution under test (``google-adk``; ``verifier.library``): its version is reported,
            and without ``import_name`` the module to probe is derived from its files.
        import_name: The module to probe (``google.adk``; ``verifier.import_name``).
        workers: Proofs of one question run at once.
        index: A probed index to reuse (nothing is probed then).
        progress: Called with each verdict as it is made.

    Raises:
        LibrarySettingError: The library setting names nothing importable in the target environment.
    """
    started = time.monotonic()
    settings = sandbox_settings or SandboxSettings()
    index = index or probe_environment(settings, library, import_name=import_name)
    prover = prover or OfflineProver(index)
    verdicts: list[Verdict] = []
    skipped: list[str] = []
    for case in cases:
        if case.benchmark_type != "multiple_choice" or not case.options or case.correct_answer is None:
            skipped.append(case.case_id)
            continue
        verdict = verify_question(case.case_id, case.query, case.options, case.correct_answer, prover, settings, workers=workers)
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
    *,
    import_name: str | None = None,
) -> list[Verdict]:
    """Verdicts for the multiple-choice cases of a suite (see :func:`run_verification`)."""
    return run_verification(cases, prover, sandbox_settings, library, import_name=import_name).verdicts
