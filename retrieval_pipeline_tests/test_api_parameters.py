"""The API refuses parameters it cannot honour, naming them, and warns on runs that score 0 for nothing (issue 39)."""

from __future__ import annotations

import warnings

import pytest

from retrieval_pipeline import EmptyRunWarning, NoSharedQueryWarning, RunQrelsWarning, compare, evaluate
from retrieval_pipeline.core.evaluation.metrics.names import MAX_CUTOFF, parse_metric

QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
RUN = {"q1": {"d1": 1.0, "d9": 0.5}, "q2": {"d9": 1.0, "d2": 0.5}, "q3": {"d3": 1.0}}


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"alpha": 7}, "alpha must be a number strictly between 0 and 1, got 7"),
        ({"alpha": -1}, "alpha must be a number strictly between 0 and 1, got -1"),
        ({"alpha": 0}, "alpha must be"),
        ({"alpha": float("nan")}, "alpha must be"),
        ({"confidence": 1.5}, "confidence must be a number strictly between 0 and 1"),
        ({"seed": "x"}, "seed must be an integer, got 'x' (str)"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"n_permutations": 10**10}, "n_permutations must be an integer from 1 to 1,000,000, got 10000000000"),
        ({"n_permutations": 0}, "n_permutations must be an integer from 1"),
        ({"n_bootstrap": -3}, "n_bootstrap must be an integer from 1"),
        ({"n_bootstrap": True}, "n_bootstrap must be an integer"),
    ],
)
def test_compare_refuses_parameters_out_of_range_naming_them(parameters: dict, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        compare(QRELS, {"a": RUN, "b": dict(RUN)}, ["map"], **parameters)


def test_identical_runs_are_never_significant_at_a_valid_alpha() -> None:
    result = compare(QRELS, {"a": RUN, "b": dict(RUN)}, ["map"], alpha=0.99, n_permutations=200, n_bootstrap=50)
    assert not any(p.significant for p in result.pairs)


@pytest.mark.parametrize("name", ["ndcg@99999999999999999999", f"ndcg@{MAX_CUTOFF + 1}", "P." + "9" * 5000])
def test_a_huge_cut_off_names_the_metric_and_the_limit(name: str) -> None:
    with pytest.raises(ValueError, match=f"the cut-off .* is over the limit of {MAX_CUTOFF:,}") as caught:
        evaluate(QRELS, RUN, [name])
    assert repr(name[:20])[:-1] in str(caught.value) and len(str(caught.value)) < 200


def test_the_largest_cut_off_is_accepted() -> None:
    assert parse_metric(f"recall@{MAX_CUTOFF}").k == MAX_CUTOFF


@pytest.mark.parametrize(
    ("run", "category", "words"),
    [
        ({}, EmptyRunWarning, "the run is empty"),
        ({"q1": {}, "q2": []}, EmptyRunWarning, "the run is empty"),
        ({"x1": {"d1": 1.0}}, NoSharedQueryWarning, "the run shares no query id with the qrels"),
    ],
)
def test_evaluate_warns_on_a_run_that_scores_zero_for_nothing(run: dict, category: type, words: str) -> None:
    with pytest.warns(category, match=words) as record:
        result = evaluate(QRELS, run, ["map"])
    assert result["map"] == 0.0 and issubclass(category, RunQrelsWarning)
    assert record[0].filename == __file__  # the warning points at the caller's line


def test_compare_warns_naming_the_run() -> None:
    with pytest.warns(NoSharedQueryWarning, match="run 'other' shares no query id"):
        compare(QRELS, {"a": RUN, "other": {"zz": {"d1": 1.0}}}, ["map"], n_permutations=100, n_bootstrap=20)


def test_a_run_sharing_queries_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunQrelsWarning)
        evaluate(QRELS, {"q1": {"d1": 1.0}}, ["map"])  # one shared query is enough
