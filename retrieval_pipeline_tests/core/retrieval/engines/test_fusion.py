"""Fusion: hand-computed min-max and RRF examples, tie-breaks, the hybrid wrapper, parity with ranx."""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Sequence

import pytest

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.engines.fusion import (
    HybridRetriever,
    best_ranks,
    hybrid_name,
    minmax_fuse,
    minmax_normalise,
    rrf_fuse,
)
from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

A: list[Hit] = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
B: list[Hit] = [("b", 10.0), ("d", 5.0)]


def _approx(hits: list[Hit]) -> list[tuple[str, object]]:
    return [(d, pytest.approx(s, abs=1e-12)) for d, s in hits]


# -- min-max ---------------------------------------------------------------------------------------


def test_minmax_with_a_missing_doc() -> None:
    # A -> a=1, b=0.5, c=0 ; B -> b=1, d=0 ; missing docs count 0.
    # b = .5*.5 + .5*1 = .75, a = .5, d = 0, c = 0; d before c: best rank 2 beats 3.
    assert minmax_fuse([A, B], [0.5, 0.5]) == _approx([("b", 0.75), ("a", 0.5), ("d", 0.0), ("c", 0.0)])


def test_minmax_unequal_weights() -> None:
    # b = .2*.5 + .8*1 = .9, a = .2, c = d = 0
    assert minmax_fuse([A, B], [0.2, 0.8]) == _approx([("b", 0.9), ("a", 0.2), ("d", 0.0), ("c", 0.0)])


def test_minmax_all_equal_run_normalises_to_one() -> None:
    flat: list[Hit] = [("x", 0.7), ("y", 0.7)]
    assert minmax_normalise(flat) == {"x": 1.0, "y": 1.0}
    assert minmax_normalise([("only", -3.0)]) == {"only": 1.0}
    # y = .3*1 + .7*1 = 1, x = .3*1 = .3, z = .7*0 = 0
    assert minmax_fuse([flat, [("y", 2.0), ("z", 1.0)]], [0.3, 0.7]) == _approx([("y", 1.0), ("x", 0.3), ("z", 0.0)])


def test_minmax_empty_run_contributes_nothing() -> None:
    assert minmax_fuse([A, []], [0.5, 0.5]) == _approx([("a", 0.5), ("b", 0.25), ("c", 0.0)])
    assert minmax_fuse([[], []], [0.5, 0.5]) == []


def test_minmax_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="2 runs but 1 weights"):
        minmax_fuse([A, B], [1.0])
    with pytest.raises(ValueError, match="repeats"):
        minmax_fuse([[("a", 1.0), ("a", 0.5)]], [1.0])


# -- RRF -------------------------------------------------------------------------------------------


def test_rrf_hand_computed() -> None:
    run1: list[Hit] = [("a", 9.0), ("b", 8.0), ("c", 7.0)]
    run2: list[Hit] = [("c", 0.9), ("a", 0.1)]
    expected = [("a", 1 / 61 + 1 / 62), ("c", 1 / 63 + 1 / 61), ("b", 1 / 62)]
    assert rrf_fuse([run1, run2]) == _approx(expected)
    assert rrf_fuse([run1, run2], k=0) == _approx([("a", 1 + 1 / 2), ("c", 1 / 3 + 1), ("b", 1 / 2)])


def test_rrf_uses_list_positions_not_scores() -> None:
    # The list order is the retriever's ranking; equal scores still get distinct ranks 1, 2.
    assert rrf_fuse([[("q", 1.0), ("p", 1.0)]]) == _approx([("q", 1 / 61), ("p", 1 / 62)])


def test_rrf_ties_break_by_best_rank_then_doc_id() -> None:
    # a and b both score 1/61 + 1/62 and both have best rank 1 -> doc_id order.
    assert [d for d, _ in rrf_fuse([[("b", 2.0), ("a", 1.0)], [("a", 2.0), ("b", 1.0)]])] == ["a", "b"]
    # z (rank 1 in run 2) and y (rank 1 in run 1) tie at 1/61; x at 1/62
    assert [d for d, _ in rrf_fuse([[("y", 5.0), ("x", 4.0)], [("z", 1.0)]])] == ["y", "z", "x"]


def test_rrf_refuses_negative_k() -> None:
    with pytest.raises(ValueError, match="k must be"):
        rrf_fuse([A], k=-1)


def test_best_ranks() -> None:
    assert best_ranks([A, B]) == {"a": 1, "b": 1, "c": 3, "d": 2}


# -- names and the hybrid retriever ---------------------------------------------------------------


def test_hybrid_name() -> None:
    assert hybrid_name("minmax", 0.5) == "hybrid_minmax_a0.5"
    assert hybrid_name("minmax", 0.25) == "hybrid_minmax_a0.25"
    assert hybrid_name("rrf", rrf_k=60) == "hybrid_rrf_k60"
    with pytest.raises(ValueError, match="unknown fusion method"):
        hybrid_name("borda")


class StaticRetriever:
    """Returns fixed lists, records the ``k`` it was asked for."""

    def __init__(self, name: str, ranked: dict[str, list[Hit]]) -> None:
        self.name = name
        self.ranked = ranked
        self.asked_k: list[int] = []

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.asked_k.append(k)
        return [self.ranked.get(q, [])[:k] for q in queries]


def test_hybrid_minmax_fetches_depth_and_truncates_to_k() -> None:
    first = StaticRetriever("bm25", {"q": A})
    second = StaticRetriever("dense", {"q": B})
    hybrid = HybridRetriever(None, [first, second], "minmax", alpha=0.5, depth=50)
    assert hybrid.name == "hybrid_minmax_a0.5"
    assert hybrid.search(["q", "other"], 2) == [_approx([("b", 0.75), ("a", 0.5)]), []]
    assert first.asked_k == second.asked_k == [50]
    hybrid.search(["q"], 80)
    assert first.asked_k[-1] == 80  # depth never below k


def test_hybrid_alpha_weights_the_first_retriever() -> None:
    first = StaticRetriever("bm25", {"q": A})
    second = StaticRetriever("dense", {"q": B})
    [hits] = HybridRetriever("h", [first, second], "minmax", alpha=1.0).search(["q"], 4)
    assert [d for d, _ in hits] == ["a", "b", "d", "c"]  # only A counts; c, d tie at 0 -> best rank 2 < 3
    [hits] = HybridRetriever("h", [first, second], "minmax", alpha=0.0).search(["q"], 4)
    assert hits[0] == ("b", 1.0) and [d for d, _ in hits[1:]] == ["a", "d", "c"]  # zeros: best rank 1, 2, 3


def test_hybrid_rrf_over_dense_and_static() -> None:
    dense = DenseRetriever("dense").build(["d1", "d2", "d3"], ["cat", "dog", "cat dog"], KeywordEncoder(["cat", "dog"]))
    lexical = StaticRetriever("bm25", {"cat": [("d2", 3.0), ("d3", 2.0)]})
    hybrid = HybridRetriever(None, [dense, lexical], "rrf", rrf_k=60, depth=3)
    assert hybrid.name == "hybrid_rrf_k60"
    # dense ranks d1 (1.0), d3 (0.707), d2 (0); lexical ranks d2, d3
    expected = [("d2", 1 / 63 + 1 / 61), ("d3", 1 / 62 + 1 / 62), ("d1", 1 / 61)]  # 1/61+1/63 > 2/62
    assert hybrid.search(["cat"], 3) == [_approx(expected)]


def test_hybrid_validates_settings() -> None:
    one = StaticRetriever("x", {})
    with pytest.raises(ValueError, match="exactly 2"):
        HybridRetriever(None, [one], "minmax")
    with pytest.raises(ValueError, match="alpha"):
        HybridRetriever(None, [one, one], "minmax", alpha=1.5)
    with pytest.raises(ValueError, match="unknown fusion method"):
        HybridRetriever(None, [one, one], "combsum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="depth"):
        HybridRetriever(None, [one, one], "rrf", depth=0)


# -- parity with ranx ------------------------------------------------------------------------------


def _random_runs(seed: int) -> list[dict[str, list[Hit]]]:
    """Two runs over 30 queries; overlapping random doc pools, distinct random scores."""
    rng = random.Random(seed)
    runs: list[dict[str, list[Hit]]] = [{}, {}]
    for q in range(30):
        for run, scale in zip(runs, (20.0, 1.0)):
            docs = rng.sample([f"doc{j:02d}" for j in range(40)], rng.randint(2, 25))
            scored = [(d, rng.uniform(-scale, scale)) for d in docs]
            run[f"q{q}"] = sorted(scored, key=lambda h: -h[1])
    return runs


def _ranx_scores(fused: object) -> dict[str, dict[str, float]]:
    return {q: dict(docs) for q, docs in fused.to_dict().items()}  # type: ignore[attr-defined]


def _ours(fused: list[Hit]) -> dict[str, float]:
    return dict(fused)


def _assert_same(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> None:
    assert ours.keys() == theirs.keys()
    for q in ours:
        assert ours[q].keys() == theirs[q].keys(), q
        for d, s in ours[q].items():
            assert abs(s - theirs[q][d]) <= 1e-9, (q, d, s, theirs[q][d])


@pytest.mark.filterwarnings("ignore")
def test_parity_with_ranx() -> None:
    """min-max wsum and RRF equal ranx.fuse to 1e-9 (first call compiles with numba: ~33 s cold here)."""
    ranx = pytest.importorskip("ranx")
    runs = _random_runs(seed=7)
    ranx_runs = [ranx.Run({q: dict(hits) for q, hits in run.items()}) for run in runs]
    alpha = 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        wsum = ranx.fuse(runs=ranx_runs, norm="min-max", method="wsum", params={"weights": [alpha, 1 - alpha]})
        rrf = ranx.fuse(runs=ranx_runs, method="rrf", params={"k": 60})
        seconds = time.perf_counter() - start
    print(f"ranx first fuse calls: {seconds:.1f} s")
    queries = list(runs[0])
    _assert_same({q: _ours(minmax_fuse([r[q] for r in runs], [alpha, 1 - alpha])) for q in queries}, _ranx_scores(wsum))
    _assert_same({q: _ours(rrf_fuse([r[q] for r in runs], k=60)) for q in queries}, _ranx_scores(rrf))


@pytest.mark.filterwarnings("ignore")
def test_documented_difference_from_ranx_on_all_equal_runs() -> None:
    """ranx maps an all-equal run to 0 (denominator clamped to 1e-9); we map it to 1."""
    ranx = pytest.importorskip("ranx")
    flat = {"q": {"x": 0.7, "y": 0.7}}
    other = {"q": {"y": 2.0, "z": 1.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ranx.fuse(runs=[ranx.Run(flat), ranx.Run(other)], norm="min-max", method="wsum", params={"weights": [0.3, 0.7]})
    assert _ranx_scores(theirs)["q"] == pytest.approx({"x": 0.0, "y": 0.7, "z": 0.0})
    ours = _ours(minmax_fuse([list(flat["q"].items()), list(other["q"].items())], [0.3, 0.7]))
    assert ours == pytest.approx({"x": 0.3, "y": 1.0, "z": 0.0})


@pytest.mark.filterwarnings("ignore")
def test_three_retriever_hybrid_equals_ranx_fuse() -> None:
    """A registry hybrid of three retrievers (weights 0.5/0.3/0.2; RRF k=60) equals ranx.fuse on the same runs."""
    ranx = pytest.importorskip("ranx")
    runs = _random_runs(seed=11) + _random_runs(seed=12)[:1]

    class Replay:
        def __init__(self, name: str, run: dict[str, list[Hit]]) -> None:
            self.name, self.run = name, run

        def search(self, queries: list[str], k: int) -> list[list[Hit]]:
            return [self.run[q][:k] for q in queries]

    parts = [Replay(f"r{i}", run) for i, run in enumerate(runs)]
    queries = list(runs[0])
    weights = [0.5, 0.3, 0.2]
    ranx_runs = [ranx.Run({q: dict(hits) for q, hits in run.items()}) for run in runs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wsum = ranx.fuse(runs=ranx_runs, norm="min-max", method="wsum", params={"weights": weights})
        rrf = ranx.fuse(runs=ranx_runs, method="rrf", params={"k": 60})
    minmax = HybridRetriever("h", parts, "minmax", weights=weights, depth=100).search(queries, 200)
    fused_rrf = HybridRetriever("h", parts, "rrf", rrf_k=60, depth=100).search(queries, 200)
    _assert_same({q: _ours(hits) for q, hits in zip(queries, minmax)}, _ranx_scores(wsum))
    _assert_same({q: _ours(hits) for q, hits in zip(queries, fused_rrf)}, _ranx_scores(rrf))
