"""From per-option proofs to a verdict on the question.

Each option ends up ``true``, ``false``, ``consistent`` or ``undecided``:

* ``true``: a ``truth`` proof passed (the import works, the expression returns that value), or, for a question
  about what something is for, the library's documentation singles the option out (:mod:`..observation.doc_claims`);
* ``false``: a proof failed by its own recorded assertion (the name is missing, the value differs);
* ``consistent``: a ``necessary`` proof passed (the name exists, the parameter is there), which does
  not show the behaviour the question describes;
* ``undecided``: no proof (prose), or the proof could not decide (crash, timeout, missing subject); and a proof whose
  run hit a limit (wall clock, CPU, memory, processes, file size: ``limit`` says which) or that the guard stopped
  (:mod:`..sandbox_side.guard`: the option's own code tried to write or pre-empt the evidence), whatever it recorded.
  A failed proof of a *disjunctive* option ("``X`` (or a custom plugin)") is undecided too: the alternative
  it offers was not checked.

Every option records which prover wrote the proof that settled it (``decided_by``: ``offline`` or
``llm:<model>``, ``derived`` for "None of the above"; None while undecided).

"None of the above" is derived: false iff another option is proven true, and never true: every other option being
proven false does not prove that none of them is right (one disproof that looked in the wrong place is enough; on
questions scored unseen, 11 of 25 such derivations were wrong). "All of the above" is derived too: true iff every
other option is true, false iff one is false. A marked "All of the above" that is true
is not made Ambiguous by the options it stands for being true.

Everything a proof printed or recorded is redacted and capped (:func:`~retrieval_pipeline.core.services.sandbox.redaction.safe_text`)
as it becomes evidence: notes and recorded values at :data:`EVIDENCE_CHARS`, stdout/stderr to their last
:data:`OUTPUT_TAIL_CHARS`. Results are compared on a digest of the raw fingerprint, so neither changes a verdict.

Verdicts, for the marked answer M:

* **Incorrect**: M is proven false (the reasons name what is true instead, when known);
* **Ambiguous**: M is proven true and a distractor is proven true too; or M and a distractor evaluate
  to the same object (``deque(maxlen=3)`` and ``deque([], 3)``);
* **Valid**: M is proven true and every distractor false; or M is consistent (its check passed and nothing
  observed contradicts it) and every other option, "None of the above" included, is proven false (valid by
  elimination). A "None of the above" left undecided keeps a merely consistent M from Valid: the right answer
  may be none of the options written;
* **Unverifiable**: anything short of that; the reasons say which option was not settled and why.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.verifier.claims.claims import DERIVED_KINDS, Claim
from retrieval_pipeline.core.verifier.proofs.provers import Proof, parse_evidence
from retrieval_pipeline.core.verifier.sandbox_side.guard import GUARD_EXIT

VerdictLabel = Literal["Valid", "Ambiguous", "Incorrect", "Unverifiable"]
VERDICTS: tuple[str, ...] = ("Valid", "Ambiguous", "Incorrect", "Unverifiable")
OptionState = Literal["true", "false", "consistent", "undecided"]
#: Longest note, fingerprint or recorded value kept from a proof (after redaction).
EVIDENCE_CHARS = 400
#: Characters of a proof's stdout/stderr kept (the end, where pytest puts its summary).
OUTPUT_TAIL_CHARS = 800
#: Recorded keys kept from a proof's evidence file.
RECORD_KEYS = 20


@dataclass
class OptionEvidence:
    """One option: its claim, the proof that ran (if any), what happened, and what it settles."""

    letter: str
    claim: Claim
    proof_status: str  # "proof" | "unverifiable_offline" | "derived"
    option_true: bool | None
    state: OptionState
    note: str = ""
    test_source: str | None = None
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    outcome: str | None = None
    limit: str | None = None
    duration_s: float = 0.0
    fingerprint: str | None = None  # redacted and capped, for reading
    record: dict[str, Any] = field(default_factory=dict)  # what the test wrote in its evidence file (redacted, capped)
    fingerprint_key: str | None = None  # sha256 of the raw fingerprint: what "same result" compares
    prover: str | None = None  # who wrote the proof that ran: "offline" or "llm:<model>"

    @property
    def decided_by(self) -> str | None:
        """The prover whose proof settled the option (true, false or consistent); None while undecided."""
        return self.prover if self.state != "undecided" else None


@dataclass
class Verdict:
    """The verdict on one case, with the evidence per option."""

    case_id: str
    verdict: VerdictLabel
    marked: str
    proven_true: list[str]
    reasons: list[str]
    evidence: list[OptionEvidence]
    proven_false: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    consistent: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    reused: bool = field(default=False, compare=False)  # from the verdict cache, not proven by the call that returned it


def option_evidence(proof: Proof, execution: Execution | None) -> OptionEvidence:
    """Read one proof's run into an :class:`OptionEvidence` (E and unknown claims have no run)."""
    claim = proof.claim
    if claim.kind in DERIVED_KINDS:
        return OptionEvidence(claim.letter, claim, "derived", None, "undecided", "derived from the other options", prover="derived")
    if proof.status != "proof" or execution is None:
        reason = proof.reason or str(claim.details.get("reason", "no offline proof"))
        return OptionEvidence(claim.letter, claim, proof.status, None, "undecided", reason, prover=proof.prover)
    raw = parse_evidence(execution.artifacts) or {}
    note = safe_text(raw.get("reason", ""), EVIDENCE_CHARS)
    state: OptionState = "undecided"
    option_true: bool | None = None
    limit = execution.limit or ("memory" if execution.memory_limit_hit else "processes" if execution.pids_limit_hit else None)
    refused = re.findall(r"\[rp-guard\] refused: ([^\n]*)", execution.stderr) if execution.exit_code == GUARD_EXIT else []
    if limit or refused:  # a run a limit distorted, or one the guard stopped, decides nothing (whatever it recorded)
        why = (
            f"the proof's run hit a limit ({limit})"
            if limit
            else f"the guard stopped the proof (the option's code tried: {refused[-1][:200]})"
        )
        note = safe_text(f"undecided: {why}" + (f"; it had recorded: {note}" if note else ""), EVIDENCE_CHARS)
    elif execution.passed and raw.get("option_true") is True:
        if claim.decides == "truth":
            state, option_true = "true", True
        else:
            state = "consistent"
            note = f"{note} (a necessary condition only: the behaviour the question describes is not executed)"
    elif execution.outcome == "failed" and raw.get("option_true") is False and claim.details.get("disjunctive"):
        note = f"undecided: {note} (but the option offers an alternative, which was not checked)"
    elif execution.outcome == "failed" and raw.get("option_true") is False:
        state, option_true = "false", False
    else:
        note = f"undecided: {note or f'the proof ended with outcome {execution.outcome!r}'}"
    fingerprint = raw.get("fingerprint")
    return OptionEvidence(
        letter=claim.letter,
        claim=claim,
        proof_status=proof.status,
        option_true=option_true,
        state=state,
        note=note,
        test_source=proof.test_source,
        stdout=safe_text(execution.stdout, OUTPUT_TAIL_CHARS, keep="tail"),
        stderr=safe_text(execution.stderr, OUTPUT_TAIL_CHARS, keep="tail"),
        exit_code=execution.exit_code,
        outcome=execution.outcome,
        limit=limit,
        duration_s=execution.duration_s,
        fingerprint=None if fingerprint is None else safe_text(fingerprint, EVIDENCE_CHARS),
        record=safe_record(raw),
        fingerprint_key=None if fingerprint is None else hashlib.sha256(str(fingerprint).encode()).hexdigest(),
        prover=proof.prover,
    )


def safe_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A proof's evidence record as it may be kept: at most :data:`RECORD_KEYS` keys, every text redacted and capped."""
    kept: dict[str, Any] = {}
    for key in list(record)[:RECORD_KEYS]:
        value = record[key]
        if value is None or isinstance(value, (bool, int, float)):
            kept[safe_text(key, 80)] = value
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=repr)
            kept[safe_text(key, 80)] = safe_text(text, EVIDENCE_CHARS)
    return kept


def decide(case_id: str, marked: str, evidence: Sequence[OptionEvidence]) -> Verdict:
    """Apply the rules of the module docstring."""
    by_letter = {e.letter: e for e in evidence}
    regular = [e for e in evidence if e.claim.kind not in DERIVED_KINDS]
    _derive(regular, [e for e in evidence if e.claim.kind == "none_of_the_above"], "false")
    _derive(regular, [e for e in evidence if e.claim.kind == "all_of_the_above"], "true")
    letters = lambda state: [e.letter for e in evidence if e.state == state]  # noqa: E731
    proven_true, proven_false = letters("true"), letters("false")
    consistent, undecided = letters("consistent"), letters("undecided")

    def verdict(label: VerdictLabel, *reasons: str) -> Verdict:
        return Verdict(case_id, label, marked, proven_true, list(reasons), list(evidence), proven_false,
                       undecided, consistent)  # fmt: skip

    if marked not in by_letter:
        return verdict("Unverifiable", f"the marked answer {marked!r} is not among the options")
    mark = by_letter[marked]
    others = [e for e in evidence if e.letter != marked]

    if mark.state == "false":
        instead = ", ".join(proven_true) or "not established"
        return verdict("Incorrect", f"marked {marked} is proven false: {mark.note}", f"proven true instead: {instead}")
    if mark.state == "true":
        if mark.claim.kind == "all_of_the_above":  # the options it stands for are true with it
            others = [e for e in others if e.claim.kind in DERIVED_KINDS]
        also_true = [e.letter for e in others if e.state == "true"]
        same = _same_result(mark, others)
        if also_true or same:
            reasons = [f"marked {marked} is proven true ({mark.note})"]
            reasons += [f"{e.letter} is proven true too: {e.note}" for e in others if e.state == "true"]
            reasons += [f"{e.letter} gives the same result as {marked}: {e.fingerprint}" for e in same]
            return verdict("Ambiguous", *reasons)
        open_ = [e for e in others if e.state != "false"]
        if not open_:
            return verdict("Valid", f"marked {marked} is proven true and every distractor false")
        return verdict(
            "Unverifiable",
            f"marked {marked} is proven true, but distractor(s) {_names(open_)} are not settled",
            *[f"{e.letter}: {e.state}: {e.note}" for e in open_],
        )
    if mark.state == "consistent":
        same = _same_result(mark, others)
        if same:
            return verdict(
                "Ambiguous",
                f"marked {marked} evaluates, and {_names(same)} evaluate(s) to the same object: {mark.fingerprint}",
            )
        open_ = [e for e in others if e.state != "false"]  # "None of the above" included: it may be the answer
        if not open_:
            return verdict(
                "Valid",
                f"by elimination: every other option, None of the above included, is proven false and {marked} passes "
                f"its check, which nothing observed contradicts ({mark.note})",
            )
        return verdict(
            "Unverifiable",
            f"marked {marked} passes only a necessary check, and {_names(open_)} are not ruled out",
            *[f"{e.letter}: {e.state}: {e.note}" for e in open_],
        )
    # the marked option itself is undecided (or it is E and E is undecided)
    reasons = [f"marked {marked} is not settled: {mark.note}"]
    if proven_true:
        reasons.append(f"proven true: {', '.join(proven_true)}")
    reasons += [f"{e.letter}: {e.state}: {e.note}" for e in others if e.state in ("undecided", "consistent")]
    return verdict("Unverifiable", *reasons)


#: Why "None of the above" stays undecided when every other option is disproven.
NOTA_UNPROVEN = "that none of them is right: a disproof can look in the wrong place"


def _derive(regular: Sequence[OptionEvidence], derived: Sequence[OptionEvidence], needed: OptionState) -> None:
    """Settle derived options from the regular ones: true when every regular option is ``needed``, false when one is
    the opposite ("None of the above": ``needed`` false; "All of the above": ``needed`` true)."""
    opposite: OptionState = "true" if needed == "false" else "false"
    for e in derived:
        breaking = [r for r in regular if r.state == opposite]
        if breaking:
            e.state, e.option_true = "false", False
            e.note = f"false: {_names(breaking)} is proven {opposite}"
        elif regular and all(r.state == needed for r in regular) and needed == "false":
            # "None of the above" by elimination: on questions scored unseen, 11 of 25 were wrong (one misdirected
            # disproof is enough), so disproofs alone never make it true (docs/verifier.md, soundness rule 9)
            e.state, e.option_true = "undecided", None
            e.note = f"undecided: every other option is proven false, which alone does not prove {NOTA_UNPROVEN}"
        elif regular and all(r.state == needed for r in regular):
            e.state, e.option_true = "true", True
            e.note = f"true: every other option is proven {needed}"
        else:
            e.state, e.option_true = "undecided", None
            e.note = f"undecided: {_names([r for r in regular if r.state != needed])} not proven {needed}"


def _same_result(mark: OptionEvidence, others: Sequence[OptionEvidence]) -> list[OptionEvidence]:
    key = _result_key(mark)
    if not key:
        return []
    return [e for e in others if _result_key(e) == key and e.state in ("true", "consistent")]


def _result_key(e: OptionEvidence) -> str | None:
    """What two options are compared on: the raw fingerprint's digest (the shown one may be cut or masked)."""
    return e.fingerprint_key or e.fingerprint


def _names(items: Sequence[OptionEvidence]) -> str:
    return ", ".join(e.letter for e in items)
