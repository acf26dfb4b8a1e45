"""A passing necessary proof makes its option true only through the truth condition its claim names
(``Claim.details["truth_when"]``) and the proof's own code recorded."""

from __future__ import annotations

import json
from typing import Any

from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE
from retrieval_pipeline.core.verifier.proofs.provers import Proof
from retrieval_pipeline.core.verifier.verdicts.verdict import option_evidence

CONSTRUCT = "How do you correctly construct a user message content object with text?"


def _execution(record: dict[str, Any]) -> Execution:
    return Execution(0, True, "passed", "", "", 0.1, None, {EVIDENCE_FILE: json.dumps(record)})


def test_the_host_takes_the_option_as_true_only_when_the_proof_recorded_its_truth_condition() -> None:
    claim = decompose("c", CONSTRUCT, {"A": "types.Content(role='user', parts=[types.Part(text='Hello')])"})[0]
    proof = Proof(claim, "def test_x():\n    pass\n", "proof", "test_option_A.py")
    kept = option_evidence(proof, _execution({"option_true": True, "reason": "evaluates", "kept": True}))
    dropped = option_evidence(proof, _execution({"option_true": True, "reason": "evaluates", "kept": False}))
    silent = option_evidence(proof, _execution({"option_true": True, "reason": "evaluates"}))
    assert (kept.state, dropped.state, silent.state) == ("true", "consistent", "consistent")
    plain = decompose("c", "Which call is accepted?", {"A": "types.Content(role='user', parts=[])"})[0]
    other = option_evidence(Proof(plain, "", "proof", "t.py"), _execution({"option_true": True, "reason": "x", "kept": True}))
    assert other.state == "consistent"  # a record key the claim does not ask for proves nothing
