"""Tests for loading BEIR directories: formats, every bad-input case, counts, and the real msmarco subset."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.datasets.beir.reader import BeirLoad, load_beir

CORPUS = [
    {"_id": "d1", "title": "Paris", "text": "Capital of France.", "metadata": {"url": "u1"}},
    {"_id": "d2", "title": "", "text": "Berlin is in Germany."},
    {"_id": "d3", "text": "No title key at all."},
]
QUERIES = [
    {"_id": "q1", "text": "capital of france", "metadata": {"lang": "en"}},
    {"_id": "q2", "text": "where is berlin"},
    {"_id": "q3", "text": "never judged"},
]
QRELS_ROWS = ["q1\td1\t2", "q1\td2\t0", "q2\td2\t3", "q2\td3\t1"]
BEIR_HEADER = "query-id\tcorpus-id\tscore"


def jsonl(rows: list[object]) -> list[str]:
    return [json.dumps(row) for row in rows]


def write_beir(
    tmp_path: Path,
    *,
    corpus: list[str] | None = None,
    queries: list[str] | None = None,
    qrels: list[str] | None = None,
    name: str = "toy",
) -> Path:
    """Write a BEIR directory from raw lines (defaults: the small valid set above, no qrels header)."""
    root = tmp_path / name
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(jsonl(CORPUS) if corpus is None else corpus) + "\n")
    (root / "queries.jsonl").write_text("\n".join(jsonl(QUERIES) if queries is None else queries) + "\n")
    (root / "qrels" / "test.tsv").write_text("\n".join(QRELS_ROWS if qrels is None else qrels) + "\n")
    return root


def assert_counts_add_up(load: BeirLoad) -> None:
    """Every row is accounted for exactly once."""
    r = load.report
    assert r["corpus_lines"] == r["documents"] + r["corpus_rejected"] == len(load.documents) + r["corpus_rejected"]
    assert r["query_lines"] == r["queries"] + r["queries_rejected"]
    assert r["queries"] == r["cases"] + r["queries_without_qrels"] and r["cases"] == len(load.cases)
    assert r["qrels_lines"] == r["qrels_kept"] + r["qrels_rejected"]
    assert r["qrels_kept"] == sum(len(judged) for judged in load.qrels.values())
    assert r["qrels_rejected"] == sum(r["qrels_rejected_by_reason"].values())
    assert len(load.rejects) == r["corpus_rejected"] + r["queries_rejected"] + r["qrels_rejected"]
    assert list(load.qrels) == [case.case_id for case in load.cases]


def only_reject(load: BeirLoad, path: Path, line: int) -> str:
    """The single reject's reason, checked to name ``path`` and ``line``."""
    assert_counts_add_up(load)
    assert len(load.rejects) == 1, load.rejects
    reject = load.rejects[0]
    assert reject.reason.startswith(f"file {path}, line {line}: "), reject.reason
    assert reject.source_file == str(path) and reject.index == line - 1
    return reject.reason


# --------------------------------------------------------------------------------------------------
# Valid input
# --------------------------------------------------------------------------------------------------


def test_valid_directory_maps_documents_cases_and_graded_qrels(tmp_path: Path) -> None:
    root = write_beir(tmp_path)
    load = load_beir(root)
    assert_counts_add_up(load)
    assert load.rejects == []
    d1, d2, d3 = load.documents
    assert (d1.doc_id, d1.title, d1.text) == ("d1", "Paris", "Paris\nCapital of France.")
    assert (d2.text, d3.text, d3.title) == ("Berlin is in Germany.", "No title key at all.", "")
    assert {(d.kind, d.source) for d in load.documents} == {("passage", "beir:toy")}
    assert load.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 3, "d3": 1}}  # grade 0 kept as judged
    q1, q2 = load.cases
    assert (q1.case_id, q1.suite, q1.benchmark_type, q1.index) == ("q1", "toy", "beir", 0)
    assert q1.query == "capital of france"
    assert q1.source_file == str(root / "queries.jsonl")
    assert q1.extra == {"qrels": {"d1": 2, "d2": 0}, "metadata": {"lang": "en"}}
    assert q2.extra == {"qrels": {"d2": 3, "d3": 1}}
    report = load.report
    assert (report["queries_without_qrels"], report["qrels_header"], report["qrels_columns"]) == (1, None, 3)
    assert report["qrels_grades"] == {0: 1, 1: 1, 3: 1, 2: 1}
    assert report["cases_without_relevant"] == 0


def test_beir_header_line_is_detected_and_skipped(tmp_path: Path) -> None:
    plain = load_beir(write_beir(tmp_path / "a"))
    with_header = load_beir(write_beir(tmp_path / "b", qrels=[BEIR_HEADER, *QRELS_ROWS]))
    assert_counts_add_up(with_header)
    assert with_header.qrels == plain.qrels and with_header.rejects == []
    assert with_header.report["qrels_header"] == ["query-id", "corpus-id", "score"]
    assert with_header.report["qrels_lines"] == len(QRELS_ROWS)


def test_first_line_with_a_numeric_bad_grade_is_data_not_header(tmp_path: Path) -> None:
    root = write_beir(tmp_path, qrels=["q1\td3\t1.5", *QRELS_ROWS])
    load = load_beir(root)
    assert "non-integer grade: '1.5'" in only_reject(load, root / "qrels" / "test.tsv", 1)
    assert load.report["qrels_header"] is None


def test_integer_ids_in_json_become_strings(tmp_path: Path) -> None:
    corpus, queries = jsonl([{"_id": 7, "text": "seven"}]), jsonl([{"_id": 1, "text": "q"}])
    load = load_beir(write_beir(tmp_path, corpus=corpus, queries=queries, qrels=["1\t7\t1"]))
    assert load.rejects == [] and load.qrels == {"1": {"7": 1}} and load.documents[0].doc_id == "7"


def test_trec_style_four_column_qrels_with_spaces(tmp_path: Path) -> None:
    rows = [f"{q} 0 {d} {g}" for q, d, g in (line.split("\t") for line in QRELS_ROWS)]
    load = load_beir(write_beir(tmp_path, qrels=rows))
    assert_counts_add_up(load)
    assert load.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 3, "d3": 1}}
    assert load.report["qrels_columns"] == 4


def test_blank_lines_and_bom_are_tolerated(tmp_path: Path) -> None:
    root = write_beir(tmp_path, qrels=["", *QRELS_ROWS, "  "])
    corpus = root / "corpus.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + corpus.read_bytes() + b"\n\n")
    load = load_beir(root)
    assert_counts_add_up(load)
    assert load.rejects == [] and len(load.documents) == 3 and load.report["corpus_lines"] == 3


def test_query_whose_only_judgements_are_grade_zero_is_a_case_without_relevant(tmp_path: Path) -> None:
    load = load_beir(write_beir(tmp_path, qrels=["q3\td1\t0"]))
    assert [case.case_id for case in load.cases] == ["q3"]
    assert load.report["cases_without_relevant"] == 1 and load.report["queries_without_qrels"] == 2


def test_other_split_is_read_from_its_own_file(tmp_path: Path) -> None:
    root = write_beir(tmp_path)
    (root / "qrels" / "dev.tsv").write_text("q3\td3\t1\n")
    assert load_beir(root, split="dev").qrels == {"q3": {"d3": 1}}


# --------------------------------------------------------------------------------------------------
# Bad input that stops the load
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("file_name", ["corpus.jsonl", "queries.jsonl"])
def test_malformed_json_line_raises_naming_file_and_line(tmp_path: Path, file_name: str) -> None:
    rows = jsonl(CORPUS if file_name == "corpus.jsonl" else QUERIES)
    rows.insert(1, '{"_id": "broken", "text": ')
    key = "corpus" if file_name == "corpus.jsonl" else "queries"
    root = write_beir(tmp_path, **{key: rows})
    with pytest.raises(InputError, match=r"line 2: invalid JSON") as caught:
        load_beir(root)
    assert caught.value.path == str(root / file_name)
    assert str(root / file_name) in str(caught.value)


def test_invalid_utf8_raises_naming_line(tmp_path: Path) -> None:
    root = write_beir(tmp_path)
    (root / "queries.jsonl").write_bytes(b'{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": "\xff"}\n')
    with pytest.raises(InputError, match=r"line 2: not valid UTF-8"):
        load_beir(root)


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file_raises_naming_it(tmp_path: Path, missing: str) -> None:
    root = write_beir(tmp_path)
    (root / missing).unlink()
    with pytest.raises(InputError, match="BEIR file missing") as caught:
        load_beir(root)
    assert caught.value.path == str(root / missing)


def test_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="BEIR directory not found"):
        load_beir(tmp_path / "nope")


# --------------------------------------------------------------------------------------------------
# Row-level rejects (each names file:line)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"title": "t", "text": "no id"}, "missing or empty '_id'"),
        ({"_id": "", "text": "empty id"}, "missing or empty '_id'"),
        ({"_id": ["d9"], "text": "list id"}, "missing or empty '_id'"),
        (["not", "an", "object"], "expected a JSON object, got list"),
        ({"_id": "d 9", "text": "space"}, "contains whitespace"),
        ({"_id": "d9", "title": "", "text": "  "}, "empty 'title' and 'text'"),
        ({"_id": "d9", "text": 5}, "'text' must be a string"),
    ],
)
def test_bad_corpus_row_is_rejected_with_file_and_line(tmp_path: Path, row: object, message: str) -> None:
    root = write_beir(tmp_path, corpus=jsonl([*CORPUS, row]))
    load = load_beir(root)
    assert message in only_reject(load, root / "corpus.jsonl", 4)
    assert len(load.documents) == 3


def test_duplicate_doc_id_rejects_the_later_row(tmp_path: Path) -> None:
    root = write_beir(tmp_path, corpus=jsonl([*CORPUS, {"_id": "d1", "text": "second copy"}]))
    load = load_beir(root)
    reason = only_reject(load, root / "corpus.jsonl", 4)
    assert "duplicate '_id' 'd1' (first seen at line 1)" in reason
    assert load.documents[0].text == "Paris\nCapital of France."


def test_duplicate_query_id_rejects_the_later_row(tmp_path: Path) -> None:
    root = write_beir(tmp_path, queries=jsonl([*QUERIES, {"_id": "q2", "text": "again"}]))
    load = load_beir(root)
    assert "duplicate '_id' 'q2' (first seen at line 2)" in only_reject(load, root / "queries.jsonl", 4)
    assert load.cases[1].query == "where is berlin"


@pytest.mark.parametrize(
    ("row", "message", "reason_key"),
    [
        ("q1\td3\t1.5", "non-integer grade: '1.5'", "non-integer grade"),
        ("q1\td3\trelevant", "non-integer grade: 'relevant'", "non-integer grade"),
        ("q1\td3", "wrong column count: expected 3 (query-id corpus-id score), got 2", "wrong column count"),
        ("q1\t0\td3\t1", "wrong column count: expected 3", "wrong column count"),
        ("q1\td404\t1", "unknown document: 'd404' is not in corpus.jsonl", "unknown document"),
        ("q404\td1\t1", "unknown query: 'q404' is not in queries.jsonl", "unknown query"),
        ("q1\td1\t3", "duplicate judgement: ('q1', 'd1') already judged (grade 2)", "duplicate judgement"),
        ("q1\t\t1", "empty id", "empty id"),
    ],
)
def test_bad_qrels_line_is_rejected_with_file_and_line(tmp_path: Path, row: str, message: str, reason_key: str) -> None:
    root = write_beir(tmp_path, qrels=[BEIR_HEADER, *QRELS_ROWS, row])
    load = load_beir(root)
    assert message in only_reject(load, root / "qrels" / "test.tsv", 6)  # header is line 1
    assert load.report["qrels_rejected_by_reason"] == {reason_key: 1}
    assert load.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 3, "d3": 1}}


def test_qrels_naming_a_rejected_document_says_where_it_was_rejected(tmp_path: Path) -> None:
    root = write_beir(tmp_path, corpus=jsonl([*CORPUS, {"_id": "d9"}]), qrels=[*QRELS_ROWS, "q1\td9\t1"])
    load = load_beir(root)
    assert_counts_add_up(load)
    reasons = [reject.reason for reject in load.rejects]
    qrels_file = root / "qrels" / "test.tsv"
    assert reasons[1] == f"file {qrels_file}, line 5: unknown document: 'd9' was rejected in corpus.jsonl (line 4)"


def test_many_bad_lines_still_add_up(tmp_path: Path) -> None:
    qrels = ["q1\td1\t2", "q1\td1\t2", "q1\tx\t1", "q9\td1\t1", "bad", "q2\td2\tx", "q2\td2\t1", "q3\td3\t0"]
    corpus = jsonl([*CORPUS, {"text": "no id"}, CORPUS[0]])
    root = write_beir(tmp_path, corpus=corpus, queries=jsonl([*QUERIES, {"_id": "q4"}]), qrels=qrels)
    load = load_beir(root)
    assert_counts_add_up(load)
    report = load.report
    assert (report["corpus_rejected"], report["queries_rejected"], report["qrels_rejected"]) == (2, 1, 5)
    assert (report["qrels_lines"], report["qrels_kept"], report["cases"]) == (8, 3, 3)
    assert load.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1}, "q3": {"d3": 0}}


# --------------------------------------------------------------------------------------------------
# The real msmarco subset
# --------------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_real_msmarco_subset_loads_cleanly(shared_data: Path) -> None:
    """5,000 passages, 50 queries; only 43 queries are judged in qrels/test.tsv (4,102 lines, grades 1..3)."""
    started = time.perf_counter()
    load = load_beir(shared_data / "beir" / "msmarco")
    seconds = time.perf_counter() - started
    assert_counts_add_up(load)
    assert load.rejects == []
    report = load.report
    counts = (report["documents"], report["queries"], report["cases"], report["queries_without_qrels"])
    assert counts == (5000, 50, 43, 7)
    assert (report["qrels_header"], report["qrels_columns"], report["qrels_lines"]) == (None, 3, 4102)
    assert set(report["qrels_grades"]) == {1, 2, 3}
    assert all(1 <= grade <= 3 for judged in load.qrels.values() for grade in judged.values())
    doc_ids = {doc.doc_id for doc in load.documents}
    assert all(doc_id in doc_ids for judged in load.qrels.values() for doc_id in judged)
    assert {doc.source for doc in load.documents} == {"beir:msmarco"}
    assert {case.suite for case in load.cases} == {"msmarco"}
    assert seconds < 5, f"load took {seconds:.2f}s"
