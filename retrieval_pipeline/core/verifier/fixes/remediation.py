"""Propose corrected cases for Ambiguous and Incorrect verdicts, and re-verify each proposal.

Deterministic and offline (an LLM that rewrites questions is a later seam). Candidates, in order:

* **Incorrect**, exactly one option proven true (None of the above included): make it the answer;
* **Ambiguous**: replace each distractor that is also true (or gives the same result as the marked
  answer) by a variant of it: another module for an import, another keyword name for a call or a
  parameter, another attribute name for a dotted name; the variant must be new among the options;
* **a stale distractor** (library drift): the question is Unverifiable against the library under test only
  because distractors now pass the same check as the marked answer (the marked answer true or consistent,
  every other open option true or consistent), *and* the unchanged question is Valid against another
  version of the library (``compare``): each such distractor is replaced by a variant, as for Ambiguous.
  Without that second version nothing shows it drifted, and no fix is proposed (two consistent options can
  be a fair semantic distractor);
* nothing proven to stand on (the marked answer false and nothing proven true): no automatic fix.

Every proposal goes through the same pipeline (decompose -> prove in the sandbox -> decide) and is
accepted only when it comes back **Valid** against the library under test *and* against every other
version given (``compare``: the dataset's ``verifier.compare_pythons``), and a proposal of a new key only when
that key is **proven true** against each of them (:func:`verified`: Valid by elimination is not enough to move a
key); after ``max_tries`` (3) attempts the case is marked ``needs_human_review``, its note naming what was tried. Each attempt records its verdict per version, and each proposal
the unchanged question's verdict per version (where the drift shows). Proposals are returned, and :func:`write_proposals` writes them to a separate
file: it refuses to write over any input file.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS, Claim
from retrieval_pipeline.core.verifier.proofs.provers import Prover
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict
from retrieval_pipeline.core.verifier.verify import case_snippet, verify_question

ProposalStatus = Literal["verified", "needs_human_review"]
MAX_TRIES = 3
#: Modules tried, in order, when an import distractor turns out to work.
_IMPORT_MODULE_POOL = ("types", "abc", "builtins", "operator", "functools", "itertools", "collections.abc", "typing")
#: Keyword names tried when a call or a parameter distractor turns out to be accepted.
_KEYWORD_POOL = ("limit", "size", "capacity", "max_size", "length", "count", "options", "settings")
_NAME_SUFFIXES = ("_all", "_ex", "_v2")
#: Exceptions tried when a "raises" distractor of a code snippet turns out true.
_EXCEPTION_POOL = ("TypeError", "ValueError", "KeyError", "AttributeError", "RuntimeError")


@dataclass(frozen=True)
class Environment:
    """A library environment a proposal is re-verified against.

    Attributes:
        label: What is reported for it (``google-adk 1.20.0``).
        prover: Writes the proofs (an :class:`~retrieval_pipeline.core.verifier.proofs.provers.OfflineProver` over its own index).
        settings: Its sandbox (its ``python``).
    """

    label: str
    prover: Prover
    settings: SandboxSettings


@dataclass
class Attempt:
    """One proposal and what re-verification said about it (``verdict``: against the library under test)."""

    description: str
    question: str
    options: dict[str, str]
    correct_answer: str
    verdict: str
    reasons: list[str]
    verdicts: dict[str, str] = field(default_factory=dict)  # environment label -> verdict (the library under test first)
    key_states: dict[str, str] = field(default_factory=dict)  # environment label -> the state of the proposed key


@dataclass
class Proposal:
    """The fix proposed for one case (or the record that none survived re-verification)."""

    case_id: str
    original_verdict: str
    status: ProposalStatus
    original: dict[str, Any]
    proposed: dict[str, Any] | None
    attempts: list[Attempt] = field(default_factory=list)
    note: str = ""
    original_verdicts: dict[str, str] = field(default_factory=dict)  # label -> the unchanged question's verdict


#: The label of the library under test when the caller names none.
TARGET_LABEL = "target"
#: States in which a distractor passes the same check as the marked answer.
_PASSING = ("true", "consistent")


# Deliberately the parameters of propose_fix (below), which it calls once per flagged verdict (duplicates lists the pair).
def remediate(
    verdicts: Sequence[Verdict],
    cases: Sequence[Case],
    prover: Prover,
    settings: SandboxSettings,
    *,
    max_tries: int = MAX_TRIES,
    workers: int = 2,
    label: str = TARGET_LABEL,
    compare: Sequence[Environment] = (),
) -> list[Proposal]:
    """A proposal for every Ambiguous or Incorrect verdict, and every stale distractor, each re-verified (bounded by ``max_tries``).

    Args:
        verdicts: The verdicts against the library under test.
        cases: The cases they are about.
        prover: The library under test's prover.
        settings: The library under test's sandbox.
        max_tries: Candidate fixes tried per case.
        workers: Proofs run at once when they run one sandbox each.
        label: The library under test's label (``google-adk 2.13.0``).
        compare: Other versions of the library; a fix must be Valid against each of them too.
    """
    by_id = {case.case_id: case for case in cases}
    proposals: list[Proposal] = []
    for verdict in verdicts:
        if not flaggable(verdict) or verdict.case_id not in by_id:
            continue
        proposal = propose_fix(verdict, by_id[verdict.case_id], prover, settings, max_tries=max_tries, workers=workers,
                               label=label, compare=compare)  # fmt: skip
        if proposal is not None:
            proposals.append(proposal)
    return proposals


def flaggable(verdict: Verdict) -> bool:
    """Ambiguous, Incorrect, or Unverifiable with a possibly stale distractor (:func:`stale_distractors`)."""
    return verdict.verdict in ("Ambiguous", "Incorrect") or bool(stale_distractors(verdict))


def stale_distractors(verdict: Verdict) -> list[OptionEvidence]:
    """The distractors that keep an Unverifiable verdict from Valid by passing the marked answer's own check.

    Only when the marked answer is true or consistent and every other open option (not None of the above) is
    true or consistent, so hardening them is all the question needs; empty otherwise.
    """
    if verdict.verdict != "Unverifiable":
        return []
    by_letter = {e.letter: e for e in verdict.evidence}
    mark = by_letter.get(verdict.marked)
    if mark is None or mark.state not in _PASSING:
        return []
    open_ = [e for e in verdict.evidence if e.letter != verdict.marked and e.state != "false" and e.claim.kind not in DERIVED_KINDS]
    return open_ if open_ and all(e.state in _PASSING for e in open_) else []


def propose_fix(
    verdict: Verdict,
    case: Case,
    prover: Prover,
    settings: SandboxSettings,
    *,
    max_tries: int = MAX_TRIES,
    workers: int = 2,
    label: str = TARGET_LABEL,
    compare: Sequence[Environment] = (),
) -> Proposal | None:
    """Try up to ``max_tries`` candidate fixes; the first Valid against every version is the proposal.

    Returns:
        The proposal; None for an Unverifiable verdict that shows no drift (its question is not Valid against
        any ``compare`` version either), which is not a case for a fix.
    """
    original = {
        "question": case.query,
        "options": dict(case.options),
        "correct_answer": case.correct_answer,
        "explanation": case.explanation,
    }
    snippet = case_snippet(case)
    before = {label: verdict.verdict} | {
        env.label: _verify(f"{case.case_id}#original", case.query, case.options, str(case.correct_answer), env, workers, snippet).verdict
        for env in compare
    }  # fmt: skip
    drifted = [name for name, seen in before.items() if name != label and seen == "Valid"]
    if verdict.verdict == "Unverifiable" and not drifted:
        return None
    target = Environment(label, prover, settings)
    attempts: list[Attempt] = []
    candidates = list(_candidates(verdict, case, drifted))
    for number, (description, question, options, answer, explanation) in enumerate(candidates[:max_tries], 1):
        attempt = _attempt(f"{case.case_id}#fix{number}", description, question, options, answer, [target, *compare], workers, snippet)
        attempts.append(attempt)
        if verified(attempt, new_key=answer != case.correct_answer):
            proposed = {"question": question, "options": dict(options), "correct_answer": answer,
                        "explanation": explanation}  # fmt: skip
            return Proposal(case.case_id, verdict.verdict, "verified", original, proposed, attempts, description, before)
    note = (
        "needs review: no candidate fix: no other option is proven true to take the key's place"
        if not candidates
        else f"needs review: no candidate was verified in {len(attempts)} tries ({_tried(attempts)})"
    )
    if drifted and verdict.verdict != "Unverifiable":
        note += f"; the question as it stands is Valid against {', '.join(drifted)}: its answer depends on the library version"
    return Proposal(case.case_id, verdict.verdict, "needs_human_review", original, None, attempts, note, before)


def verified(attempt: Attempt, *, new_key: bool) -> bool:
    """Whether a re-verified candidate is a fix: Valid against every version and, for a new key, that key proven true
    against every version. A new key that is Valid only by elimination (consistent, every other option false) may
    still be wrong, so the fix then needs review."""
    if not attempt.verdicts or not all(seen == "Valid" for seen in attempt.verdicts.values()):
        return False
    return not new_key or all(attempt.key_states.get(label) == "true" for label in attempt.verdicts)


def _tried(attempts: Sequence[Attempt]) -> str:
    """What each attempt tried and what came of it, in one line."""
    return "; ".join(
        f"{a.description}: " + ", ".join(f"{label} {seen}" + (f" (key {a.key_states[label]})" if label in a.key_states else "")
                                         for label, seen in a.verdicts.items())
        for a in attempts
    )  # fmt: skip


def _verify(
    case_id: str, question: str, options: Mapping[str, str], answer: str, env: Environment, workers: int, snippet: str | None = None
) -> Verdict:
    """One question (about ``snippet``, when it has one) against one environment."""
    if snippet is None:
        return verify_question(case_id, question, options, answer, env.prover, env.settings, workers=workers)
    return verify_question(case_id, question, options, answer, env.prover, env.settings, workers=workers, snippet=snippet)


def _attempt(
    case_id: str,
    description: str,
    question: str,
    options: Mapping[str, str],
    answer: str,
    environments: Sequence[Environment],
    workers: int,
    snippet: str | None = None,
) -> Attempt:
    """Re-verify one candidate against each environment in turn, stopping at the first that is not Valid."""
    verdicts: dict[str, str] = {}
    key_states: dict[str, str] = {}
    reasons: list[str] = []
    for position, env in enumerate(environments):
        checked = _verify(case_id, question, options, answer, env, workers, snippet)
        verdicts[env.label] = checked.verdict
        key_states[env.label] = next((e.state for e in checked.evidence if e.letter == answer), "undecided")
        reasons += checked.reasons if position == 0 else [f"against {env.label}: {r}" for r in checked.reasons]
        if checked.verdict != "Valid":
            break
    first = next(iter(verdicts.values()))
    return Attempt(description, question, dict(options), answer, first, reasons, verdicts, key_states)


def _candidates(verdict: Verdict, case: Case, drifted: Sequence[str] = ()):
    """Yield ``(description, question, options, correct_answer, explanation)`` candidates, best first."""
    options = dict(case.options)
    evidence = {e.letter: e for e in verdict.evidence}
    if verdict.verdict == "Incorrect" and len(verdict.proven_true) == 1:
        letter = verdict.proven_true[0]
        proof = evidence[letter].note
        yield (
            f"new ground truth {letter} (was {verdict.marked}); {letter} is the only option proven true",
            case.query,
            options,
            letter,
            f"Verified by execution: {proof}",
        )
    if verdict.verdict == "Ambiguous":
        offending = [
            e for e in verdict.evidence
            if e.letter != verdict.marked and (e.state == "true" or (e.fingerprint and e.fingerprint
                                                                      == evidence[verdict.marked].fingerprint))
        ]  # fmt: skip
        yield from _hardened(offending, case, verdict.marked, "hardened distractor(s), each a variant that must be proven false")
    stale = stale_distractors(verdict)
    if stale and drifted:
        why = (f"hardened stale distractor(s) (library drift: the question is Valid against {', '.join(drifted)}, but here "
               f"{_letters(stale)} pass(es) the marked answer's check)")  # fmt: skip
        yield from _hardened(stale, case, verdict.marked, why)


def _letters(evidence: Sequence[OptionEvidence]) -> str:
    return ", ".join(e.letter for e in evidence)


def _hardened(offending: Sequence[OptionEvidence], case: Case, marked: str, why: str):
    """Up to :data:`MAX_TRIES` rounds, each replacing every offending distractor by its next variant."""
    options = dict(case.options)
    variants = {e.letter: _variants(e.claim, options) for e in offending}
    for round_ in range(MAX_TRIES):
        new_options = dict(options)
        changed: list[str] = []
        for e in offending:
            pool = variants[e.letter]
            if round_ < len(pool):
                new_options[e.letter] = pool[round_]
                changed.append(f"{e.letter}: {options[e.letter]!r} -> {pool[round_]!r}")
        if not changed:
            break
        yield (f"{why}: " + "; ".join(changed), case.query, new_options, marked, case.explanation or "")


def _variants(claim: Claim, options: Mapping[str, str]) -> list[str]:
    """Deterministic near-miss variants of a distractor that turned out true; new texts only."""
    taken = {text.strip() for text in options.values()}
    found: list[str] = []

    def add(text: str) -> None:
        if text.strip() not in taken and text not in found:
            found.append(text)

    details = claim.details
    if claim.kind == "import" and details.get("names"):
        names = ", ".join(details["names"])
        for module in _IMPORT_MODULE_POOL:
            if module != details["module"]:
                add(f"from {module} import {names}")
    elif claim.kind == "expression" and details.get("mode") in ("evaluates", "equals"):
        for text in _call_variants(details["expr"], options):
            add(text)
    elif claim.kind in ("signature_param", "constructor_kwarg") and details.get("param"):
        for keyword in _KEYWORD_POOL:
            value = details.get("value")
            add(f"{keyword}={value}" if value is not None else keyword)
    elif claim.kind == "snippet":
        for text in _snippet_variants(claim):
            add(text)
    elif claim.kind == "exists" and details.get("path"):
        text = claim.option_text.strip()
        last = details["path"].rsplit(".", 1)[-1]
        for suffix in _NAME_SUFFIXES:
            add(re.sub(rf"\b{re.escape(last)}\b", last + suffix, text, count=1))
    return found


def _snippet_variants(claim: Claim) -> list[str]:
    """Near misses of an outcome of a code snippet: another exception, or an integer value off by one or two."""
    details, text = claim.details, claim.option_text
    if details.get("outcome") == "raises":
        name = str(details["exception"])
        return [text.replace(name, other, 1) for other in _EXCEPTION_POOL if other != name.rsplit(".", 1)[-1]]
    if details.get("outcome") == "value":
        try:
            value = ast.literal_eval(str(details["expected"]))
        except (SyntaxError, ValueError):
            return []
        if isinstance(value, int) and not isinstance(value, bool):
            head, _, tail = text.rpartition(f"`{details['expected']}`")
            return [f"{head}`{value + delta}`{tail}" for delta in (1, 2, -1)] if head or tail else []
    return []


def _call_variants(expr: str, options: Mapping[str, str]) -> list[str]:
    """``deque([], 3)`` -> ``deque([], limit=3)``: a positional argument or a keyword renamed."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return []
    call = tree.body
    if not isinstance(call, ast.Call):
        return []
    used = set(re.findall(r"(\w+)\s*=", " ".join(options.values())))
    keywords = [k for k in _KEYWORD_POOL if k not in used]
    variants: list[str] = []
    for keyword in keywords:
        new = ast.parse(expr, mode="eval").body
        assert isinstance(new, ast.Call)
        if new.args and len(new.args) > 1:
            value = new.args.pop()
            new.keywords.append(ast.keyword(arg=keyword, value=value))
        elif new.keywords:
            new.keywords[-1].arg = keyword
        else:
            continue
        variants.append(ast.unparse(new))
    return variants


# --------------------------------------------------------------------------------------------------
# Writing


def proposals_as_suite(proposals: Sequence[Proposal], cases: Sequence[Case]) -> dict[str, Any]:
    """The proposals as a suite file (``{benchmarks: [...]}``) plus a ``remediation`` record per row.

    A question about code keeps its ``code_snippet_ref`` as written (relative to the same files root).
    """
    by_id = {case.case_id: case for case in cases}
    rows: list[dict[str, Any]] = []
    for proposal in proposals:
        case = by_id.get(proposal.case_id)
        chosen = proposal.proposed or proposal.original
        row: dict[str, Any] = {
            "id": proposal.case_id,
            "question": chosen["question"],
            "options": chosen["options"],
            "correct_answer": chosen["correct_answer"],
            "explanation": chosen.get("explanation") or "",
            "benchmark_type": case.benchmark_type if case else "multiple_choice",
            **({"code_snippet_ref": case.extra["code_snippet_ref"]} if case and "code_snippet_ref" in case.extra else {}),
            "remediation": {
                "status": proposal.status,
                "original_verdict": proposal.original_verdict,
                "change": proposal.note,
                "original_correct_answer": proposal.original["correct_answer"],
                "verdicts_before": dict(proposal.original_verdicts),
                "attempts": [
                    {
                        "description": a.description,
                        "verdict": a.verdict,
                        "verdicts": dict(a.verdicts),
                        "key_states": dict(a.key_states),
                        "reasons": a.reasons,
                    }
                    for a in proposal.attempts
                ],
            },
        }
        rows.append(row)
    return {"benchmarks": rows}


def write_proposals(
    proposals: Sequence[Proposal],
    cases: Sequence[Case],
    path: str | Path,
    *,
    inputs: Sequence[str | Path] = (),
) -> Path:
    """Write the proposals to ``path``, a new file; never over an input suite.

    Raises:
        ValueError: ``path`` is one of ``inputs`` or the source file of one of ``cases``.
    """
    target = Path(path).resolve()
    protected = {Path(p).resolve() for p in inputs} | {Path(c.source_file).resolve() for c in cases if c.source_file}
    if target in protected:
        raise ValueError(f"refusing to write proposals over the input file {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(proposals_as_suite(proposals, cases), sort_keys=False, allow_unicode=True, width=120)
    target.write_text(text, encoding="utf-8")
    return target
