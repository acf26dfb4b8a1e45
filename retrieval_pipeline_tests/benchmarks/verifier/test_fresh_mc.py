"""The fresh multiple-choice suites (the design sets ``benchmarks/fresh_mc`` to ``benchmarks/fresh_mc6`` and
``benchmarks/fresh_mc8``; ``benchmarks/fresh_mc7`` and ``benchmarks/fresh_mc9``, scored while held out, counts only,
never looked at) load cleanly and every question has its truth recorded.

No library run here: ``benchmarks/fresh_mc/check_truth.py --root <set>`` re-establishes the truth in the google-adk
venvs, with the one ``evidence_helpers.py`` beside it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from retrieval_pipeline.core.datasets.suite.loading import load_suites
from retrieval_pipeline.core.datasets.suite.reader import SNIPPET_KEY

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
#: Files root (a folder of ``benchmarks/``) -> its suites: configure (no snippets), diagnose, predict.
SETS = {
    "fresh_mc": ("configure_fresh_mc", "diagnose_fresh_mc", "predict_fresh_mc"),
    "fresh_mc2": ("configure_fresh2_mc", "diagnose_fresh2_mc", "predict_fresh2_mc"),
    "fresh_mc3": ("configure_fresh3_mc", "diagnose_fresh3_mc", "predict_fresh3_mc"),
    "fresh_mc4": ("configure_fresh4_mc", "diagnose_fresh4_mc", "predict_fresh4_mc"),
    "fresh_mc5": ("configure_fresh5_mc", "diagnose_fresh5_mc", "predict_fresh5_mc"),
    "fresh_mc6": ("configure_fresh6_mc", "diagnose_fresh6_mc", "predict_fresh6_mc"),
    "fresh_mc7": ("configure_fresh7_mc", "diagnose_fresh7_mc", "predict_fresh7_mc"),
    "fresh_mc8": ("configure_fresh8_mc", "diagnose_fresh8_mc", "predict_fresh8_mc"),
    "fresh_mc9": ("configure_fresh9_mc", "diagnose_fresh9_mc", "predict_fresh9_mc"),
}
DEV_SUITES = ("configure_adk_features_mc", "diagnose_setup_errors_mc", "predict_runtime_behavior_mc")
VERSIONS = ("2.13", "1.20")
NONE_OF_THE_ABOVE = "none of the above"


def _load(root: str):
    return load_suites(
        [BENCHMARKS / root / "benchmark_definitions" / suite / "benchmark.yaml" for suite in SETS[root]],
        files_root=BENCHMARKS / root,
    )


@pytest.fixture(scope="module", params=sorted(SETS))
def root(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def loaded(root):
    return _load(root)


@pytest.fixture(scope="module")
def truth(root) -> dict:
    return yaml.safe_load((BENCHMARKS / root / "truth.yaml").read_text(encoding="utf-8"))


def test_the_three_suites_load_without_rejects(root, loaded) -> None:
    assert loaded.rejects == []
    assert len(loaded.cases) == loaded.total
    by_suite = {suite: sum(case.case_id.startswith(f"{suite}:") for case in loaded.cases) for suite in SETS[root]}
    assert all(count > 0 for count in by_suite.values()), by_suite


def test_every_snippet_question_gets_its_section(root, loaded) -> None:
    """Diagnose and predict questions carry a snippet (the section was found between its markers); configure ones none."""
    configure = SETS[root][0]
    for case in loaded.cases:
        has_snippet = bool(case.extra.get(SNIPPET_KEY, "").strip())
        assert has_snippet == (not case.case_id.startswith(f"{configure}:")), case.case_id


@pytest.mark.integration
def test_ids_and_question_texts_are_unique_across_dev_and_every_fresh_set(shared_data: Path) -> None:
    dev = load_suites([shared_data / "adk" / "benchmark_definitions" / suite / "benchmark.yaml" for suite in DEV_SUITES])
    assert len(dev.cases) > 50
    sets = {"dev": dev.cases} | {root: _load(root).cases for root in sorted(SETS)}
    ids = [case.case_id for cases in sets.values() for case in cases]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    # nor the same question text in two of the sets (generic texts like "What does this code print?" may recur
    # within one set)
    texts = {name: {case.query for case in cases} for name, cases in sets.items()}
    for first, second in itertools.combinations(sorted(texts), 2):
        assert not texts[first] & texts[second], (first, second, sorted(texts[first] & texts[second]))


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


def test_check_truth_knows_the_same_questions(root, loaded, load_benchmark: Callable[[str], ModuleType]) -> None:
    check_truth = load_benchmark("fresh_mc/check_truth.py")  # one checker for every set: --root picks the set
    fresh = check_truth.FreshSet(BENCHMARKS / root)
    assert fresh.suites == tuple(SETS[root]) and all(d.is_dir() for d in fresh.import_dirs)
    # the helpers of every set (one module), then the diagnose and predict code
    assert fresh.import_dirs[0] == BENCHMARKS / "fresh_mc" and len(fresh.import_dirs) == 3
    assert (fresh.import_dirs[0] / "evidence_helpers.py").is_file()
    assert root == "fresh_mc" or not (BENCHMARKS / root / "evidence_helpers.py").exists()  # no second copy to drift
    keys = check_truth.suite_keys(fresh)
    assert keys == {case.case_id: case.correct_answer for case in loaded.cases}
