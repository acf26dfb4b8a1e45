"""A missing argument, observed: the option naming the argument the snippet's error lists as missing is true; an error
that names no option, an abridged snippet (a missing argument no option names), an untrusted run or nothing raised
decides nothing."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.observation import missing_argument as missing_module
from retrieval_pipeline.core.verifier.observation.missing_argument import asks_missing, missing_argument
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, decide

MISSING = "Which argument is missing in this `Runner` initialization?"
SNIPPET = "def code_under_test():\n    Runner(agent=my_agent)\n"


def test_the_error_must_come_from_the_class_the_question_names() -> None:
    from retrieval_pipeline.core.verifier.observation.missing_argument import from_named_class

    assert from_named_class(MISSING, {"message": "Runner.__init__() missing 1 required keyword-only argument: 'app_name'"})
    assert from_named_class(MISSING, {"message": "1 validation error for Runner"})
    assert not from_named_class(MISSING, {"message": "1 validation error for LlmAgent"})
    assert not from_named_class(MISSING, {"message": "RunnerConfig() missing 1 required positional argument: 'x'"})
    assert from_named_class("Which argument is missing here?", {"message": "f() missing 1 required positional argument: 'x'"})


def test_the_questions_that_ask_for_a_missing_argument() -> None:
    assert asks_missing(MISSING) and asks_missing("What required parameter was omitted from the call?")
    assert not asks_missing("Which argument does `Runner` accept?") and not asks_missing("What is missing from the docs?")


def keyword_evidence(options: dict[str, str], states: dict[str, str]) -> list[OptionEvidence]:
    claims = decompose("c", MISSING, options)
    return [OptionEvidence(c.letter, c, "proof", None, states.get(c.letter, "undecided")) for c in claims]  # type: ignore[arg-type]


OPTIONS = {"A": "`tools`", "B": "`app_name`", "C": "`description`", "D": "`session_service`", "E": "None of the above"}


def observed(monkeypatch: pytest.MonkeyPatch, raised: dict[str, Any] | None) -> None:
    observation = {"called": "code_under_test", "raised": raised, "stdout": "", "returned": None}
    monkeypatch.setattr(
        missing_module, "observe", lambda *args, **kwargs: (observation, Execution(0, True, "passed", "", "", 0.1, None, {}))
    )


def test_the_option_naming_the_argument_the_error_says_is_missing_is_true(monkeypatch: pytest.MonkeyPatch) -> None:
    observed(
        monkeypatch,
        {"type": "TypeError", "mro": ["TypeError"], "message": "Runner.__init__() missing 1 required keyword-only argument: 'app_name'"},
    )
    before = keyword_evidence(OPTIONS, {"A": "false", "B": "consistent", "C": "false", "D": "consistent"})
    after = missing_argument(MISSING, SNIPPET, before, None, None)  # type: ignore[arg-type]
    assert {e.letter: e.state for e in after} == {"A": "false", "B": "true", "C": "false", "D": "consistent", "E": "undecided"}
    assert "names 'app_name' as missing" in after[1].note
    assert decide("c", "B", after).verdict == "Unverifiable"  # D is still open: not Valid by this alone
    settled = [e if e.letter != "D" else OptionEvidence("D", e.claim, "proof", False, "false") for e in after]
    assert decide("c", "B", settled).verdict == "Valid" and decide("c", "E", settled).verdict == "Incorrect"


@pytest.mark.parametrize(
    "raised",
    [
        {"type": "TypeError", "mro": ["TypeError"], "message": "Runner.__init__() missing 1 required keyword-only argument: 'node'"},
        {"type": "ValueError", "mro": ["ValueError"], "message": "app_name looks wrong"},  # no missing argument listed
        None,  # nothing raised
        {
            "type": "ValidationError",
            "mro": ["ValidationError", "ValueError"],
            "message": "1 validation error for LlmAgent\napp_name\n  Field required",
            "errors": [{"type": "missing", "loc": ["app_name"], "msg": "Field required"}],
        },  # another call failed first  # fmt: skip
        {"type": "TypeError", "mro": ["TypeError"], "message": "missing 1 required positional argument: 'app_name'", "limit": 1},
    ],
)
def test_an_error_that_names_no_option_or_an_unmentioned_argument_decides_nothing(monkeypatch: pytest.MonkeyPatch, raised) -> None:
    """``node``: a required argument neither the question nor an option mentions, the snippet is abridged (rule 3)."""
    if raised and raised.pop("limit", None):
        monkeypatch.setattr(missing_module, "untrusted", lambda *args: "the snippet's run hit a limit (memory)")
    observed(monkeypatch, raised)
    before = keyword_evidence(OPTIONS, {"A": "false", "B": "consistent", "C": "false", "D": "consistent"})
    after = missing_argument(MISSING, SNIPPET, before, None, None)  # type: ignore[arg-type]
    assert [e.state for e in after] == [e.state for e in before]


def test_a_question_that_does_not_ask_for_a_missing_argument_runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(missing_module, "observe", lambda *args, **kwargs: pytest.fail("observed"))
    claims = decompose("c", "Which argument does `Runner` accept?", OPTIONS)
    before = [OptionEvidence(c.letter, c, "proof", None, "consistent") for c in claims]
    assert missing_argument("Which argument does `Runner` accept?", SNIPPET, before, None, None) == before  # type: ignore[arg-type]
