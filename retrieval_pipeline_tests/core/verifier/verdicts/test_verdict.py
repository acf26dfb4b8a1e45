"""Verdict rules on hand-made evidence."""

from __future__ import annotations

import json

from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE
from retrieval_pipeline.core.verifier.proofs.provers import Proof
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OUTPUT_TAIL_CHARS, OptionEvidence, decide, option_evidence


def ev(letter: str, state: str, kind: str = "import", fingerprint: str | None = None) -> OptionEvidence:
    if letter == "E":
        kind = "none_of_the_above"
    claim = Claim("c", letter, f"option {letter}", kind, "h", None, {})  # type: ignore[arg-type]
    option_true = {"true": True, "false": False}.get(state)
    return OptionEvidence(
        letter,
        claim,
        "proof",
        option_true,
        state,
        note=f"{letter} {state}",  # type: ignore[arg-type]
        fingerprint=fingerprint,
    )


def case(states: dict[str, str], **fingerprints: str) -> list[OptionEvidence]:
    return [ev(k, v, fingerprint=fingerprints.get(k)) for k, v in states.items()] + [ev("E", "undecided")]


def test_valid_when_marked_true_and_every_distractor_false():
    verdict = decide("c", "B", case({"A": "false", "B": "true", "C": "false", "D": "false"}))
    assert verdict.verdict == "Valid" and verdict.proven_true == ["B"]
    assert verdict.evidence[-1].option_true is False  # E is false once B is true


def test_incorrect_when_marked_proven_false_names_the_true_one():
    verdict = decide("c", "C", case({"A": "true", "B": "false", "C": "false", "D": "false"}))
    assert verdict.verdict == "Incorrect"
    assert "proven true instead: A" in verdict.reasons[-1]


def test_ambiguous_when_a_distractor_is_true_too():
    verdict = decide("c", "A", case({"A": "true", "B": "true", "C": "false", "D": "false"}))
    assert verdict.verdict == "Ambiguous" and verdict.proven_true == ["A", "B"]


def test_ambiguous_when_two_options_give_the_same_object():
    evidence = case({"A": "consistent", "B": "consistent", "C": "false"}, A="deque:x", B="deque:x")
    assert decide("c", "A", evidence).verdict == "Ambiguous"


def test_unverifiable_names_the_undecided_distractor():
    verdict = decide("c", "A", case({"A": "true", "B": "false", "C": "undecided", "D": "false"}))
    assert verdict.verdict == "Unverifiable"
    assert "C" in verdict.reasons[0]


def test_unverifiable_when_the_marked_option_cannot_be_proven():
    verdict = decide("c", "A", case({"A": "undecided", "B": "false"}))
    assert verdict.verdict == "Unverifiable" and "marked A is not settled" in verdict.reasons[0]


def test_necessary_only_checks_valid_by_elimination_or_unverifiable():
    without_none = [ev(k, v) for k, v in {"A": "consistent", "B": "false", "C": "false"}.items()]
    assert decide("c", "A", without_none).verdict == "Valid"
    both_exist = decide("c", "A", case({"A": "consistent", "B": "consistent", "C": "false"}))
    assert both_exist.verdict == "Unverifiable" and "B" in both_exist.reasons[0]


def test_valid_by_elimination_needs_none_of_the_above_proven_false_too():
    """Soundness: a merely consistent mark is Valid only when every other option, "None of the above" included, is
    proven false. With E undecided the right answer may be none of the options written: Unverifiable, naming E."""
    verdict = decide("c", "A", case({"A": "consistent", "B": "false", "C": "false", "D": "false"}))
    assert verdict.verdict == "Unverifiable" and "E" in verdict.reasons[0]
    # a mark proven true makes E false, so the same distractors give Valid
    assert decide("c", "A", case({"A": "true", "B": "false", "C": "false", "D": "false"})).verdict == "Valid"


def test_none_of_the_above_marked():
    # every other option disproven does not prove that none is right (soundness rule 9): never Valid by elimination
    left = decide("c", "E", case({"A": "false", "B": "false"}))
    assert left.verdict == "Unverifiable" and {e.letter: e.state for e in left.evidence}["E"] == "undecided"
    assert "does not prove that none of them is right" in left.evidence[-1].note
    wrong = decide("c", "E", case({"A": "false", "B": "true"}))
    assert wrong.verdict == "Incorrect" and wrong.proven_true == ["B"]
    assert decide("c", "E", case({"A": "false", "B": "consistent"})).verdict == "Unverifiable"


def test_a_marked_option_disproven_is_incorrect_without_none_of_the_above_being_proven():
    verdict = decide("c", "A", case({"A": "false", "B": "false"}))
    assert verdict.verdict == "Incorrect" and verdict.proven_true == []  # E stays undecided: nothing to propose


def with_all(states: dict[str, str]) -> list[OptionEvidence]:
    """Options A.. with the given states, then D: "All of the above", then E: "None of the above"."""
    every = Claim("c", "D", "All of the above", "all_of_the_above", "h", None, {})
    return [ev(k, v) for k, v in states.items()] + [OptionEvidence("D", every, "derived", None, "undecided")] + [ev("E", "undecided")]


def test_all_of_the_above_is_true_when_every_other_option_is_and_false_when_one_is_not():
    assert decide("c", "D", with_all({"A": "true", "B": "true", "C": "true"})).verdict == "Valid"  # A..C are what D says
    stale = decide("c", "D", with_all({"A": "true", "B": "false", "C": "true"}))
    assert stale.verdict == "Incorrect" and stale.proven_true == ["A", "C"]
    assert decide("c", "D", with_all({"A": "true", "B": "consistent", "C": "true"})).verdict == "Unverifiable"
    # a single option marked while "All of the above" holds: a better answer is there
    assert decide("c", "A", with_all({"A": "true", "B": "true", "C": "true"})).verdict == "Ambiguous"
    none = decide("c", "E", with_all({"A": "false", "B": "false", "C": "false"}))
    assert none.verdict == "Unverifiable" and {e.letter: e.state for e in none.evidence}["D"] == "false"


def _run(record: dict, passed: bool = True) -> Execution:
    artifacts = {EVIDENCE_FILE: json.dumps(record)}
    return Execution(0 if passed else 1, passed, "passed" if passed else "failed", "x" * 5000, "", 0.1, None, artifacts)


def _proof(letter: str) -> Proof:
    claim = Claim("c", letter, f"option {letter}", "expression", "h", None, {"decides": "necessary"})  # type: ignore[arg-type]
    return Proof(claim, "def test_x():\n    pass\n", "proof", f"test_option_{letter}.py")


def test_capped_fingerprints_are_compared_on_the_raw_value():
    """Two results whose fingerprints differ only past the cap are different; equal ones are the same."""
    head = "collections.deque:" + "deque([" + "1, " * 300
    a = option_evidence(_proof("A"), _run({"option_true": True, "reason": "ok", "fingerprint": head + "1])"}))
    b = option_evidence(_proof("B"), _run({"option_true": True, "reason": "ok", "fingerprint": head + "2])"}))
    c = option_evidence(_proof("C"), _run({"option_true": True, "reason": "ok", "fingerprint": head + "1])"}))
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) <= EVIDENCE_CHARS  # the shown ones are cut alike
    assert decide("c", "A", [a, b]).verdict != "Ambiguous"
    assert decide("c", "A", [a, c]).verdict == "Ambiguous"


def test_evidence_texts_are_redacted_and_capped():
    record = {"option_true": False, "reason": "returns 'root:$6$abcdefgh$SECRETHASH0123:1::' " + "y" * 2000,
              "actual": "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz", "n": 3}  # fmt: skip
    evidence = option_evidence(_proof("A"), _run(record, passed=False))
    assert evidence.state == "false"
    assert "SECRETHASH" not in evidence.note and "[redacted: password hash]" in evidence.note
    assert len(evidence.note) <= EVIDENCE_CHARS and len(evidence.stdout) <= OUTPUT_TAIL_CHARS
    assert evidence.record["actual"] == "OPENAI_API_KEY=[redacted]" and evidence.record["n"] == 3
