"""Propose corrected cases for Ambiguous and Incorrect verdicts, and re-verify each proposal.

Deterministic and offline (an LLM that rewrites questions is a later seam). Candidates, in order:

* **Incorrect**, exactly one option proven true (None of the above included): make it the answer;
* **Ambiguous**: replace each distractor that is also true (or gives the same result as the marked
  answer) by a variant of it: another module for an import, another keyword name for a call or a
  parameter, another attribute name for a dotted name; the variant must be new among the options;
* nothing proven to stand on (the marked answer false and nothing proven true): no automatic fix.

Every proposal goes through the same pipeline (decompose -> prove in the sandbox -> decide) and is
accepted only when it comes back **Valid**; after ``max_tries`` (3) attempts the case is marked
``needs_human_review``. Proposals are returned, and :func:`write_proposals` writes them to a separate
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

from retrieval_pipeline.core.types import Case
from retrieval_pipeline.core.verifier.claims import Claim
from retrieval_pipeline.core.verifier.provers import Prover
from retrieval_pipeline.core.verifier.sandbox import SandboxSettings
from retrieval_pipeline.core.verifier.verdict import Verdict
from retrieval_pipeline.core.verifier.verify import verify_question

ProposalStatus = Literal["verified", "needs_human_review"]
MAX_TRIES = 3
#: Modules tried, in order, when an import distractor turns out to work.
_IMPORT_MODULE_POOL = ("types", "abc", "builtins", "operator", "functools", "itertools", "collections.abc", "typing")
#: Keyword names tried when a call or a parameter distractor turns out to be accepted.
_KEYWORD_POOL = ("limit", "size", "capacity", "max_size", "length", "count", "options", "settings")
_NAME_SUFFIXES = ("_all", "_ex", "_v2")


@dataclass
class Attempt:
    """One proposal and what re-verification said about it."""

    description: str
    question: str
    options: dict[str, str]
    correct_answer: str
    verdict: str
    reasons: list[str]


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


def remediate(
    verdicts: Sequence[Verdict],
    cases: Sequence[Case],
    prover: Prover,
    settings: SandboxSettings,
    *,
    max_tries: int = MAX_TRIES,
    workers: int = 2,
) -> list[Proposal]:
    """A proposal for every Ambiguous or Incorrect verdict, each re-verified (bounded by ``max_tries``)."""
    by_id = {case.case_id: case for case in cases}
    proposals: list[Proposal] = []
    for verdict in verdicts:
        if verdict.verdict not in ("Ambiguous", "Incorrect") or verdict.case_id not in by_id:
            continue
        proposals.append(propose_fix(verdict, by_id[verdict.case_id], prover, settings, max_tries=max_tries,
                                     workers=workers))  # fmt: skip
    return proposals


def propose_fix(
    verdict: Verdict,
    case: Case,
    prover: Prover,
    settings: SandboxSettings,
    *,
    max_tries: int = MAX_TRIES,
    workers: int = 2,
) -> Proposal:
    """Try up to ``max_tries`` candidate fixes; the first that re-verifies as Valid is the proposal."""
    original = {
        "question": case.query,
        "options": dict(case.options),
        "correct_answer": case.correct_answer,
        "explanation": case.explanation,
    }
    attempts: list[Attempt] = []
    candidates = list(_candidates(verdict, case))
    for number, (description, question, options, answer, explanation) in enumerate(candidates[:max_tries], 1):
        checked = verify_question(f"{case.case_id}#fix{number}", question, options, answer, prover, settings, workers=workers)
        attempts.append(Attempt(description, question, dict(options), answer, checked.verdict, checked.reasons))
        if checked.verdict == "Valid":
            proposed = {"question": question, "options": dict(options), "correct_answer": answer,
                        "explanation": explanation}  # fmt: skip
            return Proposal(case.case_id, verdict.verdict, "verified", original, proposed, attempts, description)
    note = "no candidate fix" if not candidates else f"no candidate re-verified as Valid in {len(attempts)} tries"
    return Proposal(case.case_id, verdict.verdict, "needs_human_review", original, None, attempts, note)


def _candidates(verdict: Verdict, case: Case):
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
            yield (
                "hardened distractor(s), each a variant that must be proven false: " + "; ".join(changed),
                case.query,
                new_options,
                verdict.marked,
                case.explanation or "",
            )


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
    elif claim.kind == "exists" and details.get("path"):
        text = claim.option_text.strip()
        last = details["path"].rsplit(".", 1)[-1]
        for suffix in _NAME_SUFFIXES:
            add(re.sub(rf"\b{re.escape(last)}\b", last + suffix, text, count=1))
    return found


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
    """The proposals as a suite file (``{benchmarks: [...]}``) plus a ``remediation`` record per row."""
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
            "remediation": {
                "status": proposal.status,
                "original_verdict": proposal.original_verdict,
                "change": proposal.note,
                "original_correct_answer": proposal.original["correct_answer"],
                "attempts": [{"description": a.description, "verdict": a.verdict, "reasons": a.reasons} for a in proposal.attempts],
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
