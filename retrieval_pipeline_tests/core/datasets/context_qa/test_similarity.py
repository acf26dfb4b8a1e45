"""Tests for similarity-based relevance: settings, normalisation, the exact fast path, qrels and the ceiling."""

from __future__ import annotations

import dataclasses
import random
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.result_cache import ResultCache
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets.context_qa import similarity as similarity_module
from retrieval_pipeline.core.datasets.context_qa.chunking import chunk_markdown
from retrieval_pipeline.core.datasets.context_qa.documents import load_documents, pydoc_topic_documents
from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa
from retrieval_pipeline.core.datasets.context_qa.similarity import (
    SIMILARITY_NAMESPACE,
    SimilarityIndex,
    SimilaritySettings,
    cached_similarities,
    lcs_length,
    normalise_text,
    qrels_from_similarity,
    relevance,
    relevance_ceiling,
    similarity,
    similarity_key,
    similarity_of,
    similarity_rows,
)

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
# Remembered and cached similarities
# --------------------------------------------------------------------------------------------------


def test_remembered_similarity_is_still_the_settings_own_ratio() -> None:
    """The process memo is keyed by the settings that matter: a value under one never answers for another."""
    context = " ".join(str(age) for age in range(10, 40))
    table = " ".join(str(age) for age in range(40, 80)) + " " + context
    for _ in range(2):  # second round from the memo
        for autojunk in (False, True):
            for normalise in (False, True):
                settings = SimilaritySettings(autojunk=autojunk, normalise=normalise)
                a, b = (normalise_text(context), normalise_text(table)) if normalise else (context, table)
                assert similarity(context, table, settings) == SequenceMatcher(None, a, b, autojunk=autojunk).ratio()


def test_cached_similarities_store_once_and_read_back_exact_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [("abcd", "abxy"), ("abcd", "wxyz"), ("abcd", "abxy"), ("the insurer pays", "The Insurer pays!")]
    with ResultCache(tmp_path / "r.sqlite") as cache:
        assert cached_similarities(pairs, RAW, cache) == (0, 3)  # distinct pairs
        monkeypatch.setattr(similarity_module, "_MEMO", {})  # a new process: only the file remembers
        assert cached_similarities(pairs, RAW, cache) == (3, 0)
        assert similarity_module._MEMO[("abcd", "abxy", False, False)] == 0.5  # 2 * 2 / 8, by hand
        assert all(similarity(a, b, RAW) == SequenceMatcher(None, a, b, autojunk=False).ratio() for a, b in pairs)
        assert cached_similarities(pairs, SimilaritySettings(), cache) == (0, 3)  # other settings: other keys
        assert cached_similarities(pairs, SimilaritySettings(threshold=0.9), cache) == (3, 0)  # the threshold plays no part


def test_a_corrupt_cached_similarity_is_recomputed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ResultCache(tmp_path / "r.sqlite") as cache:
        cache.put(SIMILARITY_NAMESPACE, similarity_key("abcd", "abxy", RAW), 1.5)  # impossible ratio, sound checksum
        monkeypatch.setattr(similarity_module, "_MEMO", {})
        with pytest.warns(CorruptFileWarning, match="number in"):
            assert cached_similarities([("abcd", "abxy")], RAW, cache) == (0, 1)
        assert similarity("abcd", "abxy", RAW) == 0.5
        assert cache.get(SIMILARITY_NAMESPACE, similarity_key("abcd", "abxy", RAW)) == (0.5,)


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
        assert lcs_length(a, b) == dp_lcs(a, b)
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
# SimilarityIndex: packed LCS bounds and the exact best match
# --------------------------------------------------------------------------------------------------


def dp_lcs(a: str, b: str) -> int:
    """Textbook O(len(a) * len(b)) dynamic programme: the reference for every LCS here."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block", [1, 3, 256])
def test_packed_bounds_equal_two_lcs_over_total_per_chunk(monkeypatch: pytest.MonkeyPatch, seed: int, block: int) -> None:
    """All chunks' LCS at once (several blocks, empty chunks, non-ASCII and astral characters) == the DP, pair by pair."""
    monkeypatch.setattr(similarity_module, "PACKED_BLOCK_CHUNKS", block)
    rng = random.Random(seed)
    alphabet = "ab cé中😀"
    texts = [random_text(rng, alphabet, 0, 70) for _ in range(9)] + ["", "x" * 65]
    index = SimilarityIndex([chunk(f"c{i}", t) for i, t in enumerate(texts)], RAW)
    for expected in [random_text(rng, alphabet, 0, 60) for _ in range(5)] + ["", "zzz"]:
        bounds = index.upper_bounds(expected)
        wanted = [2.0 * dp_lcs(expected, t) / (len(expected) + len(t)) if expected or t else 1.0 for t in texts]
        assert bounds.tolist() == wanted
        assert all(bound >= similarity(expected, t, RAW) for bound, t in zip(bounds, texts, strict=True))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("autojunk", [False, True])
def test_best_equals_brute_force_max_with_ties_to_largest_id(seed: int, autojunk: bool) -> None:
    rng = random.Random(seed)
    settings = SimilaritySettings(autojunk=autojunk)
    texts = [random_text(rng, "abcde fg", 10, 260) for _ in range(20)]
    chunks = [chunk(f"c{i:02d}", t) for i, t in enumerate(texts)] + [chunk("z-copy", texts[3]), chunk("a-copy", texts[3])]
    index = SimilarityIndex(chunks, settings)
    for expected in [random_text(rng, "abcde fg", 5, 200) for _ in range(6)] + [texts[3]]:
        ratio, doc_id = max((similarity(expected, c.text, settings), c.doc_id) for c in chunks)
        assert index.best(expected) == (doc_id, ratio)
    assert index.best(texts[3]) == ("z-copy", 1.0)  # c03, z-copy and a-copy tie at 1.0: the largest id wins
    assert SimilarityIndex([], settings).best("anything") == (None, 0.0)


def test_index_prepares_nothing_until_used_and_rows_match_relevance() -> None:
    chunks = [chunk("a", "abcd"), chunk("b", "wxyz"), chunk("c", "abxy")]
    index = SimilarityIndex(chunks, RAW)
    assert index._texts is None  # a cache hit never pays for preparation
    assert index.row("abcd") == relevance("abcd", chunks, RAW) == {"a": 1.0, "c": 0.5}  # by hand: 2*4/8, 2*2/8
    assert index.row("abcd", exhaustive=True) == {"a": 1.0, "b": 0.0, "c": 0.5}


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
    sample = Path(__file__).resolve().parents[4] / "data" / "samples" / "context_qa" / "qa_pairs.json"
    cases = load_context_qa(sample).cases
    topics = sorted({case.extra["source_document"] for case in cases})
    chunks = [c for topic, text in pydoc_topic_documents(topics) for c in chunk_markdown(topic, text, 400, 100)]
    rows = similarity_rows({case.case_id: case.extra["expected_context"] for case in cases}, chunks)
    qrels = qrels_from_similarity(rows, 0.5)
    assert relevance_ceiling(rows, 0.5) >= 0.85
    source = {case.case_id: case.extra["source_document"] for case in cases}
    assert all(doc_id.split("#")[0] == source[query_id] for query_id, docs in qrels.items() for doc_id in docs)
