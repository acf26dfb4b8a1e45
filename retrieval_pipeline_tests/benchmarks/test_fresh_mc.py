"""The fresh multiple-choice suites (``benchmarks/fresh_mc``) load cleanly and every question has its truth recorded.

No library run here: ``benchmarks/fresh_mc/check_truth.py`` re-establishes the truth in the google-adk venvs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from retrieval_pipeline.core.datasets.suite.loading import load_suites
from retrieval_pipeline.core.datasets.suite.reader import SNIPPET_KEY

FRESH = Path(__file__).resolve().parents[2] / "benchmarks" / "fresh_mc"
SUITES = ("configure_fresh_mc", "diagnose_fresh_mc", "predict_fresh_mc")
DEV_SUITES = ("configure_adk_features_mc", "diagnose_setup_errors_mc", "predict_runtime_behavior_mc")
VERSIONS = ("2.13", "1.20")
NONE_OF_THE_ABOVE = "none of the above"


@pytest.fixture(scope="module")
def loaded():
    return load_suites([FRESH / "benchmark_definitions" / suite / "benchmark.yaml" for suite in SUITES], files_root=FRESH)


@pytest.fixture(scope="module")
def truth() -> dict:
    return yaml.safe_load((FRESH / "truth.yaml").read_text(encoding="utf-8"))


def test_the_three_suites_load_without_rejects(loaded) -> None:
    assert loaded.rejects == []
    assert len(loaded.cases) == loaded.total
    by_suite = {suite: sum(case.case_id.startswith(f"{suite}:") for case in loaded.cases) for suite in SUITES}
    assert all(count > 0 for count in by_suite.values()), by_suite


def test_every_snippet_question_gets_its_section(loaded) -> None:
    """Diagnose and predict questions carry a snippet (the section was found between its markers); configure ones none."""
    for case in loaded.cases:
        has_snippet = bool(case.extra.get(SNIPPET_KEY, "").strip())
        assert has_snippet == (not case.case_id.startswith("configure_fresh_mc:")), case.case_id


@pytest.mark.integration
def test_ids_are_unique_and_none_is_a_dev_id(loaded, shared_data: Path) -> None:
    ids = [case.case_id for case in loaded.cases]
    assert len(ids) == len(set(ids))
    dev = load_suites([shared_data / "adk" / "benchmark_definitions" / suite / "benchmark.yaml" for suite in DEV_SUITES])
    dev_ids = {case.case_id for case in dev.cases}
    assert len(dev_ids) > 50
    assert not set(ids) & dev_ids
    # nor the same question text under another id
    assert not {case.query for case in loaded.cases} & {case.query for case in dev.cases if case.case_id in dev_ids}


def test_every_question_has_a_truth_for_both_versions_and_the_key_is_true_on_2_13(loaded, truth) -> None:
    assert set(truth) == {case.case_id for case in loaded.cases}
    for case in loaded.cases:
        entry = truth[case.case_id]
        assert set(entry["truth"]) == set(VERSIONS), case.case_id
        assert case.correct_answer in entry["truth"]["2.13"], case.case_id
        assert entry["evidence"]["code"].strip() and entry["evidence"]["reasoning"].strip(), case.case_id
        assert set(entry["evidence"]["printed"]) == set(VERSIONS), case.case_id


def test_truth_letters_are_options_and_none_of_the_above_excludes_the_rest(loaded, truth) -> None:
    for case in loaded.cases:
        nota = {letter for letter, text in case.options.items() if str(text).strip().lower() == NONE_OF_THE_ABOVE}
        for version in VERSIONS:
            letters = set(truth[case.case_id]["truth"][version])
            assert letters and letters <= set(case.options), (case.case_id, version)
            if letters & nota:
                assert letters == nota, (case.case_id, version, "None of the above is true only when no other option is")


def test_check_truth_knows_the_same_questions(loaded, load_benchmark: Callable[[str], ModuleType]) -> None:
    check_truth = load_benchmark("fresh_mc/check_truth.py")
    keys = check_truth.suite_keys()
    assert keys == {case.case_id: case.correct_answer for case in loaded.cases}
