"""``benchmarks/verify_fresh_mc.py``: verdicts and option states scored against a truth established by running."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark) -> ModuleType:
    return load_benchmark("verify_fresh_mc.py")


def row(case: str, marked: str, verdict: str, states: dict[str, str], mutants: dict[str, str]) -> dict:
    return {"case_id": case, "marked": marked, "verdict": verdict, "states": states, "mutants": mutants}


def test_each_kind_of_error_is_counted_against_the_truth_not_the_key(bench) -> None:
    results = [
        # right key, proven: no error; its mutants flagged
        row("ok", "A", "Valid", {"A": "true", "B": "false", "C": "false"}, {"B": "Incorrect", "C": "Incorrect"}),
        # the key drifted (truth C): Incorrect is right; the mutant onto C is Valid and is no false Valid
        row("drift", "A", "Incorrect", {"A": "false", "B": "false", "C": "true"}, {"B": "Incorrect", "C": "Valid"}),
        # a true key disproven: false false and false Incorrect; a wrong option proven true: false true, false Ambiguous
        row("bad", "A", "Incorrect", {"A": "false", "B": "true", "C": "false"}, {"B": "Valid", "C": "Incorrect"}),
        # undecided: no error, and a mutant left Unverifiable is not flagged
        row("open", "B", "Unverifiable", {"A": "consistent", "B": "undecided"}, {"A": "Unverifiable"}),
        # a wrong key certified
        row("certified", "B", "Valid", {"A": "undecided", "B": "consistent"}, {"A": "Unverifiable"}),
    ]
    truth = {"ok": {"A"}, "drift": {"C"}, "bad": {"A"}, "open": {"B"}, "certified": {"A"}}
    card = bench.score(results, truth)
    errors = card["errors"]
    assert errors["false_true"] == ["bad:B"] and errors["false_false"] == ["bad:A"]
    assert errors["false_incorrect"] == ["bad"] and errors["false_valid"] == ["certified"]
    assert errors["false_ambiguous"] == [] and errors["false_valid_mutant"] == ["bad:B"]
    assert (card["Valid"], card["Incorrect"], card["Unverifiable"], card["keys_not_true"]) == (2, 2, 1, 2)
    # wrong marks among the mutants: ok B, C (flagged); drift B (flagged; C is true); bad B (Valid), C (flagged); open A
    # (left open); certified none (A is true)
    assert (card["wrong_mutants"], card["wrong_mutants_flagged"]) == (6, 4)
    assert card["derived_true"] == {"right": 0, "wrong": 0}  # no derived option listed in these rows


def test_none_of_the_above_proven_true_is_scored_right_or_wrong(bench) -> None:
    rows = [
        {**row("a", "E", "Valid", {"A": "false", "E": "true"}, {"A": "Incorrect"}), "derived": ["E"]},
        {**row("b", "A", "Incorrect", {"A": "false", "E": "true"}, {"E": "Valid"}), "derived": ["E"]},
    ]
    card = bench.score(rows, {"a": {"E"}, "b": {"A"}})
    assert card["derived_true"] == {"right": 1, "wrong": 1} and card["errors"]["false_valid_mutant"] == ["b:E"]


def test_an_ambiguous_verdict_naming_a_distractor_that_is_not_true_is_false(bench) -> None:
    results = [row("q", "A", "Ambiguous", {"A": "true", "B": "true"}, {"B": "Ambiguous"})]
    assert bench.score(results, {"q": {"A"}})["errors"]["false_ambiguous"] == ["q"]
    assert bench.score(results, {"q": {"A", "B"}})["errors"]["false_ambiguous"] == []


def test_a_question_missing_from_the_truth_is_an_error(bench) -> None:
    with pytest.raises(ValueError, match="no entry for"):
        bench.score([row("q", "A", "Valid", {"A": "true"}, {})], {})
