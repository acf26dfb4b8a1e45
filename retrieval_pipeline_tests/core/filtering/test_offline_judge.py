from __future__ import annotations

import pytest

from retrieval_pipeline.core.filtering.judges.offline import OfflineLexicalJudge

CORPUS = {
    "shutil.copy2": "copy2 shutil copy a file preserving metadata such as modification time and permission bits",
    "shutil.rmtree": "rmtree shutil delete an entire directory tree recursively including every file and subfolder",
    "json.dumps": "dumps json serialize an object to a JSON formatted string with optional indentation and sorting",
    "collections.Counter": "Counter collections dict subclass for counting hashable objects and finding the most common",
    "os.path.join": "join os path join one or more path components intelligently with the platform separator",
    "bare.name": "name",
}


def test_keeps_pair_even_without_word_overlap():
    """Developers' wording rarely repeats the docs; the offline judge must not require it."""
    judge = OfflineLexicalJudge(CORPUS, random_contexts=3, seed=1)
    d = judge.decide("q1", "tally how often each word shows up", ["collections.Counter"])
    assert d.keep and d.judge == "offline_lexical" and d.reason.startswith("kept")
    assert len(d.random_doc_ids) == 3 and "collections.Counter" not in d.random_doc_ids


def test_drops_gold_context_with_nothing_to_answer_from():
    corpus = {
        **CORPUS,
        "functools.cached_property": "cached_property functools.cached_property cached_property(func)",
        "uuid.uuid4": "uuid4 uuid.uuid4 uuid4() Generate a random UUID.",
    }
    judge = OfflineLexicalJudge(corpus, min_description_tokens=2)
    d = judge.decide("q2", "cache a computed attribute", ["functools.cached_property"])
    assert not d.keep and d.reason.startswith("dropped (insufficient)") and "has 1 distinct tokens beyond its name" in d.reason
    assert judge.decide("q3", "I need a random unique id", ["uuid.uuid4"]).keep


def test_drops_generic_question_that_random_contexts_answer_as_well():
    corpus = {k: "alpha beta gamma delta epsilon zeta eta theta " + k for k in "abcdef"}
    judge = OfflineLexicalJudge(corpus, random_contexts=2, max_random_coverage=0.5)
    d = judge.decide("q", "alpha beta", ["a"])
    assert not d.keep and d.reason.startswith("dropped (not necessary)")


def test_specific_question_with_high_random_overlap_but_better_gold_is_kept():
    corpus = {k: "alpha beta gamma delta epsilon zeta eta theta " + k for k in "abcdef"}
    corpus["a"] += " omega"
    judge = OfflineLexicalJudge(corpus, random_contexts=2, max_random_coverage=0.5)
    assert judge.decide("q", "alpha beta omega", ["a"]).keep  # only the gold has the specific term


def test_decisions_are_deterministic_per_query_id():
    first = OfflineLexicalJudge(CORPUS, random_contexts=2, seed=7).decide("q1", "count words", ["collections.Counter"])
    again = OfflineLexicalJudge(CORPUS, random_contexts=2, seed=7).decide("q1", "count words", ["collections.Counter"])
    assert first == again


def test_gold_outside_corpus_is_dropped_and_empty_corpus_rejected():
    judge = OfflineLexicalJudge(CORPUS)
    assert not judge.decide("q", "anything", ["not.there"]).keep
    with pytest.raises(ValueError):
        OfflineLexicalJudge({})
