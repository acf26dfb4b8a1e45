"""The judges' decisions, against the mutants ``benchmarks/mutation.py`` found alive in
:mod:`retrieval_pipeline.core.filtering.judges.offline`, :mod:`retrieval_pipeline.core.filtering.judges.llm` and the decision
functions of :mod:`retrieval_pipeline.core.filtering.filter`.

What the older tests left open: the idf formula of the offline judge worked by hand, its defaults and bounds
(coverage exactly at ``max_random_coverage``, a corpus with nothing but the gold, a query with no token),
the random contexts drawn by (seed, query id) as :func:`random_documents` documents, whole decisions, the
LLM judge's reasons when the model leaves a field out, and the filter passing every setting to its judge.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from retrieval_pipeline.core.common.types import Document, QAPair
from retrieval_pipeline.core.filtering.filter import HardNegatives, filter_pairs, judge_pairs, verified_row
from retrieval_pipeline.core.filtering.judges.llm import LLMForwardRagJudge, LLMRetrievalJudge
from retrieval_pipeline.core.filtering.judges.offline import (
    FilterDecision,
    OfflineLexicalJudge,
    passthrough_decision,
    random_documents,
)
from retrieval_pipeline.core.filtering.settings import FilterSettings, NegativeSettings
from retrieval_pipeline.core.services.llm.client import LLMCall

#: N = 4 documents; "alpha" is in 2, "beta" in 1, "zeta" in none.
CORPUS = {"d1": "alpha beta", "d2": "alpha gamma", "d3": "delta epsilon", "d4": "epsilon eta"}


def _idf(n_docs: int, n_with: int) -> float:
    """The module docstring's idf: ln(1 + (N - n_t + 0.5) / (n_t + 0.5))."""
    return math.log(1.0 + (n_docs - n_with + 0.5) / (n_with + 0.5))


# --------------------------------------------------------------------------------------------------
# Offline judge
# --------------------------------------------------------------------------------------------------


def test_coverage_is_the_idf_weighted_share_of_the_query_worked_by_hand():
    judge = OfflineLexicalJudge(CORPUS)
    alpha, beta, zeta = _idf(4, 2), _idf(4, 1), _idf(4, 0)  # zeta: a term no document has
    assert (alpha, beta, zeta) == (math.log(2.0), math.log(10 / 3), math.log(10.0))
    assert abs(judge.coverage("alpha beta zeta", "d1") - (alpha + beta) / (alpha + beta + zeta)) < 1e-12
    assert abs(judge.coverage("alpha zeta", "d2") - alpha / (alpha + zeta)) < 1e-12
    assert judge.coverage("", "d1") == 0.0 and judge.coverage("the of", "d1") == 0.0  # no token (stop words only)


def test_defaults_and_the_empty_corpus():
    judge = OfflineLexicalJudge(CORPUS)
    assert (judge.random_contexts, judge.min_description_tokens, judge.max_random_coverage, judge.seed) == (3, 2, 0.5, 13)
    try:
        OfflineLexicalJudge({})
    except ValueError as error:
        assert str(error) == "the offline judge needs a non-empty corpus"
    else:
        raise AssertionError("an empty corpus must be refused")


def test_random_contexts_are_the_documented_draw():
    judge = OfflineLexicalJudge(CORPUS, random_contexts=2, seed=21)
    decision = judge.decide("q9", "alpha", ["d1"])
    assert decision.random_doc_ids == random_documents(list(CORPUS), "q9", {"d1"}, 2, 21)
    other = {f"doc{i}": f"word{i} filler text" for i in range(30)}
    assert OfflineLexicalJudge(other, seed=21).decide("qa", "word1", ["doc1"]).random_doc_ids == random_documents(
        list(other), "qa", {"doc1"}, 3, 21
    )
    assert OfflineLexicalJudge(other).decide("qa", "word1", ["doc1"]).random_doc_ids == random_documents(list(other), "qa", {"doc1"}, 3, 13)


def test_a_gold_outside_the_corpus_gives_the_whole_drop():
    assert OfflineLexicalJudge(CORPUS).decide("q1", "alpha", ["nope"]) == FilterDecision(
        "q1", False, "offline_lexical", "dropped: no gold document in the corpus"
    )


def test_sufficiency_and_best_random_are_the_measured_coverages():
    corpus = {f"doc{i}": f"word{i} shared text here" for i in range(12)}
    judge = OfflineLexicalJudge(corpus, random_contexts=4, seed=3)
    decision = judge.decide("q", "word5 shared", ["doc5"])
    assert decision.sufficiency == judge.coverage("word5 shared", "doc5")
    assert decision.best_random == max(judge.coverage("word5 shared", d) for d in decision.random_doc_ids)
    assert decision.keep is True and decision.best_random < decision.sufficiency


def test_a_corpus_holding_only_the_gold_has_no_random_context():
    decision = OfflineLexicalJudge({"g": "alpha beta gamma"}).decide("q", "alpha", ["g"])
    assert decision.random_doc_ids == [] and decision.best_random == 0.0 and decision.keep is True


def test_coverage_exactly_at_the_bound_is_not_necessary():
    """Every document says the same: a random context covers the query as well as the gold does."""
    corpus = {k: "alpha beta gamma" for k in ("a", "b", "c", "d")}
    probe = OfflineLexicalJudge(corpus)
    bound = probe.coverage("alpha beta omega", "a")
    decision = OfflineLexicalJudge(corpus, max_random_coverage=bound).decide("q", "alpha beta omega", ["a"])
    assert decision.keep is False and decision.reason.startswith("dropped (not necessary)")


def test_an_insufficient_gold_is_dropped_with_keep_false():
    decision = OfflineLexicalJudge({"m.thing": "thing", "x": "other words here"}).decide("q", "a thing", ["m.thing"])
    assert decision.keep is False and decision.reason.startswith("dropped (insufficient)")


def test_passthrough_is_the_whole_decision():
    assert passthrough_decision("q3") == FilterDecision("q3", True, "none", "kept: filter disabled in the dataset config")


# --------------------------------------------------------------------------------------------------
# LLM judges
# --------------------------------------------------------------------------------------------------


class RawClient:
    """Answers every request with ``value`` (or ``error``); keeps the raw text of every answer and every prompt."""

    def __init__(self, gold: dict | None, random: dict | None, error: str | None = None) -> None:
        self.gold, self.random, self.error = gold, random, error
        self.settings = SimpleNamespace(model="m1")
        self.prompts: list[str] = []

    def map_json(self, requests: Sequence[tuple[list[dict[str, str]], type]]) -> list[LLMCall]:
        calls = []
        for i, (messages, _schema) in enumerate(requests):
            self.prompts.append(messages[-1]["content"])
            value = self.gold if i % 2 == 0 else self.random
            error = None if value is not None else self.error
            calls.append(LLMCall("key", value, error, False, 1, 7, 3, "m1", json.dumps(value) if value else "garbage"))
        return calls


TEXTS = {"json.dumps": "Serialize obj.", "a": "one", "b": "two", "c": "three", "d": "four"}


def _llm_decision(client: RawClient) -> FilterDecision:
    (decision,) = LLMForwardRagJudge(client, TEXTS, random_contexts=2, seed=5).decide_all([("q1", "How do I write JSON?", ["json.dumps"])])
    return decision


def test_llm_defaults():
    client = RawClient(None, None)
    judge = LLMForwardRagJudge(client, TEXTS)
    assert (judge.random_contexts, judge.seed, judge.name) == (3, 13, "llm:m1")
    assert LLMRetrievalJudge(client).pass_at == 0.7


def test_parsed_answers_drop_their_raw_text():
    client = RawClient({"answerable": True, "answer": "json.dumps(obj)"}, {"answerable": False})
    decision = _llm_decision(client)
    assert decision.details["sufficiency"] == {
        "value": {"answerable": True, "answer": "json.dumps(obj)"},
        "error": None,
        "cached": False,
        "raw": None,
    }
    assert decision.reason == "kept: answered from the gold context ('json.dumps(obj)'), not from random contexts"
    assert "Question: How do I write JSON?" in client.prompts[0] and "Serialize obj." in client.prompts[0]


def test_reasons_when_the_model_leaves_fields_out():
    kept = _llm_decision(RawClient({"answerable": True}, {"answerable": False}))
    assert kept.reason == "kept: answered from the gold context (''), not from random contexts"
    insufficient = _llm_decision(RawClient({"answerable": False}, {"answerable": False}))
    assert insufficient.reason == "dropped (insufficient): the model could not answer from the gold context: "
    leaked = _llm_decision(RawClient({"answerable": True}, {"answerable": True}))
    assert leaked.reason == "dropped (not necessary): random contexts also answered it: "


def test_an_undecided_pair_names_the_judge():
    decision = _llm_decision(RawClient(None, {"answerable": False}, error="timeout"))
    assert (decision.keep, decision.undecided, decision.judge, decision.reason) == (False, True, "llm:m1", "undecided: timeout")
    assert decision.details["sufficiency"]["raw"] == "garbage"


# --------------------------------------------------------------------------------------------------
# The filter's decision functions
# --------------------------------------------------------------------------------------------------

RESOLVED = [("q1", "alpha beta", ["d1"]), ("q2", "delta", ["d3"])]


def test_judge_pairs_passes_every_offline_setting():
    settings = FilterSettings(judge="offline_lexical", random_contexts=2, min_description_tokens=1, max_random_coverage=0.2, seed=9)
    judged = judge_pairs(RESOLVED, CORPUS, settings)
    expected = OfflineLexicalJudge(CORPUS, random_contexts=2, min_description_tokens=1, max_random_coverage=0.2, seed=9)
    assert judged.decisions == [expected.decide(q, text, golds) for q, text, golds in RESOLVED] and judged.warnings == []
    strict = judge_pairs(RESOLVED, CORPUS, FilterSettings(judge="offline_lexical", min_description_tokens=5))
    assert [d.keep for d in strict.decisions] == [False, False]  # 2 tokens each: fewer than 5


def test_judge_pairs_passes_the_llm_settings_and_no_warning():
    client = RawClient({"answerable": True}, {"answerable": False})
    judged = judge_pairs(RESOLVED, TEXTS | CORPUS, FilterSettings(judge="llm", random_contexts=2, seed=9), client)  # type: ignore[arg-type]
    assert judged.judge == "llm:m1" and judged.warnings == []
    assert [d.random_doc_ids for d in judged.decisions] == [random_documents(list(TEXTS | CORPUS), q, set(g), 2, 9) for q, _, g in RESOLVED]
    off = judge_pairs(RESOLVED, CORPUS, FilterSettings(judge="none"))
    assert off.judge == "none" and off.warnings == [] and [d.query_id for d in off.decisions] == ["q1", "q2"]


def test_judge_details_are_json_text():
    documents = [Document(k, v) for k, v in CORPUS.items()]
    negatives = HardNegatives(documents, NegativeSettings(per_query_siblings=0, per_query_bm25=0))
    unresolved = QAPair("q", "s", "api_understanding", "f", "?", [], "unresolved", "none")
    assert verified_row(unresolved, None, negatives)["judge_details"] == "{}"
    decision = FilterDecision("q", False, "x", "dropped", details={"where": Path("/tmp/a"), "n": 1})
    resolved = QAPair("q", "s", "api_understanding", "f", "?", ["d1"], "resolved", "exact")
    assert json.loads(verified_row(resolved, decision, negatives)["judge_details"]) == {"where": "/tmp/a", "n": 1}


def test_the_dropped_pairs_preview_shows_fifty():
    documents = [Document(k, v) for k, v in CORPUS.items()]
    pairs = [QAPair(f"q{i:02d}", "s", "api_understanding", "f", "?", [], "unresolved", "none") for i in range(60)]
    result = filter_pairs(pairs, documents, FilterSettings(judge="none"), NegativeSettings())
    preview = str(result.details["dropped_pairs"])
    assert "| q49 " in preview and "| q50 " not in preview and preview.endswith("_10 more rows_")
    assert isinstance(result.frame, pd.DataFrame) and result.summary["dropped"] == 60


def test_judge_pairs_passes_the_random_coverage_bound():
    """Query "alpha beta": alpha is in g and r1 only, beta nowhere; g and r1 both cover 0.26 of the query, so a bound of
    0.2 drops the pair as not necessary and the default 0.5 keeps it."""
    corpus = {"g": "alpha one", "r1": "alpha two", "r2": "three", "r3": "four", "r4": "five"}
    pairs = [("q1", "alpha beta", ["g"])]
    low = judge_pairs(pairs, corpus, FilterSettings(judge="offline_lexical", random_contexts=4, max_random_coverage=0.2))
    default = judge_pairs(pairs, corpus, FilterSettings(judge="offline_lexical", random_contexts=4))
    assert low.decisions[0].reason.startswith("dropped (not necessary)") and default.decisions[0].keep
