"""Tests for similarity-based relevance: settings, normalisation, the exact fast path, qrels and the ceiling."""

from __future__ import annotations

import dataclasses
import random
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from retrieval_pipeline.core.chunking import chunk_markdown
from retrieval_pipeline.core.similarity import (
    SimilaritySettings,
    lcs_length,
    normalise_text,
    qrels_from_similarity,
    relevance,
    relevance_ceiling,
    similarity,
    similarity_of,
    similarity_rows,
)
from retrieval_pipeline.core.sources.context_qa import load_context_qa, load_documents, pydoc_topic_documents
from retrieval_pipeline.core.types import Document

RAW = SimilaritySettings(normalise=False)


def chunk(doc_id: str, text: str) -> Document:
    return Document(doc_id=doc_id, text=text, kind="chunk")


# --------------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------------


def test_settings_defaults_and_record() -> None:
    settings = SimilaritySettings()
    assert settings.as_dict() == {"threshold": 0.5, "autojunk": False, "normalise": True, "method": "difflib"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.threshold = 0.7  # type: ignore[misc]


@pytest.mark.parametrize("kwargs", [{"threshold": 1.5}, {"threshold": -0.1}, {"method": "rapidfuzz"}])
def test_settings_reject_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SimilaritySettings(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Normalisation and similarity
# --------------------------------------------------------------------------------------------------


def test_normalise_strips_markdown_and_folds_case_and_whitespace() -> None:
    text = "#### **3.1. Fire Damage**  \n- **Structural Damage**:  \n  Coverage for [repairs](http://x.y).\n\n---\n> quoted `code`"
    assert normalise_text(text) == "3.1. fire damage structural damage: coverage for repairs. quoted code"


def test_normalise_keeps_identifiers_and_maps_typographic_quotes() -> None:
    assert normalise_text("The  Insurer’s “__debug__” — flag") == 'the insurer\'s "__debug__" - flag'


def test_normalise_is_idempotent() -> None:
    text = "### A *b* c\n\n* item one\n* item two\n\n1. first"
    once = normalise_text(text)
    assert normalise_text(once) == once
    assert once == "a b c item one item two 1. first"


def test_normalisation_makes_markdown_and_plain_text_equal() -> None:
    markdown, plain = "- **Collision Coverage**:\n  Reimbursement for repair", "Collision Coverage: Reimbursement for repair"
    assert similarity(plain, markdown) == 1.0
    assert similarity(plain, markdown, RAW) < 1.0


def test_similarity_is_difflib_ratio() -> None:
    assert similarity("abcd", "abxy", RAW) == SequenceMatcher(None, "abcd", "abxy", autojunk=False).ratio() == 0.5
    assert similarity("", "", RAW) == 1.0
    assert similarity_of("abcd", chunk("c", "ABCD")) == 1.0


def test_autojunk_flips_a_judgement() -> None:
    """In a 200+ character chunk every digit is 'popular', so autojunk leaves no anchor for the match."""
    context = " ".join(str(age) for age in range(10, 40))
    table = " ".join(str(age) for age in range(40, 80)) + " " + context
    plain = similarity(context, table, SimilaritySettings(autojunk=False))
    junked = similarity(context, table, SimilaritySettings(autojunk=True))
    assert plain >= 0.5 > junked
    assert qrels_from_similarity({"q": {"t": plain}}, 0.5) != qrels_from_similarity({"q": {"t": junked}}, 0.5)


def test_long_chunk_cannot_reach_half_against_a_short_context() -> None:
    context = "the deductible applies per incident"
    long_chunk = context + " " + "x" * (3 * len(context))
    assert similarity(context, long_chunk) < 0.5  # 2c / (c + n) < 0.5 once n > 3c


# --------------------------------------------------------------------------------------------------
# Fast path == brute force
# --------------------------------------------------------------------------------------------------


def random_text(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


@pytest.mark.parametrize("seed", range(6))
def test_lcs_length_matches_dynamic_programming_and_bounds_difflib(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(30):
        a, b = random_text(rng, "abc d", 0, 40), random_text(rng, "abc d", 0, 40)
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
        assert lcs_length(a, b) == table[-1][-1]
        for autojunk in (False, True):
            matched = sum(block.size for block in SequenceMatcher(None, a, b, autojunk=autojunk).get_matching_blocks())
            assert matched <= lcs_length(a, b)


def assert_fast_equals_brute(expected: dict[str, str], chunks: list[Document], settings: SimilaritySettings) -> None:
    fast = similarity_rows(expected, chunks, settings)
    brute = similarity_rows(expected, chunks, settings, exhaustive=True)
    assert qrels_from_similarity(fast, settings.threshold) == qrels_from_similarity(brute, settings.threshold)
    assert relevance_ceiling(fast, settings.threshold) == relevance_ceiling(brute, settings.threshold)
    for query_id, row in fast.items():
        assert all(brute[query_id][doc_id] == ratio for doc_id, ratio in row.items())  # stored values are exact
        assert set(brute[query_id]) == {c.doc_id for c in chunks}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("autojunk", [False, True])
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_fast_path_equals_brute_force_on_random_strings(seed: int, autojunk: bool, threshold: float) -> None:
    rng = random.Random(seed)
    base = random_text(rng, "abcdefgh ", 150, 300)
    chunks = [chunk(f"c{i}", random_text(rng, "abcdefgh ", 20, 400)) for i in range(25)]
    chunks += [chunk(f"s{i}", base[i * 20 : i * 20 + rng.randint(40, 260)]) for i in range(6)]  # near the threshold
    expected = {f"q{i}": base[i * 15 : i * 15 + rng.randint(30, 200)] for i in range(8)}
    expected["empty"] = ""
    assert_fast_equals_brute(expected, chunks, SimilaritySettings(threshold=threshold, autojunk=autojunk))


def test_relevance_is_one_row_of_similarity_rows() -> None:
    chunks = [chunk("a", "abcd"), chunk("b", "wxyz"), chunk("c", "abxy")]
    assert relevance("abcd", chunks, RAW) == {"a": 1.0, "c": 0.5}
    assert relevance("abcd", chunks, RAW, exhaustive=True) == {"a": 1.0, "b": 0.0, "c": 0.5}


# --------------------------------------------------------------------------------------------------
# Qrels and ceiling
# --------------------------------------------------------------------------------------------------


def test_qrels_grade_one_at_or_above_threshold_and_keep_unmatched_queries() -> None:
    rows = {"q1": {"a": 0.5, "b": 0.49, "c": 0.9}, "q2": {"a": 0.2}, "q3": {}}
    assert qrels_from_similarity(rows, 0.5) == {"q1": {"a": 1, "c": 1}, "q2": {}, "q3": {}}


def test_relevance_ceiling_is_share_of_queries_with_any_chunk_over_threshold() -> None:
    rows = {"q1": {"a": 0.5}, "q2": {"a": 0.2}, "q3": {}, "q4": {"a": 0.1, "b": 0.8}}
    assert relevance_ceiling(rows, 0.5) == 0.5
    assert relevance_ceiling(rows, 0.9) == 0.0
    with pytest.raises(ValueError, match="empty"):
        relevance_ceiling({}, 0.5)


# --------------------------------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------------------------------


def insurance(shared_data: Path, size: int, overlap: int) -> tuple[dict[str, str], list[Document]]:
    folder = shared_data / "insurance"
    loaded = load_context_qa(folder / "filtered_qa_pairs.json")
    expected = {case.case_id: case.extra["expected_context"] for case in loaded.cases}
    documents = load_documents(sorted((folder / "documents").glob("*.md")))
    return expected, [c for doc_id, text in documents for c in chunk_markdown(doc_id, text, size, overlap)]


@pytest.mark.integration
@pytest.mark.parametrize("autojunk", [False, True])
def test_fast_path_equals_brute_force_on_insurance_data(shared_data: Path, autojunk: bool) -> None:
    expected, chunks = insurance(shared_data, 800, 100)
    assert_fast_equals_brute(expected, chunks, SimilaritySettings(autojunk=autojunk))


@pytest.mark.integration
def test_autojunk_changes_judgements_on_insurance_data(shared_data: Path) -> None:
    expected, chunks = insurance(shared_data, 800, 100)
    plain = similarity_rows(expected, chunks, SimilaritySettings(autojunk=False))
    junked = similarity_rows(expected, chunks, SimilaritySettings(autojunk=True))
    assert qrels_from_similarity(plain, 0.5) != qrels_from_similarity(junked, 0.5)
    assert 0.5 < relevance_ceiling(junked, 0.5) < 1.0 and 0.5 < relevance_ceiling(plain, 0.5) < 1.0


def test_embedded_sample_contexts_are_found_in_their_own_topic() -> None:
    """The project's sample over pydoc topics: most contexts reach 0.5, always in the topic they came from."""
    sample = Path(__file__).resolve().parents[2] / "data" / "samples" / "context_qa" / "qa_pairs.json"
    cases = load_context_qa(sample).cases
    topics = sorted({case.extra["source_document"] for case in cases})
    chunks = [c for topic, text in pydoc_topic_documents(topics) for c in chunk_markdown(topic, text, 400, 100)]
    rows = similarity_rows({case.case_id: case.extra["expected_context"] for case in cases}, chunks)
    qrels = qrels_from_similarity(rows, 0.5)
    assert relevance_ceiling(rows, 0.5) >= 0.85
    source = {case.case_id: case.extra["source_document"] for case in cases}
    assert all(doc_id.split("#")[0] == source[query_id] for query_id, docs in qrels.items() for doc_id in docs)
