"""Remediation: bounded tries, re-verified proposals, never written over the input."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.fixes import remediation
from retrieval_pipeline.core.verifier.fixes.remediation import propose_fix, write_proposals
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict

QUESTION = "Which import statement gives you the `OrderedDict` class?"
OPTIONS = {
    "A": "from collections import OrderedDict",
    "B": "from typing import OrderedDict",
    "C": "from collections.abc import OrderedDict",
    "E": "None of the above",
}


def make_case(tmp_path, marked="A") -> Case:
    source = tmp_path / "suite.yaml"
    source.write_text("benchmarks: []\n")
    return Case(
        "c1",
        "s",
        "multiple_choice",
        str(source),
        0,
        QUESTION,
        options=dict(OPTIONS),
        correct_answer=marked,
        explanation="`OrderedDict` is defined in `collections`.",
    )


def ambiguous_verdict() -> Verdict:
    claims = decompose("c1", QUESTION, OPTIONS)
    states = {"A": "true", "B": "true", "C": "false", "E": "false"}
    evidence = [
        OptionEvidence(
            c.letter, c, "proof", {"true": True, "false": False}[states[c.letter]], states[c.letter], note=f"{c.letter} {states[c.letter]}"
        )
        for c in claims
    ]  # type: ignore[arg-type]
    return Verdict("c1", "Ambiguous", "A", ["A", "B"], ["B is proven true too"], evidence)


def test_loop_is_bounded_then_needs_human_review(tmp_path, monkeypatch):
    calls: list[dict] = []

    def never_valid(case_id, question, options, marked, prover, settings, workers=2):
        calls.append(dict(options))
        return Verdict(case_id, "Unverifiable", marked, [], ["stub"], [])

    monkeypatch.setattr(remediation, "verify_question", never_valid)
    proposal = propose_fix(ambiguous_verdict(), make_case(tmp_path), OfflineProver(), None, max_tries=3)  # type: ignore[arg-type]
    assert len(calls) == 3 and len(proposal.attempts) == 3
    assert proposal.status == "needs_human_review" and proposal.proposed is None
    assert all(c["B"] != OPTIONS["B"] for c in calls)  # each try replaced the offending distractor
    assert len({c["B"] for c in calls}) == 3


def test_first_valid_attempt_is_the_proposal(tmp_path, monkeypatch):
    def valid(case_id, question, options, marked, prover, settings, workers=2):
        return Verdict(case_id, "Valid", marked, [marked], ["ok"], [])

    monkeypatch.setattr(remediation, "verify_question", valid)
    proposal = propose_fix(ambiguous_verdict(), make_case(tmp_path), OfflineProver(), None)  # type: ignore[arg-type]
    assert proposal.status == "verified" and len(proposal.attempts) == 1
    assert proposal.proposed["options"]["B"] == "from types import OrderedDict"
    assert proposal.proposed["correct_answer"] == "A"


def incorrect_verdict() -> Verdict:
    """Marked B is proven false and A alone is proven true: the candidate fix makes A the key."""
    claims = decompose("c1", QUESTION, OPTIONS)
    states = {"A": "true", "B": "false", "C": "false", "E": "false"}
    evidence = [OptionEvidence(c.letter, c, "proof", None, states[c.letter], note=states[c.letter]) for c in claims]  # type: ignore[arg-type]
    return Verdict("c1", "Incorrect", "B", ["A"], ["B is proven false"], evidence)


def reverified(key_state: str):
    """A fake re-verification: Valid, with the marked (proposed) key in ``key_state`` and the other options false."""

    def verify(case_id, question, options, marked, prover, settings, workers=2):
        claims = decompose(case_id, question, options)
        state = {c.letter: key_state if c.letter == marked else "false" for c in claims}
        evidence = [OptionEvidence(c.letter, c, "proof", None, state[c.letter]) for c in claims]  # type: ignore[arg-type]
        return Verdict(case_id, "Valid", marked, [marked] if key_state == "true" else [], ["ok"], evidence)

    return verify


def test_a_new_key_is_verified_only_when_it_is_proven_true(tmp_path, monkeypatch):
    """Soundness: a new key that is Valid only by elimination (consistent) needs review, and the note says what was tried."""
    monkeypatch.setattr(remediation, "verify_question", reverified("consistent"))
    proposal = propose_fix(incorrect_verdict(), make_case(tmp_path, marked="B"), OfflineProver(), None)  # type: ignore[arg-type]
    assert proposal.status == "needs_human_review" and proposal.proposed is None
    assert proposal.note.startswith("needs review") and "new ground truth A" in proposal.note and "key consistent" in proposal.note
    monkeypatch.setattr(remediation, "verify_question", reverified("true"))
    proposal = propose_fix(incorrect_verdict(), make_case(tmp_path, marked="B"), OfflineProver(), None)  # type: ignore[arg-type]
    assert proposal.status == "verified" and proposal.proposed["correct_answer"] == "A"
    assert proposal.attempts[0].key_states == {remediation.TARGET_LABEL: "true"}


def test_proposals_never_overwrite_the_input(tmp_path, monkeypatch):
    monkeypatch.setattr(remediation, "verify_question", lambda case_id, q, o, m, p, s, workers=2: Verdict(case_id, "Valid", m, [m], [], []))
    case = make_case(tmp_path)
    before = (tmp_path / "suite.yaml").read_bytes()
    proposal = propose_fix(ambiguous_verdict(), case, OfflineProver(), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="refusing to write"):
        write_proposals([proposal], [case], tmp_path / "suite.yaml")
    other_input = tmp_path / "other.yaml"
    other_input.write_text("x")
    with pytest.raises(ValueError, match="refusing to write"):
        write_proposals([proposal], [case], other_input, inputs=[other_input])
    out = write_proposals([proposal], [case], tmp_path / "proposals.yaml")
    assert (tmp_path / "suite.yaml").read_bytes() == before
    assert "from types import OrderedDict" in out.read_text() and "needs_human_review" not in out.read_text()


def test_real_reverification_of_an_ambiguous_case(tmp_path, sandbox):
    proposal = propose_fix(ambiguous_verdict(), make_case(tmp_path), OfflineProver(), sandbox)
    assert proposal.status == "verified"
    assert proposal.attempts[-1].verdict == "Valid"
