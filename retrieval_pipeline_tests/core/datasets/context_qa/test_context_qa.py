"""Tests for loading context-QA files: quirks cleaned and counted, rows rejected with reasons, documents."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.result_cache import RESULTS_FILE, ResultCache, using_result_cache
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.datasets import CASE_JSON_FIELDS, adapter_for
from retrieval_pipeline.core.datasets.context_qa import pairs as context_pairs
from retrieval_pipeline.core.datasets.context_qa.chunking import chunk_markdown
from retrieval_pipeline.core.datasets.context_qa.documents import load_documents, pydoc_topic_documents
from retrieval_pipeline.core.datasets.context_qa.pairs import CACHE_NAMESPACE, ContextMatch, ContextMatcher
from retrieval_pipeline.core.datasets.context_qa.reader import REPORT_KEYS, clean_parser_junk, load_context_qa
from retrieval_pipeline.core.datasets.context_qa.similarity import SimilaritySettings
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.core.registry import DatasetConfig

SAMPLE = Path(__file__).resolve().parents[4] / "data" / "samples" / "context_qa" / "qa_pairs.json"


def write_json(tmp_path: Path, rows: Any, name: str = "qa.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return path


def row(question: str, context: str, **extra: Any) -> dict[str, Any]:
    return {"question": question, "answer": f"answer to {question}", "context": context, **extra}


# --------------------------------------------------------------------------------------------------
# Parser junk
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cleaned", "replaced"),
    [
        ("[<RawText children='Suicide'>]", "Suicide", 1),
        ("- [<RawText children='Storms'>]\n- [<RawText children='Floods'>]", "- Storms\n- Floods", 2),
        ("[<Strong children=[<RawText children='bold'>]>, <RawText children=' rest'>]", "bold rest", 1),
        ('It is <RawText children="the insurer\'s"> duty', "It is the insurer's duty", 1),
        ("[see <RawText children='X'> here]", "[see X here]", 1),
        ("def <lambda>(parameters): [Insert Jurisdiction]", "def <lambda>(parameters): [Insert Jurisdiction]", 0),
    ],
)
def test_clean_parser_junk(raw: str, cleaned: str, replaced: int) -> None:
    assert clean_parser_junk(raw) == (cleaned, replaced, 0)


def test_unparsable_junk_is_kept_and_counted() -> None:
    assert clean_parser_junk("[<RawText children='unterminated]") == ("[<RawText children='unterminated]", 0, 1)


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def test_cases_carry_context_answer_and_every_other_field(tmp_path: Path) -> None:
    path = write_json(tmp_path, [row("What is covered?", "  Fire is covered.\n", qa_pair_id="QA_1", chunk_id=3)])
    loaded = load_context_qa(path)
    (case,) = loaded.cases
    assert (case.case_id, case.benchmark_type, case.query, case.index, case.suite) == (
        "qa_0000",
        "context_qa",
        "What is covered?",
        0,
        tmp_path.name,
    )
    assert case.correct_answer == "answer to What is covered?"
    assert case.extra["expected_context"] == "Fire is covered."
    assert case.extra["raw_context"] == "  Fire is covered.\n"
    assert case.extra["answer"] == "answer to What is covered?"
    assert case.extra["cleaning"] == ["context: stripped surrounding whitespace"]
    assert (case.extra["qa_pair_id"], case.extra["chunk_id"]) == ("QA_1", 3)
    assert (loaded.total, loaded.rejects) == (1, [])


def test_answer_is_read_from_any_answer_field(tmp_path: Path) -> None:
    rows = [{"question": "a?", "context": "x", "ground_truth": "gt"}, {"question": "b?", "context": "y"}]
    loaded = load_context_qa(write_json(tmp_path, rows))
    assert [c.extra["answer"] for c in loaded.cases] == ["gt", None]
    assert loaded.report["no_answer"] == 1


def test_junk_is_cleaned_and_reported(tmp_path: Path) -> None:
    raw = "- [<RawText children='Suicide'>]\n- [<RawText children='War'>]"
    loaded = load_context_qa(write_json(tmp_path, [row("Exclusions?", raw)]))
    (case,) = loaded.cases
    assert case.extra["expected_context"] == "- Suicide\n- War"
    assert case.extra["raw_context"] == raw
    assert case.extra["cleaning"] == ["context: replaced 2 parser-junk fragment(s) like [<RawText children='X'>] by X"]
    assert (loaded.report["junk_cleaned_rows"], loaded.report["junk_fragments"]) == (1, 2)


def test_repeated_question_keeps_both_with_distinct_ids(tmp_path: Path) -> None:
    rows = [row("Purpose?", "First context."), row("Other?", "x"), row("Purpose? ", "Second context.")]
    loaded = load_context_qa(write_json(tmp_path, rows))
    assert [c.case_id for c in loaded.cases] == ["qa_0000", "qa_0001", "qa_0002"]
    assert loaded.cases[2].extra["repeat_of"] == "qa_0000"
    assert "repeat_of" not in loaded.cases[0].extra
    assert (loaded.report["repeated_questions"], loaded.report["repeated_question_strings"]) == (1, 1)


def test_exact_duplicate_pair_is_rejected_naming_the_first(tmp_path: Path) -> None:
    rows = [row("Purpose?", "Same  context."), row("Purpose?", "Same context.\n")]
    path = write_json(tmp_path, rows)
    loaded = load_context_qa(path)
    assert [c.case_id for c in loaded.cases] == ["qa_0000"]
    (reject,) = loaded.rejects
    assert (reject.case_id, reject.index, reject.source_file) == ("qa_0001", 1, str(path))
    assert "exact duplicate of qa_0000" in reject.reason and str(path) in reject.reason
    assert loaded.report["exact_duplicates"] == 1 and loaded.report["repeated_questions"] == 0


@pytest.mark.parametrize(
    ("bad", "kind", "message"),
    [
        ({"question": "  ", "context": "c"}, "empty_question", "row 1: empty 'question'"),
        ({"question": "q", "context": ""}, "empty_context", "row 1: empty 'context'"),
        ({"question": "q"}, "empty_context", "row 1: missing 'context'"),
        ({"question": "q", "context": 7}, "empty_context", "'context' must be a string"),
        ({"question": "q", "context": "[<RawText children=''>]"}, "empty_context", "empty 'context' after removing parser junk"),
        (["not", "an", "object"], "not_an_object", "row 1: expected a JSON object"),
    ],
)
def test_bad_rows_are_rejected_naming_file_and_row(tmp_path: Path, bad: Any, kind: str, message: str) -> None:
    path = write_json(tmp_path, [row("ok?", "fine"), bad])
    loaded = load_context_qa(path)
    assert len(loaded.cases) == 1 and loaded.total == 2
    (reject,) = loaded.rejects
    assert reject.index == 1 and message in reject.reason and str(path) in reject.reason
    assert loaded.report[kind] == 1 and loaded.report["rejected"] == 1


def test_report_has_every_counter(tmp_path: Path) -> None:
    loaded = load_context_qa(write_json(tmp_path, []))
    assert list(loaded.report) == list(REPORT_KEYS) and set(loaded.report.values()) == {0}


def test_malformed_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"question": "q",\n   "context": }\n]', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.json.*malformed JSON at line 3, column 15") as info:
        load_context_qa(path)
    assert info.value.path == str(path)


@pytest.mark.parametrize("content", ['{"qa": []}', None])
def test_not_a_list_or_missing_file_is_an_input_error(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "qa.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match="qa.json"):
        load_context_qa(path)


# --------------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------------


def test_load_documents_uses_file_stems(tmp_path: Path) -> None:
    (tmp_path / "auto.md").write_text("# Auto\n", encoding="utf-8")
    (tmp_path / "home.md").write_text("# Home\n", encoding="utf-8")
    assert load_documents([tmp_path / "home.md", tmp_path / "auto.md"]) == [("home", "# Home\n"), ("auto", "# Auto\n")]


def test_load_documents_rejects_clashing_stems_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "auto.md").write_text("x", encoding="utf-8")
    (tmp_path / "auto.md").write_text("y", encoding="utf-8")
    with pytest.raises(InputError, match="already used"):
        load_documents([tmp_path / "auto.md", tmp_path / "a" / "auto.md"])
    with pytest.raises(InputError, match="missing.md"):
        load_documents([tmp_path / "missing.md"])


def test_pydoc_topic_documents_are_markdown_with_headings() -> None:
    ((topic, text),) = pydoc_topic_documents(["assert"])
    assert topic == "assert"
    assert text.startswith('# assert\n\n## The "assert" statement\n\nAssert statements are')
    ((_, try_text),) = pydoc_topic_documents(["try"])
    assert '\n### "except" clause\n' in try_text
    assert len(pydoc_topic_documents(None)) > 50
    with pytest.raises(ValueError, match="no-such-topic"):
        pydoc_topic_documents(["no-such-topic"])


# --------------------------------------------------------------------------------------------------
# The embedded sample and the real data
# --------------------------------------------------------------------------------------------------


def test_embedded_sample_exercises_the_quirks() -> None:
    loaded = load_context_qa(SAMPLE)
    assert (loaded.total, len(loaded.cases), loaded.rejects) == (34, 34, [])
    assert loaded.report["repeated_questions"] == 1 and loaded.report["junk_cleaned_rows"] == 1
    topics = sorted({case.extra["source_document"] for case in loaded.cases})
    assert topics == ["assert", "for", "global", "import", "lambda", "raise", "try", "with"]
    assert all("RawText" not in case.extra["expected_context"] for case in loaded.cases)


@pytest.mark.integration
def test_sample_mirrors_the_insurance_field_layout(shared_data: Path) -> None:
    insurance = json.loads((shared_data / "insurance" / "filtered_qa_pairs.json").read_text(encoding="utf-8"))
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    assert set().union(*map(set, sample)) == set().union(*map(set, insurance))


@pytest.mark.integration
def test_insurance_quirks_are_cleaned_and_counted(shared_data: Path) -> None:
    path = shared_data / "insurance" / "filtered_qa_pairs.json"
    raw_rows = json.loads(path.read_text(encoding="utf-8"))
    loaded = load_context_qa(path)
    assert loaded.total == len(raw_rows) and len(loaded.cases) + len(loaded.rejects) == loaded.total
    assert len({case.case_id for case in loaded.cases}) == len(loaded.cases)
    junk_rows = sum("RawText" in r["context"] for r in raw_rows)
    assert junk_rows > 0 and loaded.report["junk_cleaned_rows"] == junk_rows
    assert all("RawText" not in case.extra["expected_context"] for case in loaded.cases)
    counts = Counter(" ".join(r["question"].split()) for r in raw_rows)
    assert loaded.report["repeated_questions"] == sum(n - 1 for n in counts.values()) > 0
    assert loaded.report["repeated_question_strings"] == sum(n > 1 for n in counts.values())


# --------------------------------------------------------------------------------------------------
# Context matching, and its result cache
# --------------------------------------------------------------------------------------------------

RAW = SimilaritySettings(normalise=False)
FAKE_CHUNKS = [Document("a", "abcd"), Document("b", "wxyz"), Document("c", "abxy")]


def context_case(expected: str, index: int = 0) -> Case:
    return Case(f"qa_{index:04d}", "qa", "context_qa", "qa.json", index, f"question {index}?", extra={"expected_context": expected})


def sample_cases_and_chunks() -> tuple[list[Case], list[Document]]:
    """The embedded sample against the pydoc topics it cites, chunked as the registry does (400/100)."""
    cases = load_context_qa(SAMPLE).cases
    topics = sorted({case.extra["source_document"] for case in cases})
    return cases, [c for topic, text in pydoc_topic_documents(topics) for c in chunk_markdown(topic, text, 400, 100)]


def test_matches_and_best_are_derived_by_hand_on_a_fake_corpus() -> None:
    matcher = ContextMatcher(FAKE_CHUNKS, RAW)
    # ratio = 2M / (la + lb): "abcd" vs "abcd" 8/8, vs "abxy" 4/8, vs "wxyz" 0/8
    assert matcher.compute("abcd") == ContextMatch((("a", 1.0), ("c", 0.5)), None)
    # "zzzz": only "wxyz" shares a character, 2*1/8 = 0.25; nothing reaches 0.5, so the best is reported
    assert matcher.compute("zzzz") == ContextMatch((), ("b", 0.25))
    pair = matcher.pair(context_case("zzzz", 4))
    assert (pair.status, pair.gold_doc_ids, pair.evidence["best"]) == ("unresolved", [], {"chunk": "b", "ratio": 0.25})
    assert pair.warnings == ["qa.json row 5 (qa_0004): the expected context matches no chunk at threshold 0.5 (best ratio 0.250 in b)"]


ANSWER = "The Insured must notify the Insurer within twenty-four hours of any incident."
CONTEXT = (
    "Reporting. " + ANSWER + " Claims may be reported through the customer service hotline, the online portal or an "
    "authorised agent. Every claim must be accompanied by a completed form, a written account of the incident with its "
    "date, time and place, photographs of the damage and, where applicable, a police report."
)


def test_a_chunk_holding_the_answer_outside_the_gold_is_reported_not_made_gold() -> None:
    chunks = [
        Document("x#0", CONTEXT + " Forms are signed and dated."),
        Document("x#1", "Intro.\n\n**the insured MUST notify** the insurer within twenty-four hours of any incident.  "),
        Document("x#2", "Unrelated text about premiums and grace periods that shares no sentence with the answer."),
    ]
    case = dataclasses.replace(context_case(CONTEXT, 2), extra={"expected_context": CONTEXT, "answer": ANSWER})
    pair = ContextMatcher(chunks, SimilaritySettings()).pair(case)
    # x#1 holds the answer (markdown, case and whitespace normalised away) but too little of the context to be gold
    assert pair.gold_doc_ids == ["x#0"] and pair.evidence["answer_outside_gold"] == ["x#1"]
    assert pair.warnings == [
        "qa.json row 3 (qa_0002): the answer is verbatim in x#1, which is not gold (too little of the expected context "
        "for similarity >= 0.5); retrieving it counts as retrieving nothing relevant"
    ]
    short = dataclasses.replace(case, extra={"expected_context": CONTEXT, "answer": "twenty-four hours"})
    assert ContextMatcher(chunks, SimilaritySettings()).pair(short).warnings == []  # a short answer is in too many chunks


@pytest.mark.integration
def test_insurance_reports_the_chunk_that_holds_an_answer_outside_its_gold(shared_data: Path) -> None:
    config = DatasetConfig(
        name="insurance",
        kind="context_qa",
        context_qa={
            "qa": str(shared_data / "insurance" / "filtered_qa_pairs.json"),
            "documents": [str(shared_data / "insurance" / "documents" / f"{d}.md") for d in ("auto", "home")],
            "chunking": {"size": 400, "overlap": 100},
        },
    )
    adapter = adapter_for(config)
    documents = list(adapter.build_corpus(config).documents)
    builder = adapter.pair_builder(config, documents)
    assert builder is not None
    pairs = [builder(c) for c in adapter.load_cases(config).cases]
    flagged = {p.query_id: p.evidence["answer_outside_gold"] for p in pairs if p.evidence.get("answer_outside_gold")}
    # qa_0000's answer is the first sentence of its 625-character context and opens home#5 (ratio below 0.5)
    assert flagged.get("qa_0000") == ["home#5"]
    assert adapter.pairs_report(pairs)["answer_outside_gold"] == len(flagged)


def test_cache_hit_returns_exactly_the_fresh_pairs_on_the_embedded_sample(tmp_path: Path) -> None:
    cases, chunks = sample_cases_and_chunks()
    fresh = [ContextMatcher(chunks, SimilaritySettings()).pair(c) for c in cases]
    assert {p.status for p in fresh} == {"resolved", "unresolved"}  # both branches are exercised
    for run, (hits, misses) in enumerate([(0, len(cases)), (len(cases), 0)]):
        with ResultCache(tmp_path / RESULTS_FILE) as cache:  # a new opener per run, as a new process would be
            matcher = ContextMatcher(chunks, SimilaritySettings(), cache)
            assert [matcher.pair(c) for c in cases] == fresh, f"run {run}"
            assert (matcher.hits, matcher.misses) == (hits, misses)
    assert matcher.index._texts is None  # the warm run never prepared the corpus


def _changed_chunk_text(chunks: list[Document]) -> list[Document]:
    return [dataclasses.replace(chunks[0], text=chunks[0].text + " "), *chunks[1:]]


def _changed_chunk_id(chunks: list[Document]) -> list[Document]:
    return [dataclasses.replace(chunks[0], doc_id="a2"), *chunks[1:]]


CHANGES: dict[str, tuple[Callable[[list[Document]], list[Document]], SimilaritySettings, str]] = {
    "a chunk's text": (_changed_chunk_text, RAW, "abcd"),
    "a chunk's id": (_changed_chunk_id, RAW, "abcd"),
    "a chunk added": (lambda c: [*c, Document("d", "abcd")], RAW, "abcd"),
    "the chunk order": (lambda c: c[::-1], RAW, "abcd"),
    "the expected context": (list, RAW, "abce"),
    "the threshold": (list, dataclasses.replace(RAW, threshold=0.6), "abcd"),
    "autojunk": (list, dataclasses.replace(RAW, autojunk=True), "abcd"),
    "normalise": (list, SimilaritySettings(), "abcd"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_any_change_of_input_or_setting_misses(tmp_path: Path, change: str) -> None:
    edit, settings, expected = CHANGES[change]
    with ResultCache(tmp_path / RESULTS_FILE) as cache:
        ContextMatcher(FAKE_CHUNKS, RAW, cache).match("abcd")
        changed = ContextMatcher(edit(list(FAKE_CHUNKS)), settings, cache)
        assert changed.match(expected) == ContextMatcher(edit(list(FAKE_CHUNKS)), settings).compute(expected)
        assert (changed.hits, changed.misses) == (0, 1)
        again = ContextMatcher(FAKE_CHUNKS, RAW, cache)
        again.match("abcd")
        assert (again.hits, again.misses) == (1, 0)  # the control: unchanged inputs hit


def test_a_new_algorithm_version_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ResultCache(tmp_path / RESULTS_FILE) as cache:
        ContextMatcher(FAKE_CHUNKS, RAW, cache).match("abcd")
        monkeypatch.setattr(context_pairs, "MATCH_VERSION", context_pairs.MATCH_VERSION + "-next")
        bumped = ContextMatcher(FAKE_CHUNKS, RAW, cache)
        bumped.match("abcd")
        assert (bumped.hits, bumped.misses) == (0, 1)


def _rewrite_entries(path: Path, payload: str, checksum: str | None = None) -> None:
    """Replace every stored match's payload (and, when given, its checksum) behind the cache's back."""
    conn = sqlite3.connect(path)
    with conn:
        sql, args = (
            ("UPDATE results SET payload = ?", (payload,))
            if checksum is None
            else ("UPDATE results SET payload = ?, sha256 = ?", (payload, checksum))
        )
        assert conn.execute(sql + " WHERE namespace = ?", (*args, CACHE_NAMESPACE)).rowcount == 1
    conn.close()


@pytest.mark.parametrize(
    ("payload", "fix_checksum", "reason"),
    [
        ('{"best":null,"matches":[["b",1.0]]}', False, "checksum"),  # a plausible wrong answer, checksum not updated
        ('{"best":null,"matches":[["a",1.5]]}', True, "ratio must be a number in"),  # sound checksum, impossible ratio
        ('{"best":["b",0.25],"matches":[["a",1.0]]}', True, "either matched chunks or a best chunk"),
        ('{"matches":[]}', True, "KeyError"),
        ('{"best":null,"matches":[[1,1.0]]}', True, "doc id must be a string"),
    ],
)
def test_a_corrupt_entry_is_recomputed_not_trusted(tmp_path: Path, payload: str, fix_checksum: bool, reason: str) -> None:
    path = tmp_path / RESULTS_FILE
    with ResultCache(path) as cache:
        ContextMatcher(FAKE_CHUNKS, RAW, cache).match("abcd")
    _rewrite_entries(path, payload, hashlib.sha256(payload.encode()).hexdigest() if fix_checksum else None)
    with ResultCache(path) as cache:
        matcher = ContextMatcher(FAKE_CHUNKS, RAW, cache)
        with pytest.warns(CorruptFileWarning, match=reason):
            assert matcher.match("abcd") == ContextMatch((("a", 1.0), ("c", 0.5)), None)
        assert (matcher.hits, matcher.misses) == (0, 1)
        assert ContextMatcher(FAKE_CHUNKS, RAW, cache).match("abcd") == ContextMatch((("a", 1.0), ("c", 0.5)), None)  # repaired


def test_the_pair_builder_uses_the_active_result_cache(tmp_path: Path) -> None:
    config = DatasetConfig(
        name="c", kind="context_qa", context_qa={"qa": "qa.json", "pydoc_topics": ["*"], "similarity": {"normalise": False}}
    )
    case = context_case("abcd")
    pair = adapter_for(config).pair_builder(config, FAKE_CHUNKS)(case)  # no active cache: computed, nothing written
    assert pair.gold_doc_ids == ["a", "c"] and not (tmp_path / RESULTS_FILE).exists()
    for hits, misses in [(0, 1), (1, 0)]:
        with using_result_cache(tmp_path) as cache:
            builder = adapter_for(config).pair_builder(config, FAKE_CHUNKS)
            assert builder(case) == pair
            assert (builder.__self__.hits, builder.__self__.misses, cache.count(CACHE_NAMESPACE)) == (hits, misses, 1)


def test_context_columns_with_the_active_cache_equal_those_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluation's similarities of retrieved chunks: read from the cache on a re-run, the columns unchanged."""
    from retrieval_pipeline.core.common.frames import to_frame
    from retrieval_pipeline.core.datasets.context_qa import similarity as similarity_module
    from retrieval_pipeline.core.datasets.context_qa.similarity import SIMILARITY_NAMESPACE

    config = DatasetConfig(name="c", kind="context_qa", context_qa={"qa": "qa.json", "pydoc_topics": ["*"]})
    cases = [context_case("a for loop repeats", 0), context_case("the import statement loads", 1)]
    chunks = [Document("c1", "a for loop repeats a block"), Document("c2", "the import statement"), Document("c3", "lambda")]
    raw_cases, corpus = to_frame(cases, Case, CASE_JSON_FIELDS), to_frame(chunks, Document)
    run, qrels = (
        {"qa_0000": [("c2", 2.0), ("c1", 1.0)], "qa_0001": [("c2", 1.0), ("c3", 0.5)]},
        {"qa_0000": {"c1": 1}, "qa_0001": {"c2": 1}},
    )
    fresh = adapter_for(config).extra_query_columns(config, raw_cases, corpus, per_query_metrics)(run, qrels)
    for stored in (0, 4):  # cold: the 4 retrieved (context, chunk) pairs are computed and stored; warm: all read back
        monkeypatch.setattr(similarity_module, "_MEMO", {})  # a new process
        if stored:  # warm: computing any similarity would fail
            monkeypatch.setattr(similarity_module, "SequenceMatcher", None)
        with using_result_cache(tmp_path) as cache:
            assert cache.count() == stored
            columns = adapter_for(config).extra_query_columns(config, raw_cases, corpus, per_query_metrics)
            assert columns(run, qrels).equals(fresh)
            assert cache.count(SIMILARITY_NAMESPACE) == 4
