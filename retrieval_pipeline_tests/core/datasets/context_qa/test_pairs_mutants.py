"""Context-QA golds, against the mutants ``benchmarks/mutation.py`` found alive in the context-QA qrels path
(:class:`retrieval_pipeline.core.datasets.context_qa.pairs.ContextMatcher`, the adapter's settings and pair builder,
and :func:`retrieval_pipeline.core.datasets.context_qa.similarity.relevance`).

Ratios are worked out by hand from ``ratio = 2 M / (la + lb)`` on texts that normalisation leaves alone
(lowercase words, single spaces), and checked against :class:`difflib.SequenceMatcher` itself.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.cache.result_cache import using_result_cache
from retrieval_pipeline.core.common.types import Case, Document, QAPair
from retrieval_pipeline.core.datasets.context_qa.adapter import ContextQAAdapter, SimilaritySettingsModel
from retrieval_pipeline.core.datasets.context_qa.pairs import ContextMatch, ContextMatcher
from retrieval_pipeline.core.datasets.context_qa.similarity import SimilaritySettings, relevance
from retrieval_pipeline.core.registry import DatasetConfig

SETTINGS = SimilaritySettings(threshold=0.5)


def _exactly(message: str) -> str:
    return "^" + re.escape(message) + "$"


CHUNKS = [Document("c1", "the cat sat"), Document("c2", "a dog ran far")]


def _case(expected: str) -> Case:
    return Case("qa_0006", "qa", "context_qa", "data/qa.json", 6, "where did it sit?", extra={"expected_context": expected})


def test_a_matching_context_gives_the_whole_pair():
    pair = ContextMatcher(CHUNKS, SETTINGS).pair(_case("the cat sat"))
    assert pair == QAPair(
        "qa_0006",
        "qa",
        "context_qa",
        "data/qa.json",
        "where did it sit?",
        ["c1"],
        "resolved",
        "similarity>=0.5",
        {"similarity": SETTINGS.as_dict(), "matches": [{"chunk": "c1", "ratio": 1.0}]},
        [],
    )


def test_an_unmatched_context_names_the_file_row_and_best_ratio():
    """Expected "dog": against "a dog ran far" M = 3, ratio 6 / 16 = 0.375; "the cat sat" has none of its
    letters (ratio 0); so the best chunk is c2, below the threshold 0.5."""
    expected = "dog"
    ratio = SequenceMatcher(None, expected, "a dog ran far", autojunk=False).ratio()
    assert ratio == 6 / 16
    pair = ContextMatcher(CHUNKS, SETTINGS).pair(_case(expected))
    assert (pair.gold_doc_ids, pair.status, pair.method) == ([], "unresolved", "similarity>=0.5")
    assert pair.evidence == {"similarity": SETTINGS.as_dict(), "matches": [], "best": {"chunk": "c2", "ratio": 0.375}}
    assert pair.warnings == [
        "data/qa.json row 7 (qa_0006): the expected context matches no chunk at threshold 0.5 (best ratio 0.375 in c2)"
    ]


def test_best_ratio_is_rounded_to_four_places_in_the_evidence():
    """Expected "ca" against "the cat sat" (11 characters): M = 2, ratio 4 / 13 = 0.307692..."""
    pair = ContextMatcher(CHUNKS, SETTINGS).pair(_case("ca"))
    assert SequenceMatcher(None, "ca", "the cat sat", autojunk=False).ratio() == 4 / 13
    assert pair.evidence["best"] == {"chunk": "c1", "ratio": 0.3077}
    assert pair.warnings[0].endswith("(best ratio 0.308 in c1)")


def test_the_settings_block_passes_every_setting_on():
    assert SimilaritySettingsModel(threshold=0.7, autojunk=True, normalise=False).settings() == SimilaritySettings(0.7, True, False)


def test_the_adapter_matches_with_the_configured_settings_and_the_active_cache(tmp_path: Path):
    config = DatasetConfig(
        name="c",
        kind="context_qa",
        context_qa={"qa": "qa.json", "documents": ["a.md"], "similarity": {"threshold": 0.3, "normalise": False}},
    )
    adapter = ContextQAAdapter()
    with using_result_cache(tmp_path) as cache:
        builder = adapter.pair_builder(config, CHUNKS)
        assert builder.__self__.cache is cache
        pair = builder(_case("dog"))  # 0.375 >= 0.3
    assert pair.gold_doc_ids == ["c2"] and pair.method == "similarity>=0.3"
    assert pair.evidence["similarity"] == SimilaritySettings(0.3, False, False).as_dict()
    assert adapter.pair_builder(config, CHUNKS).__self__.cache is None  # no active cache outside the block


def test_relevance_uses_the_given_settings():
    raw = SimilaritySettings(threshold=0.0, normalise=False)
    row = relevance("The Cat", [Document("c1", "the cat")], raw, exhaustive=True)
    assert row == {"c1": SequenceMatcher(None, "The Cat", "the cat", autojunk=False).ratio()}  # 10 / 14: case counts
    assert row["c1"] == 10 / 14
    assert relevance("The Cat", [Document("c1", "the cat")], SimilaritySettings(threshold=0.0), exhaustive=True) == {"c1": 1.0}


def test_matches_are_ordered_by_ratio_then_id_and_rounded():
    """Expected "the cat sat": "z1" equal (ratio 1), "a1" = "the cat sat down" (M = 11, ratio 22 / 27 = 0.8148...)."""
    matcher = ContextMatcher([Document("a1", "the cat sat down"), Document("z1", "the cat sat")], SETTINGS)
    pair = matcher.pair(_case("the cat sat"))
    assert pair.gold_doc_ids == ["z1", "a1"]
    assert pair.evidence["matches"] == [{"chunk": "z1", "ratio": 1.0}, {"chunk": "a1", "ratio": 0.8148}]
    assert (matcher.misses, matcher.hits) == (1, 0)
    matcher.pair(_case("dog"))
    matcher.pair(_case("dog"))
    assert (matcher.misses, matcher.hits) == (3, 0)  # no cache: every match is computed


def test_a_case_without_an_expected_context_matches_nothing():
    """The missing context is empty, not the text "None": chunks that "none" or "xxxx" would match stay unmatched."""
    case = Case("qa_0001", "qa", "context_qa", "data/qa.json", 1, "?", extra={})
    pair = ContextMatcher([Document("n", "none"), Document("x", "xxxx")], SETTINGS).pair(case)
    assert (pair.gold_doc_ids, pair.status, pair.evidence["matches"]) == ([], "unresolved", [])


def test_stored_matches_are_read_back_only_when_well_formed():
    assert ContextMatch.from_json({"matches": [["c1", 0.5]], "best": None}) == ContextMatch((("c1", 0.5),), None)
    assert ContextMatch.from_json({"matches": [], "best": [None, 0.0]}) == ContextMatch((), (None, 0.0))  # an empty corpus
    with pytest.raises(TypeError, match=_exactly("doc id must be a string, got NoneType")):
        ContextMatch.from_json({"matches": [[None, 0.5]], "best": None})
    with pytest.raises(TypeError, match=_exactly("doc id must be a string, got int")):
        ContextMatch.from_json({"matches": [], "best": [5, 0.1]})
    with pytest.raises(ValueError, match=_exactly("ratio must be a number in [0, 1], got True")):
        ContextMatch.from_json({"matches": [["c1", True]], "best": None})
    with pytest.raises(ValueError, match=_exactly("a match has either matched chunks or a best chunk, not both or neither")):
        ContextMatch.from_json({"matches": [], "best": None})


def test_equal_ratios_are_ordered_by_doc_id_not_corpus_order():
    matcher = ContextMatcher([Document("z", "the cat sat"), Document("a", "the cat sat")], SETTINGS)
    assert matcher.pair(_case("the cat sat")).gold_doc_ids == ["a", "z"]
