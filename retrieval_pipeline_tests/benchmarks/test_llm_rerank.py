"""``benchmarks/llm_rerank.py``: the score read from the answer token's log-probabilities, and the two runs made of it.

A pair's score is P(Yes) / (P(Yes) + P(No)) over the top log-probabilities (spelling and spaces aside); the scored
head is sorted by it with ties in the base's order and the unscored tail kept; the fusion is RRF (k = 60) of the two
orders. A fake client stands in for the llama.cpp server.
"""

from __future__ import annotations

import math
from types import ModuleType, SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark) -> ModuleType:
    return load_benchmark("llm_rerank.py")


class FakeClient:
    """Answers every chat completion with the given (token, probability) list as the first token's top log-probabilities."""

    def __init__(self, top: list[tuple[str, float]]) -> None:
        self.top = top
        self.prompts: list[str] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, *, model, messages, max_tokens, temperature, logprobs, top_logprobs):
        assert (max_tokens, temperature, logprobs) == (1, 0, True)
        self.prompts.append(messages[0]["content"])
        candidates = [SimpleNamespace(token=t, logprob=math.log(p)) for t, p in self.top]
        return SimpleNamespace(choices=[SimpleNamespace(logprobs=SimpleNamespace(content=[SimpleNamespace(top_logprobs=candidates)]))])


def test_p_yes_normalises_yes_against_no_whatever_the_spelling(bench):
    client = FakeClient([("Yes", 0.5), (" yes", 0.1), ("No", 0.2), ("Maybe", 0.2)])
    assert bench.p_yes(client, "m", "q?", "passage") == pytest.approx(0.6 / 0.8)
    assert "Question: q?" in client.prompts[0] and "Passage:\npassage" in client.prompts[0]


def test_p_yes_is_zero_when_neither_answer_is_among_the_candidates(bench):
    assert bench.p_yes(FakeClient([("The", 0.9)]), "m", "q", "p") == 0.0


def test_the_passage_is_cut_for_the_prompt(bench):
    client = FakeClient([("Yes", 1.0)])
    bench.p_yes(client, "m", "q", "x" * (bench.MAX_PASSAGE_CHARS + 500))
    assert client.prompts[0].count("x") == bench.MAX_PASSAGE_CHARS


def _orders(bench, run: list[str], scores: list[float]) -> tuple[list[str], list[str]]:
    """The reranked and the fused order of one query whose base run is ``run``, its head scored by ``scores``."""
    hits = [(doc, float(len(run) - i)) for i, doc in enumerate(run)]
    reranked, fused = bench.rerank_runs(["q"], [hits], bench.SavedScorer(scores), {d: d for d in run}, len(scores))
    return [d for d, _ in reranked[0]], [d for d, _ in fused[0]]


def test_reranked_sorts_the_head_stably_and_keeps_the_tail(bench):
    run = ["a", "b", "c", "d", "e"]
    assert _orders(bench, run, [0.1, 0.9, 0.9])[0] == ["b", "c", "a", "d", "e"]


def test_fused_is_rrf_of_the_base_and_the_llm_orders(bench):
    run = ["a", "b", "c", "d"]
    # base order a, b, c; LLM order c, b, a: a and c tie above b (1/61 + 1/63 > 2/62) and keep the base's order
    expected = {d: 1 / (61 + r) + 1 / (61 + lr) for d, r, lr in (("a", 0, 2), ("b", 1, 1), ("c", 2, 0))}
    assert expected["a"] == expected["c"] and expected["b"] < expected["a"]
    assert _orders(bench, run, [0.0, 0.5, 1.0])[1] == ["a", "c", "b", "d"]
    # a head the LLM agrees with is unchanged
    assert _orders(bench, run, [0.9, 0.5, 0.1])[1] == run


def test_saved_scores_must_match_the_pairs(bench):
    with pytest.raises(ValueError, match="2 saved scores for 3 pairs"):
        bench.SavedScorer([0.1, 0.2]).score([("q", "a"), ("q", "b"), ("q", "c")])


def test_the_llm_scorer_reranks_through_the_rerank_kinds_reranker_and_keeps_its_scores(bench):
    scorer = bench.LlmScorer(FakeClient([("Yes", 0.25), ("No", 0.75)]), "m")
    hits = [("a", 2.0), ("b", 1.0)]
    reranked, _ = bench.rerank_runs(["q"], [hits], scorer, {"a": "text a", "b": "text b"}, 2)
    assert scorer.scores.tolist() == pytest.approx([0.25, 0.25])
    assert [d for d, _ in reranked[0]] == ["a", "b"]  # equal scores keep the base's order
