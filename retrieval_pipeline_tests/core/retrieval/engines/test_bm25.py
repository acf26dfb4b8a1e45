"""BM25Retriever: exact parity with rank_bm25.BM25Okapi, ranking rules, persistence, edge cases."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.base import Retriever
from retrieval_pipeline.core.retrieval.engines.bm25 import okapi_bm25 as bm25_module
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever, top_k
from retrieval_pipeline.core.retrieval.engines.tokenize import tokenize

ATOL = 1e-9

API_DOCS = [
    "collections.OrderedDict: a dict subclass that remembers the order entries were added.",
    "collections.defaultdict: a dict subclass that calls a factory function to supply missing values.",
    "os.path.join(path, *paths): join one or more path components intelligently.",
    "os.path.exists(path): return True if path refers to an existing path or an open file descriptor.",
    "json.dumps(obj): serialize obj to a JSON formatted str.",
    "json.loads(s): deserialize s (a str, bytes or bytearray containing a JSON document) to a Python object.",
    "pathlib.Path.read_text(): return the decoded contents of the pointed-to file as a string.",
    "pathlib.Path.exists(): whether the path points to an existing file or directory.",
    "itertools.chain(*iterables): make an iterator that returns elements from the first iterable, then the next.",
    "functools.lru_cache(maxsize=128): decorator to wrap a function with a memoizing callable.",
    "re.compile(pattern, flags=0): compile a regular expression pattern into a regular expression object.",
    "http.server.HTTPServer: a simple HTTP server class that listens on a socket.",
]
API_QUERIES = [
    "how do I join path components",
    "OrderedDict remembers insertion order",
    "path path exists exists",  # repeated tokens count twice
    "serialize object to JSON string",
    "zzzunknown qqqmissing",  # only unknown tokens
    "dict json zzzunknown",  # known and unknown mixed
    "HTTPServer socket",
    "",  # empty query
]


def expected_hits(scores: np.ndarray, doc_ids: Sequence[str], k: int) -> list[str]:
    """Reference ranking: positive scores only, score descending, corpus position ascending."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [doc_ids[i] for i in order[:k] if scores[i] > 0]


def assert_parity(corpus_tokens: list[list[str]], queries_tokens: list[list[str]], k: int = 10) -> None:
    """Scores (every doc) and top-k (batched and single) equal rank_bm25's."""
    doc_ids = [f"d{i}" for i in range(len(corpus_tokens))]
    reference = BM25Okapi(corpus_tokens)
    ours = BM25Retriever.from_tokens(doc_ids, corpus_tokens)
    batched = ours.search_tokens(queries_tokens, k)
    for query, hits in zip(queries_tokens, batched):
        expected = reference.get_scores(query)
        np.testing.assert_allclose(ours.scores_tokens(query), expected, rtol=0, atol=ATOL)
        assert [doc_id for doc_id, _ in hits] == expected_hits(expected, doc_ids, k), query
        for doc_id, score in hits:
            assert score == pytest.approx(expected[doc_ids.index(doc_id)], abs=ATOL)
        assert ours.search_tokens([query], k) == [hits]  # the single-query path agrees exactly


def random_corpus(seed: int) -> tuple[list[list[str]], list[list[str]]]:
    """A random Zipf-ish corpus (small vocabulary: frequent terms, ties, empty docs) and queries."""
    rng = np.random.default_rng(seed)
    n_docs, vocab_size = int(rng.integers(1, 80)), int(rng.integers(2, 40))
    probabilities = 1.0 / np.arange(1, vocab_size + 1)
    probabilities /= probabilities.sum()
    corpus = [[f"t{i}" for i in rng.choice(vocab_size, size=int(rng.integers(0, 30)), p=probabilities)] for _ in range(n_docs)]
    if not any(corpus):
        corpus[0] = ["t0"]
    queries = [
        [f"t{i}" for i in rng.integers(0, vocab_size + 5, size=int(rng.integers(0, 7)))]  # some unknown, repeats
        for _ in range(8)
    ]
    return corpus, queries


@pytest.fixture(scope="module")
def api_index() -> BM25Retriever:
    return BM25Retriever.build([f"api{i}" for i in range(len(API_DOCS))], API_DOCS)


# ---------------------------------------------------------------------- parity with rank_bm25


def test_parity_on_api_corpus() -> None:
    assert_parity([tokenize(text) for text in API_DOCS], [tokenize(query) for query in API_QUERIES])


@pytest.mark.parametrize("seed", range(60))
def test_parity_on_random_corpora(seed: int) -> None:
    assert_parity(*random_corpus(seed))


def test_scores_are_bit_identical_to_rank_bm25() -> None:
    corpus, queries = random_corpus(7)
    reference = BM25Okapi(corpus)
    ours = BM25Retriever.from_tokens([str(i) for i in range(len(corpus))], corpus)
    for query in queries:
        assert np.array_equal(ours.scores_tokens(query), reference.get_scores(query))


def test_repeated_query_token_counts_twice() -> None:
    corpus = [["apple", "pie"], ["banana", "split"], ["cherry", "tart"], ["apple", "juice"], ["grape"]]
    ours = BM25Retriever.from_tokens(list("abcde"), corpus)
    once, twice = ours.scores_tokens(["apple"]), ours.scores_tokens(["apple", "apple"])
    assert twice == pytest.approx(2 * once)
    np.testing.assert_allclose(twice, BM25Okapi(corpus).get_scores(["apple", "apple"]), rtol=0, atol=ATOL)


def test_unknown_tokens_contribute_nothing(api_index: BM25Retriever) -> None:
    assert api_index.scores("json zzzunknown") == pytest.approx(api_index.scores("json"))
    assert api_index.search(["zzzunknown"], 5) == [[]]


def test_term_in_more_than_half_the_docs_gets_the_epsilon_floor() -> None:
    corpus = [["common", "x"], ["common", "y"], ["common", "z"], ["common"], ["w", "v"]]
    reference = BM25Okapi(corpus)
    assert reference.idf["common"] == pytest.approx(reference.epsilon * reference.average_idf)
    ours = BM25Retriever.from_tokens(list("abcde"), corpus)
    assert ours.params["average_idf"] == pytest.approx(reference.average_idf)
    np.testing.assert_allclose(ours.scores_tokens(["common"]), reference.get_scores(["common"]), rtol=0, atol=ATOL)
    assert [doc_id for doc_id, _ in ours.search(["common"], 10)[0]] == ["d", "a", "b", "c"]  # shortest doc first
    assert_parity(corpus, [["common"], ["common", "x"], ["common", "common", "w"]])


@pytest.mark.parametrize(
    "corpus",
    [
        [["a", "b"], ["c", "d"]],  # 2 docs, every term in one doc: idf = log(1.5) - log(1.5) = 0
        [["a", "b"], ["a", "c"]],  # "a" in both: negative idf, and a negative average -> negative floor
        [["a"], ["a"], ["b"]],  # 3 docs: "a" floored, "b" positive
        [["a", "a", "b"], ["b", "c"], ["c"]],
        [["only"]],  # one doc: its term's idf is negative, floored by a negative average
    ],
)
def test_tiny_corpora_match_rank_bm25_quirks(corpus: list[list[str]]) -> None:
    queries = [["a"], ["b"], ["c"], ["a", "b", "c"], ["a", "a"], ["only"], ["d"], []]
    assert_parity(corpus, queries)


def test_two_doc_corpus_scores_are_all_zero_and_return_no_hits() -> None:
    ours = BM25Retriever.from_tokens(["x", "y"], [["a", "b"], ["c", "d"]])
    assert not ours.scores_tokens(["a", "c"]).any()
    assert ours.search_tokens([["a", "c"]], 10) == [[]]


def test_negative_scores_are_not_returned() -> None:
    corpus = [["a", "b"], ["a", "c"]]
    ours = BM25Retriever.from_tokens(["x", "y"], corpus)
    scores = ours.scores_tokens(["a"])
    assert (scores < 0).all()
    np.testing.assert_allclose(scores, BM25Okapi(corpus).get_scores(["a"]), rtol=0, atol=ATOL)
    assert ours.search_tokens([["a"]], 10) == [[]]


# ---------------------------------------------------------------------- ranking rules


def test_ties_break_by_corpus_position() -> None:
    corpus = [["noise"], ["same", "doc"], ["other"], ["same", "doc"], ["same", "doc"], ["same", "doc"], ["x"]]
    ours = BM25Retriever.from_tokens([f"p{i}" for i in range(len(corpus))], corpus)
    assert [doc_id for doc_id, _ in ours.search(["same"], 3)[0]] == ["p1", "p3", "p4"]
    assert [doc_id for doc_id, _ in ours.search(["same other"], 10)[0]] == ["p2", "p1", "p3", "p4", "p5"]


def test_top_k_keeps_ties_at_the_cut_in_position_order() -> None:
    positions = np.array([9, 3, 7, 1, 5])
    scores = np.array([1.0, 2.0, 1.0, 1.0, 0.0])
    kept_positions, kept_scores = top_k(positions, scores, 3)
    assert kept_positions.tolist() == [3, 1, 7]
    assert kept_scores.tolist() == [2.0, 1.0, 1.0]


def test_k_larger_than_corpus_returns_every_matching_doc(api_index: BM25Retriever) -> None:
    hits = api_index.search(["path"], 1000)[0]
    matching = int((api_index.scores("path") > 0).sum())
    assert len(hits) == matching < len(API_DOCS)
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)


def test_k_zero_and_negative(api_index: BM25Retriever) -> None:
    assert api_index.search(["path"], 0) == [[]]
    with pytest.raises(ValueError, match="k must be"):
        api_index.search(["path"], -1)


def test_empty_query_and_empty_batch(api_index: BM25Retriever) -> None:
    assert api_index.search(["", "the of"], 10) == [[], []]
    assert api_index.search([""], 10) == [[]]
    assert api_index.search([], 10) == []
    assert not api_index.scores("").any()


def test_batched_equals_one_at_a_time(api_index: BM25Retriever) -> None:
    batched = api_index.search(API_QUERIES, 5)
    assert batched == [api_index.search([query], 5)[0] for query in API_QUERIES]


def test_search_uses_the_tokenizer(api_index: BM25Retriever) -> None:
    hits = api_index.search(["OrderedDict"], 3)[0]
    assert hits[0][0] == "api0"
    assert api_index.search_tokens([tokenize("OrderedDict")], 3) == [hits]


def test_hits_are_plain_python_types(api_index: BM25Retriever) -> None:
    hits: list[Hit] = api_index.search(["json"], 3)[0]
    assert all(type(doc_id) is str and type(score) is float for doc_id, score in hits)


# ---------------------------------------------------------------------- protocol and persistence


def test_is_a_persistent_retriever(api_index: BM25Retriever) -> None:
    assert api_index.name == "bm25"
    assert isinstance(api_index, Retriever)


def test_save_load_round_trip(api_index: BM25Retriever, tmp_path: Path) -> None:
    api_index.save(tmp_path / "index")
    params = json.loads((tmp_path / "index" / "params.json").read_text())
    assert {"k1", "b", "epsilon", "tokenizer", "n_docs", "avgdl", "versions"} <= params.keys()
    assert params["n_docs"] == len(API_DOCS)
    assert params["tokenizer"] == "retrieval_pipeline.core.retrieval.engines.tokenize:tokenize"
    assert params["versions"]["rank-bm25"] == "0.2.2"
    loaded = BM25Retriever.load(tmp_path / "index")
    assert loaded.search(API_QUERIES, 20) == api_index.search(API_QUERIES, 20)
    for query in API_QUERIES:
        assert np.array_equal(loaded.scores(query), api_index.scores(query))
    assert loaded.doc_ids == api_index.doc_ids and loaded.vocabulary == api_index.vocabulary


def test_custom_tokenizer_is_recorded_and_must_be_passed_when_not_importable(tmp_path: Path) -> None:
    def whitespace(text: str) -> list[str]:
        return text.lower().split()

    ours = BM25Retriever.build(["a", "b", "c"], ["Red apple", "green pear", "red cherry"], tokenizer=whitespace)
    ours.save(tmp_path)
    with pytest.raises(ValueError, match="pass tokenizer="):
        BM25Retriever.load(tmp_path)
    loaded = BM25Retriever.load(tmp_path, tokenizer=whitespace)
    assert loaded.search(["RED"], 5) == ours.search(["RED"], 5) != [[]]


def test_parameters_change_scores_like_rank_bm25() -> None:
    corpus = [tokenize(text) for text in API_DOCS]
    reference = BM25Okapi(corpus, k1=0.9, b=0.4, epsilon=0.5)
    ours = BM25Retriever.from_tokens([str(i) for i in range(len(corpus))], corpus, k1=0.9, b=0.4, epsilon=0.5)
    for query in API_QUERIES:
        np.testing.assert_allclose(ours.scores(query), reference.get_scores(tokenize(query)), rtol=0, atol=ATOL)


# ---------------------------------------------------------------------- invalid input


def test_empty_corpus_raises() -> None:
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Retriever.build([], [])


def test_corpus_without_tokens_raises() -> None:
    with pytest.raises(ValueError, match="no tokens"):
        BM25Retriever.build(["a", "b"], ["", "the of"])


def test_misaligned_and_duplicate_ids_raise() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        BM25Retriever.build(["a"], ["x", "y"])
    with pytest.raises(ValueError, match="unique"):
        BM25Retriever.build(["a", "a"], ["x", "y"])


def test_strings_where_sequences_are_expected_raise(api_index: BM25Retriever) -> None:
    with pytest.raises(TypeError, match="sequence of strings"):
        api_index.search("json", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="token list"):
        BM25Retriever.from_tokens(["a"], ["raw text"])


@pytest.mark.parametrize(("k1", "b"), [(-0.1, 0.75), (1.5, 1.5), (float("nan"), 0.75)])
def test_bad_parameters_raise(k1: float, b: float) -> None:
    with pytest.raises(ValueError):
        BM25Retriever.build(["a"], ["x"], k1=k1, b=b)


# ---------------------------------------------------------------------- the batch path: dense chunks or the sparse product


@pytest.mark.parametrize("seed", range(0, 60, 3))
@pytest.mark.parametrize(("min_fill", "chunk_cells"), [(0.0, 7), (0.0, 2**17), (float("inf"), 2**17)])
def test_dense_chunks_and_sparse_product_both_match_rank_bm25(seed: int, min_fill: float, chunk_cells: int, monkeypatch) -> None:
    """Forced onto either batch path, and onto dense chunks of one query or many, the hits stay rank_bm25's."""
    monkeypatch.setattr(bm25_module, "DENSE_MIN_POSTINGS_PER_CELL", min_fill)
    monkeypatch.setattr(bm25_module, "DENSE_CHUNK_CELLS", chunk_cells)
    assert_parity(*random_corpus(seed), k=3)
    assert_parity(*random_corpus(seed), k=1000)


def test_dense_top_k_keeps_ties_across_blocks_in_position_order(monkeypatch) -> None:
    monkeypatch.setattr(bm25_module, "TOP_K_BLOCK", 4)
    dense = np.array([[0.0, 2.0, 1.0, 0.0, 2.0, 0.0, 0.0, 3.0], [0.0] * 8, [-1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0]])
    rows = [(positions.tolist(), scores.tolist()) for positions, scores in bm25_module._dense_top_k(dense, 2)]
    assert rows == [([7, 1], [3.0, 2.0]), ([], []), ([1, 6], [0.5, 0.5])]  # 7, then the first of the tied 2.0s
    assert [p.tolist() for p, _ in bm25_module._dense_top_k(dense, 10)] == [[7, 1, 4, 2], [], [1, 6]]


def test_batch_of_common_terms_does_not_take_the_sparse_product(monkeypatch) -> None:
    """Queries whose postings cover most of the corpus are scored as dense rows (the product's output would be
    nearly dense: 2.4x slower than the loop in issue 38); rare-term batches keep the product."""
    corpus = [["common", "word", f"rare{i}"] for i in range(200)]
    index = BM25Retriever.from_tokens([f"d{i}" for i in range(200)], corpus)
    products: list[int] = []
    original = BM25Retriever._query_matrix
    monkeypatch.setattr(BM25Retriever, "_query_matrix", lambda self, ids: products.append(len(ids)) or original(self, ids))
    common = index.search_tokens([["common", "word"]] * 5, 3)
    assert products == [] and common == [index.search_tokens([["common", "word"]], 3)[0]] * 5
    rare = index.search_tokens([[f"rare{i}"] for i in range(5)], 3)
    assert products == [5] and [hits[0][0] for hits in rare] == [f"d{i}" for i in range(5)]


# ---------------------------------------------------------------------- the compiled kernel (large indexes)


@pytest.mark.parametrize("seed", range(0, 60, 2))
@pytest.mark.parametrize("sparse_share", [0.0, 1e12])
def test_compiled_kernel_matches_rank_bm25(seed: int, sparse_share: float, monkeypatch) -> None:
    """Forced onto the Numba kernel (every query ranked over the dense row, or over its touched documents only), the
    scores, hits, ties and the k beyond the corpus stay rank_bm25's, batched and one at a time."""
    pytest.importorskip("numba")
    monkeypatch.setattr(bm25_module, "COMPILED_FROM_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "SPARSE_MAX_SHARE", sparse_share)
    assert_parity(*random_corpus(seed), k=3)
    assert_parity(*random_corpus(seed), k=1000)


def test_compiled_kernel_on_the_api_corpus_and_its_edge_queries(monkeypatch) -> None:
    pytest.importorskip("numba")
    monkeypatch.setattr(bm25_module, "COMPILED_FROM_POSTINGS", 0)
    assert_parity([tokenize(text) for text in API_DOCS], [tokenize(query) for query in API_QUERIES])
    index = BM25Retriever.build([f"api{i}" for i in range(len(API_DOCS))], API_DOCS)
    assert index.search([], 5) == [] and index.search(["json"], 0) == [[]]


def test_compiled_kernel_keeps_ties_in_position_order(monkeypatch) -> None:
    pytest.importorskip("numba")
    monkeypatch.setattr(bm25_module, "COMPILED_FROM_POSTINGS", 0)
    corpus = [["x", "pad"] if i in (0, 2, 4, 6, 9) else [f"o{i}", "pad"] for i in range(30)]  # five equal x scores
    index = BM25Retriever.from_tokens([f"d{i}" for i in range(len(corpus))], corpus)
    for share in (0.0, 1e12):
        monkeypatch.setattr(bm25_module, "SPARSE_MAX_SHARE", share)
        assert [doc_id for doc_id, _ in index.search_tokens([["x"]], 4)[0]] == ["d0", "d2", "d4", "d6"]


def test_a_large_batch_is_one_kernel_call(monkeypatch) -> None:
    """The batch path never loses to its own loop: a batch is one call of the compiled loop over its queries (the
    loop pays the conversion and the call once per query), with the loop's hits."""
    pytest.importorskip("numba")
    monkeypatch.setattr(bm25_module, "COMPILED_FROM_POSTINGS", 0)
    corpus, queries = random_corpus(11)
    index = BM25Retriever.from_tokens([str(i) for i in range(len(corpus))], corpus)
    calls: list[int] = []
    kernel = bm25_module._compiled_search()
    monkeypatch.setattr(bm25_module, "_compiled_search", lambda: lambda *args: calls.append(len(args[4]) - 1) or kernel(*args))
    batched = index.search_tokens(queries, 5)
    assert calls == [len(queries)]
    assert batched == [index.search_tokens([query], 5)[0] for query in queries]


def test_compiled_kernel_is_used_from_the_size_threshold(monkeypatch) -> None:
    corpus, queries = random_corpus(5)
    index = BM25Retriever.from_tokens([str(i) for i in range(len(corpus))], corpus)
    used: list[bool] = []
    monkeypatch.setattr(bm25_module, "_compiled_search", lambda: used.append(True))  # None: falls back to numpy
    monkeypatch.setattr(bm25_module, "COMPILED_FROM_POSTINGS", index.weights.nnz + 1)
    small = index.search_tokens(queries, 5)
    assert used == []
    monkeypatch.setattr(bm25_module, "COMPILED_FROM_POSTINGS", index.weights.nnz)
    assert index.search_tokens(queries, 5) == small and used == [True]  # without Numba: the numpy hits
