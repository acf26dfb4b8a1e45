"""Verify multiple-choice cases: decompose -> prove in the sandbox -> decide, with timing.

The marked answer is used only by :func:`~retrieval_pipeline.core.verifier.verdicts.verdict.decide`; the
claims and the proofs are made from the question and the options alone.

The library under test is probed first, once per run (:func:`~retrieval_pipeline.core.verifier.proofs.library_index.probe_environment`):
a library setting that names nothing importable stops the run with a
:class:`~retrieval_pipeline.core.verifier.proofs.library_index.LibrarySettingError` before any verdict. A proof that
ran out of wall-clock time (not CPU time) is run once more with :data:`TIMEOUT_RETRY_FACTOR` times the
limit: a busy machine must not turn a decidable option into an undecided one.

**How the proofs run.** The proofs of one question run in one sandbox
(:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_pytest_batch`): pytest starts once, and each
proof runs in a process of its own forked from it, so each option's outcome is read exactly as from a
sandbox of its own. A proof the batch did not report (its runner was killed, the process limit bound)
runs alone in a sandbox of its own (:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_pytest`), as
does a question with a single proof; a crash or a timeout of one proof leaves only that option
undecided. :func:`run_verification` proves :data:`QUESTIONS_PER_SLOT` questions per core at once and runs at
most one batch sandbox per core: the proofs that questions hand in while the batches are busy go into the next batch
together (:class:`~retrieval_pipeline.core.services.sandbox.shared_batches.SharedBatches`), so the runner's start
(pytest, the library preloaded) is paid per batch, not per question.

**A question about a snippet** runs its snippet once (with its file's module context) and decides every
``snippet`` claim against that one observation
(:func:`~retrieval_pipeline.core.verifier.observation.snippet_observation.snippet_evidence`); its other options are proven as above.

**A question about what a class or member is for** whose options are all prose is read against the library's
documentation of it, once (:mod:`~retrieval_pipeline.core.verifier.observation.doc_claims`). **A documented purpose**: when the
proofs leave one or two options consistent (their names exist) and every other one false, the documentation of what
each names is read, and the one whose documentation states the purpose the question asks about is true
(:mod:`~retrieval_pipeline.core.verifier.observation.purpose_claims`). **A missing argument, observed**: a question about a
snippet that asks which argument is missing runs the snippet, and the option naming the argument its error says is
missing is true (:mod:`~retrieval_pipeline.core.verifier.observation.missing_argument`).

**A second prover** (``fallback``, e.g. :class:`~retrieval_pipeline.core.verifier.proofs.llm_prover.LLMProver`) is asked
only about the options the first left undecided or merely consistent; its proofs run in the same sandbox. Its
checks never decide alone: a check of its that holds makes the option ``consistent``, never ``true`` (the model may
be hostile, and its check and refutation come from the same model), and its "false" results stand only when some
option of the question is proven true by the first prover or the snippet's observation (else one wrong or hostile
generated test could make the right answer false on its own). Its result replaces the first one only when it
settles more (false, or consistent where nothing was known); each option records which prover decided it.

**A verdict cache** (``cache``, :class:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache.VerdictCache`) returns the
verdict of a question whose proofs cannot have changed (same question, library files, verifier source, sandbox
settings; offline prover only) instead of proving it again; the run lists the reused case ids. Without one
passed, :func:`verify_question` asks the active cache (set by the caller with
:func:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache.using_verdict_cache`), so re-verifications made below
other code (the proposed fixes) are covered by the same keys.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from retrieval_pipeline.core.common.progress import Progress
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest
from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.services.sandbox.shared_batches import SharedBatches
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.observation.abridged import suite_names_line
from retrieval_pipeline.core.verifier.observation.doc_claims import doc_evidence
from retrieval_pipeline.core.verifier.observation.missing_argument import missing_argument
from retrieval_pipeline.core.verifier.observation.purpose_claims import documented_purpose
from retrieval_pipeline.core.verifier.observation.snippet_observation import compose, snippet_evidence
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex, probe_environment
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver, Proof, Prover
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict, decide, option_evidence
from retrieval_pipeline.core.verifier.verdicts.verdict_cache import VerdictCache, active_verdict_cache

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
    reused: list[str] = field(default_factory=list)  # case ids whose verdict came from the verdict cache
    cache_status: str | None = None  # None: no verdict cache asked for; "used"; or "not used: <why>"

    @property
    def proven(self) -> int:
        """Questions proven in this run (not reused from the verdict cache)."""
        return len(self.verdicts) - len(self.reused)


# Deliberately the parameters of prove_question (below) plus the cache: it wraps that call (duplicates lists the pair).
def verify_question(
    case_id: str,
    question: str,
    options: Mapping[str, str],
    marked: str,
    prover: Prover,
    settings: SandboxSettings,
    *,
    workers: int = 2,
    batch: bool = True,
    fallback: Prover | None = None,
    snippet: str | None = None,
    cache: VerdictCache | None = None,
    shared: SharedBatches | None = None,
) -> Verdict:
    """Verify one question; ``marked`` reaches only the verdict step.

    Args:
        case_id: The case's id (named in the proofs and the verdict).
        question: The question text.
        options: Letter -> option text.
        marked: The marked answer; only :func:`~retrieval_pipeline.core.verifier.verdicts.verdict.decide` sees it.
        prover: Writes a proof per claim.
        settings: The sandbox of the environment under test.
        workers: Proofs run at once when they run one sandbox each (a single proof, or those the batch
            did not report).
        batch: Run the question's proofs in one sandbox (:func:`run_pytest_batch`); False: one sandbox each.
        fallback: A second prover for the options the first did not settle (see the module docstring).
        snippet: The code the question is about (``Case.extra["code_snippet"]``): the options are claims about running it.
        cache: Reuse the verdict of an unchanged question from it, and store a new one; default: the
            :func:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache.active_verdict_cache` (None: prove it).
        shared: Where the batch goes when other questions are proven at the same time (their proofs may share its
            sandbox); None: a batch of its own.

    Returns:
        The verdict; ``verdict.reused`` says whether it came from the verdict cache rather than from this call's proofs.
    """
    cache = cache if cache is not None else active_verdict_cache()
    key = None
    if cache is not None:
        key = cache.key(prover, settings, fallback=fallback, batch=batch, case_id=case_id, question=question, options=options,
                        marked=marked, snippet=snippet)  # fmt: skip
    if key is not None and cache is not None:
        found = cache.get(key)
        if found is not None:
            return dataclasses.replace(found, reused=True)
    verdict = prove_question(case_id, question, options, marked, prover, settings, workers=workers, batch=batch, fallback=fallback,
                             snippet=snippet, shared=shared)  # fmt: skip
    if key is not None and cache is not None:
        cache.put(key, verdict)
    return verdict


def prove_question(
    case_id: str,
    question: str,
    options: Mapping[str, str],
    marked: str,
    prover: Prover,
    settings: SandboxSettings,
    *,
    workers: int = 2,
    batch: bool = True,
    fallback: Prover | None = None,
    snippet: str | None = None,
    shared: SharedBatches | None = None,
) -> Verdict:
    """Decompose, prove in the sandbox, decide (no cache): the arguments are those of :func:`verify_question`."""
    started = time.monotonic()
    claims = decompose(case_id, question, options, snippet=snippet)
    index = getattr(prover, "index", None)
    documented = None if snippet is not None else doc_evidence(question, claims, settings, index)
    if documented is not None:
        evidence: list[OptionEvidence] = documented
    else:
        observed = [i for i, c in enumerate(claims) if c.kind == "snippet"] if snippet is not None else []
        proofs = [prover.prove(claim) for i, claim in enumerate(claims) if i not in observed]
        executions = _run_proofs(proofs, settings, workers=workers, batch=batch, shared=shared)
        proven = iter([option_evidence(p, executions.get(i)) for i, p in enumerate(proofs)])
        texts = [c.option_text for c in claims]
        seen = iter(snippet_evidence([claims[i] for i in observed], str(snippet), settings, index, texts) if observed else [])
        evidence = [next(seen) if i in observed else next(proven) for i in range(len(claims))]
        evidence = documented_purpose(question, evidence, settings, index)
        if snippet is not None:
            evidence = missing_argument(question, snippet, evidence, settings, index)
    if fallback is not None:
        evidence = second_opinion(evidence, fallback, settings, workers=workers, batch=batch, shared=shared)
    verdict = decide(case_id, marked, evidence)
    verdict.duration_s = round(time.monotonic() - started, 3)
    return verdict


#: States a second prover is asked about.
OPEN_STATES = ("undecided", "consistent")


def second_opinion(
    evidence: Sequence[OptionEvidence],
    fallback: Prover,
    settings: SandboxSettings,
    *,
    workers: int = 2,
    batch: bool = True,
    shared: SharedBatches | None = None,
) -> list[OptionEvidence]:
    """Ask ``fallback`` about the options left undecided or consistent; keep its result where it settles more.

    Args:
        evidence: The first prover's evidence, one per option.
        fallback: The second prover (it gets the claims only).
        settings: The sandbox its proofs run in.
        workers: Proofs run at once when they run one sandbox each.
        batch: Run its proofs in one sandbox.
        shared: As for :func:`verify_question`.

    Returns:
        The evidence per option; where the second prover did not settle more, the first result with a note of the try.
    """
    open_ = [i for i, e in enumerate(evidence) if e.state in OPEN_STATES and e.claim.kind not in DERIVED_KINDS]
    if not open_:
        return list(evidence)
    proofs = [fallback.prove(evidence[i].claim) for i in open_]
    executions = _run_proofs(proofs, settings, workers=workers, batch=batch, shared=shared)
    merged = list(evidence)
    by_second: list[int] = []
    for position, index in enumerate(open_):
        first, second = evidence[index], option_evidence(proofs[position], executions.get(position))
        if second.state == "true":  # a model's check never makes an option true alone (docs/verifier.md, "Threat model")
            note = f"{second.note} (the check {second.prover} wrote held: consistent only, a model's check alone makes no option true)"
            second = dataclasses.replace(second, state="consistent", option_true=None, note=note)
        settles = second.state in ("true", "false") or (first.state == "undecided" and second.state == "consistent")
        if settles:
            second.note = f"{second.note} (the first proof, by {first.prover}, had: {first.state})"
            merged[index] = second
            by_second.append(index)
        else:
            merged[index] = dataclasses.replace(first, note=f"{first.note}; {second.prover} did not settle it either: {second.note}")
    return _without_lone_falses(merged, evidence, by_second)


def _without_lone_falses(merged: list[OptionEvidence], first: Sequence[OptionEvidence], by_second: Sequence[int]) -> list[OptionEvidence]:
    """The second prover's "false" results (at ``by_second``) stand only when some option of the question is then true.

    A wrong generated test could otherwise make the right answer false on its own: with no option shown true
    instead, its "false" results give way to the first prover's, with a note.
    """
    if any(e.state == "true" for e in merged):
        return merged
    out = list(merged)
    for index in by_second:
        after, before = merged[index], first[index]
        if after.state == "false":
            why = f"{after.prover} found it false ({after.note}), but no option of the question true, so that decides nothing"
            out[index] = dataclasses.replace(before, note=f"{before.note}; {why}")
    return out


def _run_proofs(
    proofs: Sequence[Proof], settings: SandboxSettings, *, workers: int, batch: bool, shared: SharedBatches | None = None
) -> dict[int, Execution | None]:
    """Run the proofs (one batch sandbox, shared when ``shared``, then alone what the batch did not settle); index -> execution."""
    runnable = [i for i, p in enumerate(proofs) if p.status == "proof" and p.test_source is not None and p.filename is not None]
    first: dict[int, Execution | None] = {}
    if batch and len(runnable) > 1:  # a batch matches results by position: file names may repeat
        tests = [(str(proofs[i].test_source), str(proofs[i].filename)) for i in runnable]
        first = dict(zip(runnable, (shared or SharedBatches(slots=1)).run(tests, settings)))

    def run(index: int) -> Execution | None:
        proof = proofs[index]
        if index not in runnable or proof.test_source is None or proof.filename is None:
            return None
        execution = first.get(index) or run_pytest(proof.test_source, proof.filename, settings)
        if execution.outcome == "timeout" and execution.limit == "wall_clock":  # the machine was busy, or it hangs
            slower = dataclasses.replace(settings, timeout_s=settings.timeout_s * TIMEOUT_RETRY_FACTOR)
            execution = run_pytest(proof.test_source, proof.filename, slower)
        return execution

    pending = [i for i in range(len(proofs)) if i in runnable and not _settled(first.get(i))]
    executions: dict[int, Execution | None] = {i: first.get(i) for i in range(len(proofs)) if i not in pending}
    if pending:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pending)))) as pool:
            executions.update(zip(pending, pool.map(run, pending)))
    return executions


def _settled(execution: Execution | None) -> bool:
    """A batch result that stands as it is: reported, and not stopped by the wall clock (that one is retried)."""
    return execution is not None and not (execution.outcome == "timeout" and execution.limit == "wall_clock")


#: Questions proven at once per batch slot: while a batch runs, the other questions' proofs wait to share the next.
#: On the 61 dev ADK questions (google-adk, 2 idle cores) 1, 2, 3, 4 and 6 took 53, 48, 45, 40 and 42 s and 102,
#: 93, 87, 77 and 81 CPU-s, with the same verdicts (``benchmarks/shared_batches.py``).
QUESTIONS_PER_SLOT = 4


def default_parallel() -> int:
    """The number of cores: batch sandboxes at once (the questions proven at once are :data:`QUESTIONS_PER_SLOT` times it)."""
    return max(1, os.cpu_count() or 1)


def run_verification(
    cases: Sequence[Case],
    prover: Prover | None = None,
    sandbox_settings: SandboxSettings | None = None,
    library: str | None = None,
    *,
    import_name: str | None = None,
    workers: int = 2,
    parallel: int | None = None,
    index: LibraryIndex | None = None,
    progress: Callable[[Verdict], None] | None = None,
    fallback: Prover | None = None,
    fallback_for: Callable[[LibraryIndex], Prover | None] | None = None,
    cache: VerdictCache | None = None,
) -> VerificationRun:
    """Probe the environment once, then verify every multiple-choice case, several questions at once.

    Args:
        cases: The suite; cases that are not multiple choice are skipped (listed in the run).
        prover: Writes the proofs; default: :class:`OfflineProver` over the probed index.
        sandbox_settings: The target environment and limits; default: this interpreter.
        library: The distribution under test (``google-adk``; ``verifier.library``): its version is reported,
            and without ``import_name`` the module to probe is derived from its files.
        import_name: The module to probe (``google.adk``; ``verifier.import_name``).
        workers: Proofs of one question run at once when they run one sandbox each.
        parallel: Questions proven at once; default: :data:`QUESTIONS_PER_SLOT` per core. Their proof batches run in
            one batch sandbox per :data:`QUESTIONS_PER_SLOT` of them (rounded up), shared (see the module docstring).
        index: A probed index to reuse (nothing is probed then).
        progress: Called with each verdict, in the order of the cases (each is also counted on a
            :class:`~retrieval_pipeline.core.common.progress.Progress` of the questions: log lines and a terminal bar).
        fallback: A second prover for the options the first did not settle (an LLM prover); None: none.
        fallback_for: Makes the second prover from the probed index (it names the library), when ``fallback`` is None.
        cache: Verdicts of unchanged questions to reuse, and where new ones are stored; None: every question is
            proven; default: the active one (:func:`~retrieval_pipeline.core.verifier.verdicts.verdict_cache.active_verdict_cache`).
            Used only with an offline prover and no second prover (:meth:`VerdictCache.status`).

    Returns:
        The verdicts in the order of the cases, the index, the prover's name, the seconds and the skipped ids.

    Raises:
        LibrarySettingError: The library setting names nothing importable in the target environment.
    """
    started = time.monotonic()
    settings = sandbox_settings or SandboxSettings()
    index = index or probe_environment(settings, library, import_name=import_name)
    if index.import_name and not settings.preload:  # a batch's proofs share the library's imports (SandboxSettings.preload)
        settings = dataclasses.replace(settings, preload=(index.import_name, *sorted(set(index.module_aliases.values()))))
    prover = prover or OfflineProver(index)
    if fallback is None and fallback_for is not None:
        fallback = fallback_for(index)
    questions: list[Case] = []
    skipped: list[str] = []
    for case in cases:
        if case.benchmark_type != "multiple_choice" or not case.options or case.correct_answer is None:
            skipped.append(case.case_id)
        else:
            questions.append(case)

    cache = cache if cache is not None else active_verdict_cache()
    cache_status = None if cache is None else cache.status(prover, settings, fallback=fallback)
    reused: list[str] = []

    at_once = max(1, min(parallel or default_parallel() * QUESTIONS_PER_SLOT, len(questions) or 1))
    shared = SharedBatches(slots=math.ceil(at_once / QUESTIONS_PER_SLOT))

    def verify(case: Case) -> Verdict:
        verdict = verify_question(case.case_id, case.query, case.options or {}, str(case.correct_answer), prover, settings,
                                  workers=workers, fallback=fallback, snippet=case_snippet(case), cache=cache,
                                  shared=shared)  # fmt: skip
        if verdict.reused:
            reused.append(case.case_id)
        return verdict

    verdicts: list[Verdict] = []
    counted = Progress("verifier", verb="verified", noun="questions", unit="questions", total=len(questions))
    with ThreadPoolExecutor(max_workers=at_once) as pool, counted:
        for verdict in pool.map(verify, questions):
            verdicts.append(verdict)
            counted.advance()
            if progress is not None:
                progress(verdict)
    name = getattr(prover, "name", type(prover).__name__)
    if fallback is not None:
        name += "+" + getattr(fallback, "name", type(fallback).__name__)
    order = {case.case_id: position for position, case in enumerate(questions)}
    reused.sort(key=lambda case_id: order.get(case_id, len(order)))
    return VerificationRun(verdicts, index, name, round(time.monotonic() - started, 3), skipped, reused, cache_status)


def case_snippet(case: Case) -> str | None:
    """The code a question is about (``Case.extra["code_snippet"]``, loaded with the suite), or None.

    With the module context of its file (``Case.extra["code_snippet_context"]``) put before it
    (:func:`~retrieval_pipeline.core.verifier.observation.snippet_observation.compose`): the snippet runs in that context. The
    names its suite defines elsewhere (``Case.extra["code_snippet_suite_names"]``) head the context as a comment line
    (:func:`~retrieval_pipeline.core.verifier.observation.abridged.suite_names_line`).
    """
    snippet = case.extra.get("code_snippet")
    if not isinstance(snippet, str):
        return None
    context = case.extra.get("code_snippet_context")
    context = context if isinstance(context, str) else ""
    elsewhere = case.extra.get("code_snippet_suite_names")
    if isinstance(elsewhere, list) and elsewhere:  # names its suite defines elsewhere (abridged.py): a comment line
        context = suite_names_line(str(name) for name in elsewhere) + context
    return compose(snippet, context or None)
