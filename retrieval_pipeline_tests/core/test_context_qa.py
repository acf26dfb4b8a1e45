"""Tests for loading context-QA files: quirks cleaned and counted, rows rejected with reasons, documents."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.sources.context_qa import (
    REPORT_KEYS,
    clean_parser_junk,
    load_context_qa,
    load_documents,
    pydoc_topic_documents,
)

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "context_qa" / "qa_pairs.json"


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
