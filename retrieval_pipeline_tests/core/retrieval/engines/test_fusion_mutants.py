"""Fusion, against the mutants ``benchmarks/mutation.py`` found alive in :mod:`retrieval_pipeline.core.retrieval.engines.fusion`.

What the older tests left open: the defaults (method, alpha, RRF k, depth), the bounds of the settings
(``rrf_k = 0`` and ``depth = 1`` are valid), exact messages, a failed input, ``params()``, ``k`` of 0 and 1,
and the best rank of a document that a later run ranks lower.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.base import QueryError
from retrieval_pipeline.core.retrieval.engines.fusion import HybridRetriever, best_ranks, hybrid_name, minmax_fuse, rrf_fuse

A: list[Hit] = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
B: list[Hit] = [("b", 10.0), ("d", 5.0)]


def _exactly(message: str) -> str:
    return "^" + re.escape(message) + "$"


class Static:
    """Fixed answers per query (a list of hits or a QueryError); records the ``k`` asked."""

    def __init__(self, name: str, answers: dict[str, list[Hit] | QueryError]) -> None:
        self.name = name
        self.answers = answers
        self.asked_k: list[int] = []

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit] | QueryError]:
        self.asked_k.append(k)
        out = []
        for q in queries:
            answer = self.answers.get(q, [])
            out.append(answer if isinstance(answer, QueryError) else answer[:k])
        return out


def test_best_rank_is_the_smallest_over_the_runs_whatever_their_order():
    assert best_ranks([[("x", 0.9), ("y", 0.5)], [("z", 1.0), ("w", 0.8), ("x", 0.1)]]) == {"x": 1, "y": 2, "z": 1, "w": 2}


def test_default_names_and_settings():
    assert hybrid_name("minmax") == "hybrid_minmax_a0.5" and hybrid_name("rrf") == "hybrid_rrf_k60"
    first, second = Static("bm25", {"q": A}), Static("dense", {"q": B})
    default = HybridRetriever(None, [first, second])
    assert (default.name, default.method, default.alpha, default.rrf_k, default.depth, default.weights) == (
        "hybrid_minmax_a0.5",
        "minmax",
        0.5,
        60,
        100,
        [0.5, 0.5],
    )
    default.search(["q"], 5)
    assert first.asked_k == [100]
    rrf = HybridRetriever(None, [first, second], "rrf")
    assert (rrf.name, rrf.rrf_k) == ("hybrid_rrf_k60", 60)
    assert HybridRetriever(None, [first, second], "rrf", rrf_k=10).name == "hybrid_rrf_k10"


def test_the_hybrid_fuses_rrf_with_its_own_k():
    hybrid = HybridRetriever("h", [Static("x", {"q": A}), Static("y", {"q": B})], "rrf", rrf_k=1)
    # b: 1/(1+2) + 1/(1+1) = 5/6; a: 1/2; d: 1/3; c: 1/4
    assert hybrid.search(["q"], 4) == [[("b", pytest.approx(5 / 6)), ("a", 0.5), ("d", pytest.approx(1 / 3)), ("c", 0.25)]]
    assert rrf_fuse([A, B], k=1) == hybrid.fuse([A, B])


def test_bounds_of_the_settings_are_valid():
    one, two = Static("x", {"q": A}), Static("y", {"q": B})
    assert HybridRetriever(None, [one, two], "rrf", rrf_k=0).search(["q"], 1) == [[("b", pytest.approx(1 / 2 + 1 / 1))]]
    assert HybridRetriever(None, [one, two], "rrf", rrf_k=0.5).rrf_k == 0.5
    shallow = HybridRetriever(None, [one, two], "minmax", depth=1)
    # one hit from each: a (alone in its run: normalised 1) and b (likewise), 0.5 each; the tie goes to doc id a
    assert shallow.depth == 1 and shallow.search(["q"], 1) == [[("a", 0.5)]]
    assert one.asked_k[-1] == 1


def test_settings_errors_are_exact():
    one = Static("x", {})
    with pytest.raises(ValueError, match=_exactly("a hybrid needs at least one retriever")):
        HybridRetriever(None, [], "rrf")
    with pytest.raises(ValueError, match=_exactly("minmax fusion needs one weight per retriever: 2 retrievers, 1 weights")):
        HybridRetriever(None, [one, one], "minmax", weights=[1.0])
    with pytest.raises(ValueError, match=_exactly("rrf_k must be >= 0, got -1")):
        HybridRetriever(None, [one, one], "rrf", rrf_k=-1)
    assert HybridRetriever(None, [one, one], "rrf", weights=[1.0]).method == "rrf"  # weights are for minmax only


def test_repeated_documents_are_named_sorted_and_capped_at_ten():
    many = [(f"d{i:02d}", 1.0) for i in range(12)] * 2
    with pytest.raises(ValueError, match=_exactly(f"a ranked list repeats documents: {[f'd{i:02d}' for i in range(10)]}")):
        rrf_fuse([many])
    with pytest.raises(ValueError, match=_exactly("a ranked list repeats documents: ['b']")):
        minmax_fuse([[("b", 3.0), ("a", 2.0), ("b", 1.0)]], [1.0])


def test_a_failed_input_fails_the_query_naming_every_failed_input():
    first = Static("bm25", {"q": QueryError("timeout"), "ok": A})
    second = Static("dense", {"q": QueryError("refused"), "ok": B})
    failed, fused = HybridRetriever("h", [first, second], "rrf").search(["q", "ok"], 2)
    assert failed == QueryError("input bm25 failed: timeout; input dense failed: refused")
    assert [d for d, _ in fused] == ["b", "a"]


def test_k_of_zero_asks_nothing_and_k_of_one_gives_one_hit():
    first, second = Static("x", {"q": A}), Static("y", {"q": B})
    hybrid = HybridRetriever("h", [first, second], "rrf", depth=5)
    assert hybrid.search(["q", "r"], 0) == [[], []] and first.asked_k == []
    assert [[d for d, _ in hits] for hits in hybrid.search(["q"], 1)] == [["b"]]


def test_params_describe_the_hybrid():
    retrievers = [Static("bm25", {}), Static("dense", {})]
    assert HybridRetriever(None, retrievers, "minmax", alpha=0.25, depth=7).params() == {
        "kind": "hybrid",
        "name": "hybrid_minmax_a0.25",
        "method": "minmax",
        "weights": [0.25, 0.75],
        "rrf_k": None,
        "depth": 7,
        "retrievers": ["bm25", "dense"],
    }
    assert HybridRetriever("mine", retrievers, "rrf", rrf_k=30).params() == {
        "kind": "hybrid",
        "name": "mine",
        "method": "rrf",
        "weights": None,
        "rrf_k": 30,
        "depth": 100,
        "retrievers": ["bm25", "dense"],
    }
