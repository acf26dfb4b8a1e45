"""Questions about code: options read as what running the snippet does, proven by running it."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.fixes.remediation import _variants
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.verify import verify_question

SNIPPET = "import json\nvalue = json.loads('[1, 2]')\nvalue.append(3)\n"
OPTIONS = {
    "A": "`value` is `[1, 2, 3]`",
    "B": "It raises `ValueError`",
    "C": "It prints `[1, 2, 3]`",
    "D": "It runs without error",
    "E": "None of the above",
    "F": "The list grows by one element",
}


def by_letter(snippet: str | None = SNIPPET, options: dict[str, str] = OPTIONS) -> dict:
    return {c.letter: c for c in decompose("c", "What happens when this code runs?", options, snippet=snippet)}


def test_each_outcome_is_read_from_the_option():
    claims = by_letter()
    assert {letter: c.kind for letter, c in claims.items()} == {
        "A": "snippet", "B": "snippet", "C": "snippet", "D": "snippet", "E": "none_of_the_above", "F": "unknown",
    }  # fmt: skip
    assert claims["A"].details["outcome"] == "value" and claims["A"].details["expr"] == "value"
    assert claims["A"].details["expected"] == "[1, 2, 3]" and claims["A"].details["snippet"] == SNIPPET
    assert (claims["B"].details["outcome"], claims["B"].details["exception"]) == ("raises", "ValueError")
    assert (claims["C"].details["outcome"], claims["C"].details["printed"]) == ("prints", "[1, 2, 3]")
    assert claims["D"].details["outcome"] == "runs"
    assert all(c.decides == "truth" for c in claims.values() if c.kind == "snippet")
    assert claims["A"].question == "What happens when this code runs?"


@pytest.mark.parametrize(
    ("option", "outcome"),
    [
        ("`KeyError` is raised", "raises"),
        ("it throws a json.JSONDecodeError", "raises"),
        ("No exception is raised", "runs"),
        ("`d['a']` ends up `[1]`", "value"),
        ("`f(2)` returns `4`", "value"),
        ("`x` is `some object`", None),  # not a literal: not checkable as a value
        ("`x +` is `1`", None),  # not an expression
    ],
)
def test_outcome_patterns(option, outcome):
    claim = by_letter(options={"A": option})["A"]
    assert (claim.details.get("outcome") if claim.kind == "snippet" else None) == outcome


def test_without_a_snippet_the_options_are_not_snippet_claims():
    assert all(c.kind != "snippet" for c in by_letter(snippet=None).values())


def run(snippet: str, options: dict[str, str], marked: str, sandbox):
    return verify_question("c", "What happens when this code runs?", options, marked, OfflineProver(), sandbox, snippet=snippet)


def states(verdict) -> dict[str, str]:
    return {e.letter: e.state for e in verdict.evidence}


def test_a_snippet_that_runs_settles_every_outcome(sandbox):
    verdict = run(SNIPPET, OPTIONS, "A", sandbox)
    # hand-derived: the list becomes [1, 2, 3], nothing is printed or raised
    assert states(verdict) == {"A": "true", "B": "false", "C": "false", "D": "true", "E": "false", "F": "undecided"}
    assert verdict.verdict == "Ambiguous"  # A and D are both true of this snippet


def test_a_snippet_that_raises_makes_later_states_false(sandbox):
    snippet = "import json\nvalue = json.loads('[1, 2')\n"
    options = {"A": "It raises `ValueError`", "B": "It raises `TypeError`", "C": "`value` is `[1, 2]`", "D": "It prints `[1, 2]`",
               "E": "None of the above"}  # fmt: skip
    verdict = run(snippet, options, "A", sandbox)
    # json.JSONDecodeError is a subclass of ValueError: A is true; C and D describe a state never reached
    assert states(verdict) == {"A": "true", "B": "false", "C": "false", "D": "false", "E": "false"}
    assert verdict.verdict == "Valid"
    assert "JSONDecodeError" in verdict.evidence[0].note and "before that state is reached" in verdict.evidence[2].note


def test_a_snippet_that_does_not_compile_decides_nothing(sandbox):
    verdict = run("def broken(:\n", {"A": "It raises `SyntaxError`", "B": "It runs without error"}, "A", sandbox)
    assert states(verdict) == {"A": "undecided", "B": "undecided"} and verdict.verdict == "Unverifiable"


def test_near_miss_variants_of_snippet_outcomes():
    claims = by_letter(options={"A": "`total` is `3`", "B": "It raises `KeyError`", "C": "`name` is `'x'`"})
    assert _variants(claims["A"], {"A": "`total` is `3`"}) == ["`total` is `4`", "`total` is `5`", "`total` is `2`"]
    assert _variants(claims["B"], {})[:2] == ["It raises `TypeError`", "It raises `ValueError`"]
    assert _variants(claims["C"], {}) == []  # only integers are varied
