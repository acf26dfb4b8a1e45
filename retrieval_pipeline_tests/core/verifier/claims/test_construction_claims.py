"""A call's result keeps its arguments, the claim side: which questions ask how to build the object a call builds, and
the truth condition (``truth_when: kept``) the claim hands to its proof; the other proofs by kind of claim are in
``sandbox_side/test_sandbox_truth_proofs.py``, ``observation/test_missing_argument.py`` and ``verdicts/test_truth_when.py``."""

from __future__ import annotations

import ast

import pytest

from retrieval_pipeline.core.verifier.claims.claims import construction_asked
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver

CONSTRUCT = "How do you correctly construct a user message content object with text?"


def call(text: str) -> ast.Call:
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


@pytest.mark.parametrize(
    ("question", "option", "asked"),
    [
        (CONSTRUCT, "types.Content(role='user', parts=[types.Part(text='Hello')])", True),
        (CONSTRUCT, "types.Content(role='user', parts=[])", False),  # the question's "with text" is not in the call
        (CONSTRUCT, "types.Blob(data=b'Hello', mime_type='text/plain')", False),  # builds nothing the question names
        (CONSTRUCT, "types.Content('user', [types.Part(text='Hello')])", False),  # positional: nothing to read back by name
        ("Which configuration object holds the user's content?", "types.Content(role='user', parts=[])", False),  # not "how to build"
        ("How do you create a `RunConfig` with streaming?", "RunConfig(streaming_mode='sse')", True),
        ("How do you create a `RunConfig` with streaming?", "make_config(streaming_mode='sse')", False),  # no class
        ("How do you create an agent with a code executor?", "LlmAgent(name='a', code_executor=CodeExecutor())", True),
        ("How do you create an agent with a code executor?", "LlmAgent(name='a', tools=[code_executor_tool])", False),  # a value
    ],
)
def test_a_construction_question_asks_for_a_call_that_keeps_its_arguments(question: str, option: str, asked: bool) -> None:
    assert construction_asked(question, call(option)) is asked


def test_the_claim_carries_the_truth_condition_only_for_a_construction_question() -> None:
    built = decompose("c", CONSTRUCT, {"A": "types.Content(role='user', parts=[types.Part(text='Hello')])"})[0]
    assert built.kind == "expression" and built.decides == "necessary" and built.details["truth_when"] == "kept"
    other = decompose("c", "Which call is accepted?", {"A": "types.Content(role='user', parts=[])"})[0]
    assert "truth_when" not in other.details


def test_the_offline_prover_passes_the_truth_condition_to_the_expression_proof() -> None:
    claim = decompose("c", CONSTRUCT, {"A": "types.Content(role='user', parts=[types.Part(text='Hello')])"})[0]
    function, data = OfflineProver(None)._expression_test(claim)
    assert function == "_prove_expression" and data["kept"] is True
