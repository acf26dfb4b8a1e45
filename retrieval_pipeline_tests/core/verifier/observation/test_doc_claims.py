"""Questions about what a class or member is for, whose options are all prose: read against the library's docs."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.observation.doc_claims import applies, coverage, decide, purpose_target
from retrieval_pipeline.core.verifier.verify import verify_question


@pytest.mark.parametrize(
    ("question", "target"),
    [
        ("What does `RunConfig.max_llm_calls` control?", ("RunConfig", "max_llm_calls")),
        ("What is `Runner` primarily used for?", ("Runner", None)),
        ("What does `ResumabilityConfig.is_resumable=True` enable?", ("ResumabilityConfig", "is_resumable")),
        ("What is the primary use case for `LoggingPlugin`?", ("LoggingPlugin", None)),
        ("How do you enable `GoogleSearchTool` via configuration?", None),  # a how-to, not what it is for
        ("What is the purpose of the `state_delta` parameter in `runner.run_async`?", None),  # two spans, lower case
        ("Which class runs agents in parallel?", None),
    ],
)
def test_the_target_of_a_purpose_question(question, target):
    assert purpose_target(question) == target


def test_it_applies_only_when_every_option_is_prose():
    question = "What is `Runner` primarily used for?"
    prose = {"A": "Running agents.", "B": "Nothing.", "C": "None of the above"}
    assert applies(question, decompose("c", question, prose))
    assert not applies(question, decompose("c", question, {"A": "from acme.adk import Runner", "B": "Nothing."}))


def test_coverage_counts_key_terms_with_a_shared_stem():
    docs = "Configures the proactivity of the model. If enabled, the model will detect emotions."
    assert coverage("Configure proactive behavior.", docs) == pytest.approx(2 / 3)
    assert coverage("Enable emotional adaptation.", docs) == pytest.approx(2 / 3)
    assert coverage("Nothing.", docs) == 0 and coverage("It.", docs) is None


def test_a_prose_option_is_false_only_when_the_docs_describe_another():
    claims = decompose(
        "c", "What does `RunConfig.max_llm_calls` control?", {"A": "Limit total LLM calls.", "B": "Tool selection.", "C": "Agent name."}
    )
    docs = "A limit on the total number of llm calls for a given run, and the agent it applies to."
    # "agent" is in the docs too: C is consistent with them, so A is not singled out
    assert [state for state, _ in decide(claims, docs)] == ["consistent", "false", "consistent"]
    assert [state for state, _ in decide(claims, "Something else entirely.")] == ["undecided", "undecided", "undecided"]


def test_a_purpose_question_is_decided_by_the_class_docstring(acme_offline):
    settings, prover = acme_offline
    question = "What is `ParallelAgent` used for?"
    options = {"A": "Runs its sub-agents concurrently.", "B": "Tool selection.", "C": "Nothing.", "D": "None of the above"}
    verdict = verify_question("c", question, options, "A", prover, settings)
    assert {e.letter: e.state for e in verdict.evidence} == {"A": "true", "B": "false", "C": "false", "D": "false"}
    assert verdict.verdict == "Valid"
    assert verify_question("c", question, options, "B", prover, settings).verdict == "Incorrect"
    # the docstring singles A out, so "None of the above" marked is a wrong key too
    assert verify_question("c", question, options, "D", prover, settings).verdict == "Incorrect"
    assert verify_question("c", "What is `NoSuchAgent` used for?", options, "A", prover, settings).verdict == "Unverifiable"


def test_the_docs_make_an_option_true_only_when_they_single_it_out():
    question = "What does `RunConfig.support_cfc` control?"
    options = {"A": "Nothing.", "B": "Agent name.", "C": "Enable compositional function calling.", "D": "None of the above"}
    claims = [c for c in decompose("c", question, options) if c.letter != "D"]
    docs = "Whether to support CFC (Compositional Function Calling). Only applicable for StreamingMode.SSE."
    states = [state for state, _ in decide(claims, docs)]
    assert states == ["false", "false", "true"]  # 3 of 4 key terms, and no other option's
    echoing = docs + " The agent name is logged."  # now B is consistent with the docs as well: neither is singled out
    assert [state for state, _ in decide(claims, echoing)] == ["false", "consistent", "consistent"]
    one_term = [c for c in decompose("c", question, {"A": "Compositional.", "B": "Agent name."}) if c.letter == "A"]
    assert [state for state, _ in decide(one_term, docs)] == ["consistent"]  # one word in common proves nothing


def test_one_shared_word_describes_nothing():
    claims = decompose("c", "What does `RunConfig.speech_config` control?", {"A": "Agent name.", "B": "TTS/STT settings."})
    # "agent" is the only word in common: A is consistent with the docs, but B is not ruled out by it
    assert [state for state, _ in decide(claims, "Speech configuration for the live agent.")] == ["consistent", "undecided"]
