from __future__ import annotations

import pytest

from retrieval_pipeline.core.judges.offline import OfflineLexicalJudge

CORPUS = {
    "shutil.copy2": "copy2 shutil copy a file preserving metadata such as modification time",
    "shutil.rmtree": "rmtree shutil delete an entire directory tree recursively",
    "json.dumps": "dumps json serialize an object to a JSON formatted string",
    "collections.Counter": "Counter collections dict subclass for counting hashable objects",
    "os.path.join": "join os path join one or more path components",
}


def test_keeps_pair_whose_gold_covers_query():
    judge = OfflineLexicalJudge(CORPUS, random_contexts=3, min_sufficiency=0.2, seed=1)
    d = judge.decide("q1", "copy a file but keep its modification time", ["shutil.copy2"])
    assert d.keep and d.judge == "offline_lexical"
    assert d.sufficiency > d.best_random and "kept" in d.reason
    assert len(d.random_doc_ids) == 3 and "shutil.copy2" not in d.random_doc_ids


def test_drops_insufficient_gold_with_reason():
    judge = OfflineLexicalJudge(CORPUS, min_sufficiency=0.2)
    d = judge.decide("q2", "copy a file but keep its modification time", ["json.dumps"])
    assert not d.keep and d.reason.startswith("dropped (insufficient)")


def test_drops_when_random_context_answers_as_well():
    corpus = {"a": "alpha beta gamma", "b": "alpha beta gamma", "c": "alpha beta gamma"}
    judge = OfflineLexicalJudge(corpus, random_contexts=2, min_sufficiency=0.1)
    d = judge.decide("q", "alpha beta", ["a"])
    assert not d.keep and d.reason.startswith("dropped (not necessary)")


def test_decisions_are_deterministic_per_query_id():
    judge = OfflineLexicalJudge(CORPUS, random_contexts=2, seed=7)
    first = judge.decide("q1", "count words", ["collections.Counter"])
    again = OfflineLexicalJudge(CORPUS, random_contexts=2, seed=7).decide("q1", "count words", ["collections.Counter"])
    assert first == again


def test_gold_outside_corpus_is_dropped_and_empty_corpus_rejected():
    judge = OfflineLexicalJudge(CORPUS)
    assert not judge.decide("q", "anything", ["not.there"]).keep
    with pytest.raises(ValueError):
        OfflineLexicalJudge({})
