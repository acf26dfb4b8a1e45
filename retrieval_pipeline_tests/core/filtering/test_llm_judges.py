"""Unit tests of ``core/filtering/judges/llm.py``: every branch of sufficiency and necessity, every field.

The judges only need ``client.settings.model`` and ``client.map_json``; :class:`ScriptedClient` answers each
request from a script keyed by the kind of prompt (gold or random contexts), records what was asked, and
returns :class:`LLMCall` objects as the real client does (a value, or an error with the raw answer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest

from retrieval_pipeline.core.filtering.judges.llm import (
    MAX_CONTEXT_CHARS,
    SYSTEM,
    AnswerFromContext,
    LLMForwardRagJudge,
    LLMRetrievalJudge,
    RetrievalScores,
    answer_messages,
    retrieval_messages,
)
from retrieval_pipeline.core.services.llm.client import LLMCall

CORPUS = {
    "json.dumps": "Serialize obj to a JSON formatted str.",
    "json.loads": "Deserialize s to a Python object.",
    "csv.reader": "Return a reader object over lines.",
    "csv.writer": "Return a writer object for delimited strings.",
    "re.sub": "Return the string with replacements.",
    "os.path.join": "Join path components.",
}
Answer = tuple[dict[str, Any] | None, str | None]  # (value, error)


@dataclass
class ScriptedClient:
    """``map_json`` answering each request with ``script(prompt)``; every batch of requests is kept."""

    script: Callable[[str], Answer]
    cached: bool = False
    settings: Any = field(default_factory=lambda: SimpleNamespace(model="judge-model"))
    batches: list[list[tuple[list[dict[str, str]], type]]] = field(default_factory=list)

    def map_json(self, requests: Sequence[tuple[list[dict[str, str]], type]]) -> list[LLMCall]:
        self.batches.append(list(requests))
        calls = []
        for messages, _schema in requests:
            value, error = self.script(messages[-1]["content"])
            raw = None if value is not None else "not json at all"
            calls.append(LLMCall("key", value, error, self.cached and value is not None, 1, 7, 3, "judge-model", raw))
        return calls


def answers(gold: Answer, random: Answer) -> Callable[[str], Answer]:
    """Gold prompts (one context: the pairs here have one gold) get ``gold``; random-context prompts ``random``."""
    return lambda prompt: gold if prompt.count("[context ") == 1 else random


def said(answerable: bool, answer: str = "", rationale: str = "") -> Answer:
    return {"answerable": answerable, "answer": answer, "rationale": rationale}, None


def failed(error: str) -> Answer:
    return None, error


def decide(gold: Answer, random: Answer, *, cached: bool = False):
    """The one decision on a pair whose gold is ``json.dumps``, with two random contexts."""
    client = ScriptedClient(answers(gold, random), cached=cached)
    judge = LLMForwardRagJudge(client, CORPUS, random_contexts=2, seed=5)  # type: ignore[arg-type]
    (decision,) = judge.decide_all([("q1", "How do I write JSON?", ["json.dumps"])])
    return decision, client


# --------------------------------------------------------------------------------------------------
# Prompts


def test_answer_messages_number_the_contexts_cut_each_one_and_ask_the_question() -> None:
    long = "x" * (MAX_CONTEXT_CHARS + 100)
    system, user = answer_messages("Which call writes JSON?", ["first text", long])
    assert system == {"role": "system", "content": SYSTEM} and user["role"] == "user"
    text = user["content"]
    assert text.startswith("[context 1]\nfirst text\n\n[context 2]\n" + "x" * MAX_CONTEXT_CHARS + "\n\n")
    assert "x" * (MAX_CONTEXT_CHARS + 1) not in text  # each context cut at the limit
    assert "Question: Which call writes JSON?" in text and '"answerable": true|false' in text
    assert "[context" not in answer_messages("Q?", [])[1]["content"]  # no context: none numbered


def test_retrieval_messages_list_the_hits_best_first_and_ask_for_three_scores() -> None:
    system, user = retrieval_messages("Which call writes JSON?", ["top hit", "second hit"])
    assert system["content"] == SYSTEM
    text = user["content"]
    assert text.startswith("Question: Which call writes JSON?\n\nRetrieved, best first:\n[context 1]\ntop hit\n\n[context 2]\nsecond hit")
    assert all(f'"{score}"' in text for score in ("quality", "completeness", "relevance", "rationale"))


def test_the_schemas_bound_the_scores_and_require_answerable() -> None:
    assert AnswerFromContext.model_validate({"answerable": True}).model_dump() == {"answerable": True, "answer": "", "rationale": ""}
    with pytest.raises(pydantic.ValidationError):
        AnswerFromContext.model_validate({"answer": "x"})
    for bad in ({"quality": 1.2, "completeness": 0.5, "relevance": 0.5}, {"quality": 0.5, "completeness": -0.1, "relevance": 0.5}):
        with pytest.raises(pydantic.ValidationError):
            RetrievalScores.model_validate(bad)
    assert RetrievalScores.model_validate({"quality": 0, "completeness": 1, "relevance": 0.5}).rationale == ""


# --------------------------------------------------------------------------------------------------
# Forward RAG: sufficiency x necessity


@pytest.mark.parametrize(
    "gold_says, random_says, keep, reason_starts, sufficiency, best_random",
    [
        (True, False, True, "kept: answered from the gold context ('json.dumps'), not from random contexts", 1.0, 0.0),
        (False, False, False, "dropped (insufficient): the model could not answer from the gold context: gold rationale", 0.0, 0.0),
        (False, True, False, "dropped (insufficient): the model could not answer from the gold context: gold rationale", 0.0, 1.0),
        (True, True, False, "dropped (not necessary): random contexts also answered it: random rationale", 1.0, 1.0),
    ],
    ids=["sufficient-and-necessary", "insufficient", "insufficient-even-if-random-answers", "not-necessary"],
)
def test_every_decided_branch_and_its_numbers(
    gold_says: bool, random_says: bool, keep: bool, reason_starts: str, sufficiency: float, best_random: float
) -> None:
    gold = said(gold_says, "json.dumps" if gold_says else "", "gold rationale")
    random = said(random_says, "a guess" if random_says else "", "random rationale")
    decision, _ = decide(gold, random)
    assert (decision.query_id, decision.keep, decision.undecided, decision.judge) == ("q1", keep, False, "llm:judge-model")
    assert decision.reason == reason_starts
    assert (decision.sufficiency, decision.best_random) == (sufficiency, best_random)
    assert decision.details == {
        "sufficiency": {"value": gold[0], "error": None, "cached": False, "raw": None},
        "necessity": {"value": random[0], "error": None, "cached": False, "raw": None},
    }


@pytest.mark.parametrize(
    "gold, random, error, failed_calls",
    [
        (failed("timeout on gold"), said(False), "timeout on gold", ["sufficiency"]),
        (said(True, "json.dumps"), failed("HTTP 500 on random"), "HTTP 500 on random", ["necessity"]),
        (failed("timeout on gold"), failed("HTTP 500 on random"), "timeout on gold", ["sufficiency", "necessity"]),
    ],
    ids=["gold-call-failed", "random-call-failed", "both-failed"],
)
def test_a_failed_call_leaves_the_pair_undecided_with_the_error_never_kept(
    gold: Answer, random: Answer, error: str, failed_calls: list[str]
) -> None:
    decision, _ = decide(gold, random)
    assert decision.undecided and not decision.keep
    assert decision.reason == f"undecided: {error}"
    assert decision.sufficiency is None and decision.best_random is None  # no number made up
    assert len(decision.random_doc_ids) == 2  # the draw is recorded even so
    for call in ("sufficiency", "necessity"):
        entry = decision.details[call]
        if call in failed_calls:
            assert entry["value"] is None and entry["error"] and entry["raw"] == "not json at all" and entry["cached"] is False
        else:
            assert entry["value"] is not None and entry["error"] is None and entry["raw"] is None


def test_a_cached_answer_is_reported_as_cached() -> None:
    decision, _ = decide(said(True, "json.dumps"), said(False), cached=True)
    assert decision.details["sufficiency"]["cached"] is True and decision.details["necessity"]["cached"] is True


def test_all_pairs_go_in_one_batch_gold_then_random_with_the_right_contexts() -> None:
    client = ScriptedClient(answers(said(True, "x"), said(False)))
    judge = LLMForwardRagJudge(client, CORPUS, random_contexts=3, seed=13)  # type: ignore[arg-type]
    pairs = [("q1", "How do I write JSON?", ["json.dumps", "missing.doc"]), ("q2", "How do I read CSV?", ["csv.reader", "csv.writer"])]
    decisions = judge.decide_all(pairs)
    (batch,) = client.batches  # one concurrent batch, two requests per pair, in pair order
    assert [schema for _, schema in batch] == [AnswerFromContext] * 4
    prompts = [messages[-1]["content"] for messages, _ in batch]
    assert [d.query_id for d in decisions] == ["q1", "q2"]
    # gold prompts: the gold texts in order, a gold missing from the corpus skipped
    assert prompts[0].count("[context ") == 1 and CORPUS["json.dumps"] in prompts[0]
    assert prompts[2].index(CORPUS["csv.reader"]) < prompts[2].index(CORPUS["csv.writer"]) and prompts[2].count("[context ") == 2
    for decision, pair, random_prompt in zip(decisions, pairs, (prompts[1], prompts[3])):
        ids = decision.random_doc_ids
        assert len(ids) == 3 and len(set(ids)) == 3 and not set(ids) & set(pair[2]) and set(ids) <= set(CORPUS)
        assert random_prompt.count("[context ") == 3 and all(CORPUS[d] in random_prompt for d in ids)
        assert f"Question: {pair[1]}" in random_prompt


def test_the_random_draw_is_seeded_per_query_and_bounded_by_the_pool() -> None:
    def draw(seed: int, query_id: str, n: int = 2, golds: Sequence[str] = ("json.dumps",)) -> list[str]:
        client = ScriptedClient(answers(said(True), said(False)))
        (decision,) = LLMForwardRagJudge(client, CORPUS, random_contexts=n, seed=seed).decide_all([(query_id, "Q?", list(golds))])  # type: ignore[arg-type]
        return decision.random_doc_ids

    assert draw(13, "q1") == draw(13, "q1")  # the same pair gets the same contexts on every run
    assert len({tuple(draw(s, "q1")) for s in range(20)}) > 1  # the seed matters
    assert len({tuple(draw(13, f"q{i}")) for i in range(20)}) > 1  # and so does the query
    assert sorted(draw(13, "q1", n=10)) == sorted(set(CORPUS) - {"json.dumps"})  # more than the pool: the whole pool
    assert draw(13, "q1", n=0) == []


def test_no_pair_asks_nothing() -> None:
    client = ScriptedClient(answers(said(True), said(False)))
    assert LLMForwardRagJudge(client, CORPUS).decide_all([]) == []  # type: ignore[arg-type]
    assert client.batches == [[]]


# --------------------------------------------------------------------------------------------------
# The retrieval judge


def test_retrieval_scores_fill_every_field_and_pass_at_the_threshold() -> None:
    scores = {
        "q-top": ({"quality": 0.7, "completeness": 0.4, "relevance": 1.0, "rationale": "good enough"}, None),
        "q-low": ({"quality": 0.69, "completeness": 0.9, "relevance": 0.2, "rationale": "off topic"}, None),
        "q-err": (None, "HTTP 503 (after 5 attempt(s))"),
    }
    client = ScriptedClient(lambda prompt: scores[prompt.split("\n")[0].removeprefix("Question: ")])
    judge = LLMRetrievalJudge(client, pass_at=0.7)  # type: ignore[arg-type]
    rows = judge.score_all([("q-top", ["a", "b"]), ("q-low", ["c"]), ("q-err", [])])
    assert rows == [
        {"judge": "llm:judge-model", "judge_quality": 0.7, "judge_completeness": 0.4, "judge_relevance": 1.0,
         "judge_pass": True, "judge_error": None, "judge_rationale": "good enough"},
        {"judge": "llm:judge-model", "judge_quality": 0.69, "judge_completeness": 0.9, "judge_relevance": 0.2,
         "judge_pass": False, "judge_error": None, "judge_rationale": "off topic"},
        {"judge": "llm:judge-model", "judge_quality": None, "judge_completeness": None, "judge_relevance": None,
         "judge_pass": None, "judge_error": "HTTP 503 (after 5 attempt(s))", "judge_rationale": None},
    ]  # fmt: skip
    (batch,) = client.batches
    assert [schema for _, schema in batch] == [RetrievalScores] * 3
    assert "[context 2]\nb" in batch[0][0][-1]["content"] and "[context" not in batch[2][0][-1]["content"]


def test_the_pass_threshold_is_the_judges_setting() -> None:
    client = ScriptedClient(lambda _prompt: ({"quality": 0.5, "completeness": 0.5, "relevance": 0.5}, None))
    assert LLMRetrievalJudge(client, pass_at=0.5).score_all([("q", ["a"])])[0]["judge_pass"] is True  # type: ignore[arg-type]
    assert LLMRetrievalJudge(client, pass_at=0.51).score_all([("q", ["a"])])[0]["judge_pass"] is False  # type: ignore[arg-type]
