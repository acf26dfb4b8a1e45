"""A documented purpose: the one option that passed its check and whose documentation states the question's purpose
is true; two documented candidates, an open option or too few purpose terms leave everything as it was."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.observation import purpose_claims
from retrieval_pipeline.core.verifier.observation.purpose_claims import documented_purpose, purpose_terms
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, decide

QUESTION = "You want to save specific agent outputs to the session state automatically. What `LlmAgent` parameter do you use?"
OPTIONS = {"A": "save_to_state", "B": "state_variable", "C": "export_output", "D": "output_key", "E": "None of the above"}
DOCS = {
    ("acme.LlmAgent", "output_key"): "The key in session state to store the output of the agent.",
    ("acme.LlmAgent", "output_schema"): "The schema of the agent's output, stored in the session state.",
    ("acme.LlmAgent", "description"): "A one-line description of the agent.",
}


class Index:
    def resolve(self, name: str):
        return ("path", f"acme.{name}") if name[:1].isupper() else None


@pytest.fixture
def docs(monkeypatch):
    read: list[tuple[str, str | None]] = []

    def fake_read(path, member, settings):
        read.append((path, member))
        text = DOCS.get((path, member))
        return {"found": text is not None, "texts": [text] if text else [], "error": None}

    monkeypatch.setattr(purpose_claims, "read_docs", fake_read)
    return read


def evidence(states: dict[str, str], options: dict[str, str] = OPTIONS) -> list[OptionEvidence]:
    claims = decompose("c", QUESTION, options)
    assert all(c.kind == "constructor_kwarg" for c in claims if c.letter in states), [c.kind for c in claims]
    return [OptionEvidence(c.letter, c, "proof", None, states.get(c.letter, "undecided")) for c in claims]  # type: ignore[arg-type]


def test_the_purpose_terms_leave_out_the_names_and_the_kind_of_thing_asked_for():
    assert purpose_terms(QUESTION) == ["save", "outputs", "session", "state", "automatically"]


def test_the_one_documented_option_is_true_and_makes_the_question_valid(docs):
    states = {"A": "false", "B": "false", "C": "false", "D": "consistent"}
    before = evidence(states)
    assert decide("c", "D", before).verdict == "Unverifiable"  # None of the above is open
    after = documented_purpose(QUESTION, before, None, Index())  # type: ignore[arg-type]
    assert [e.state for e in after][:4] == ["false", "false", "false", "true"] and "documented purpose" in after[3].note
    assert docs == [("acme.LlmAgent", "output_key")]
    assert decide("c", "D", after).verdict == "Valid" and decide("c", "E", after).verdict == "Incorrect"


def test_two_documented_candidates_or_an_open_option_decide_nothing(docs):
    options = {**OPTIONS, "B": "output_schema"}
    two = evidence({"A": "false", "B": "consistent", "C": "false", "D": "consistent"}, options)
    assert [e.state for e in documented_purpose(QUESTION, two, None, Index())] == [e.state for e in two]  # type: ignore[arg-type]
    open_ = evidence({"A": "undecided", "B": "false", "C": "false", "D": "consistent"})
    assert documented_purpose(QUESTION, open_, None, Index())[3].state == "consistent"  # type: ignore[arg-type]
    assert docs == [("acme.LlmAgent", "output_schema"), ("acme.LlmAgent", "output_key")]  # the open question read nothing


def test_documentation_that_does_not_state_the_purpose_decides_nothing(docs):
    options = {**OPTIONS, "D": "description"}
    states = {"A": "false", "B": "false", "C": "false", "D": "consistent"}
    after = documented_purpose(QUESTION, evidence(states, options), None, Index())  # type: ignore[arg-type]
    assert after[3].state == "consistent"
