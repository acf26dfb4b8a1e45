"""Questions about what a class or member is for, whose options are all prose: read against the library's docs."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.doc_claims import applies, coverage, decide, purpose_target
from retrieval_pipeline.core.verifier.library_index import probe_environment
from retrieval_pipeline.core.verifier.provers import OfflineProver
from retrieval_pipeline.core.verifier.verify import verify_question
from retrieval_pipeline_tests.core.conftest import require_sandbox
from retrieval_pipeline_tests.core.verifier import fake_adk


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
    assert [state for state, _ in decide(claims, docs)] == ["consistent", "false", "consistent"]  # "agent" is in the docs
    assert [state for state, _ in decide(claims, "Something else entirely.")] == ["undecided", "undecided", "undecided"]


@pytest.fixture(scope="module")
def acme(tmp_path_factory):
    require_sandbox()
    settings = fake_adk.sandbox_settings(fake_adk.make_env(tmp_path_factory.mktemp("acme")))
    return settings, OfflineProver(probe_environment(settings, fake_adk.DISTRIBUTION, import_name=fake_adk.IMPORT_NAME))


def test_a_purpose_question_is_valid_by_elimination_against_the_class_docstring(acme):
    settings, prover = acme
    question = "What is `ParallelAgent` used for?"
    options = {"A": "Runs its sub-agents concurrently.", "B": "Tool selection.", "C": "Nothing.", "D": "None of the above"}
    verdict = verify_question("c", question, options, "A", prover, settings)
    assert {e.letter: e.state for e in verdict.evidence} == {"A": "consistent", "B": "false", "C": "false", "D": "undecided"}
    assert verdict.verdict == "Valid"
    assert verify_question("c", question, options, "B", prover, settings).verdict == "Incorrect"
    assert verify_question("c", "What is `NoSuchAgent` used for?", options, "A", prover, settings).verdict == "Unverifiable"


def test_one_shared_word_describes_nothing():
    claims = decompose("c", "What does `RunConfig.speech_config` control?", {"A": "Agent name.", "B": "TTS/STT settings."})
    # "agent" is the only word in common: A is consistent with the docs, but B is not ruled out by it
    assert [state for state, _ in decide(claims, "Speech configuration for the live agent.")] == ["consistent", "undecided"]
