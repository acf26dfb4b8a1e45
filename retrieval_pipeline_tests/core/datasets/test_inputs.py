"""Unit tests of ``core/datasets/inputs.py``: corpus and cases of every kind, through the kind's adapter.

``dataset_inputs`` is what the ingest assets call: :func:`build_corpus` and :func:`load_cases` hand the dataset
to its kind's adapter, and :func:`documents_by_id` indexes a corpus. Each built-in kind is read here from a
small fake written in the test, and the expected cases, rejects and counts are derived by hand from it.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case, Document, Rejected
from retrieval_pipeline.core.datasets import CasesBuild, CorpusBuild, DatasetAdapter, adapters, register_adapter, unregister_adapter
from retrieval_pipeline.core.datasets import inputs as dataset_inputs
from retrieval_pipeline.core.registry import DatasetConfig


def config(kind: str, **blocks: Any) -> DatasetConfig:
    """A dataset config of ``kind`` with its blocks validated as the registry validates them."""
    return DatasetConfig.model_validate({"name": "fake", "kind": kind, **blocks})


# --------------------------------------------------------------------------------------------------
# Delegation


class SpyAdapter(DatasetAdapter):
    """Records the configs it is given and returns fixed builds."""

    kind = "spy_kind"
    blocks: dict[str, Any] = {}
    corpus = CorpusBuild([Document("d1", "text")], [], {"documents": 1}, "spy")
    cases = CasesBuild([Case("c1", "s", "api_understanding", "spy.yaml", 0, "q?")], [Rejected("spy.yaml", None, 1, "no id")], 2)

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def load_cases(self, config: Any) -> CasesBuild:
        self.seen.append(("cases", config))
        return self.cases

    def build_corpus(self, config: Any) -> CorpusBuild:
        self.seen.append(("corpus", config))
        return self.corpus


@pytest.fixture
def spy() -> Iterator[SpyAdapter]:
    register_adapter(SpyAdapter)
    yield adapters()["spy_kind"]  # type: ignore[misc]
    unregister_adapter("spy_kind")


def test_corpus_and_cases_come_from_the_adapter_of_the_configs_kind(spy: SpyAdapter) -> None:
    stub = SimpleNamespace(kind="spy_kind")
    assert dataset_inputs.build_corpus(stub) is SpyAdapter.corpus  # type: ignore[arg-type]
    assert dataset_inputs.load_cases(stub) is SpyAdapter.cases  # type: ignore[arg-type]
    assert spy.seen == [("corpus", stub), ("cases", stub)]


@pytest.mark.parametrize("call", [dataset_inputs.build_corpus, dataset_inputs.load_cases])
def test_an_unknown_kind_is_an_error_naming_the_known_ones(call: Any) -> None:
    with pytest.raises(ValueError, match=r"unknown dataset kind 'nope'; known: .*beir.*context_qa.*nq.*suite"):
        call(SimpleNamespace(kind="nope"))


def test_documents_by_id_indexes_a_corpus() -> None:
    a, b, c = Document("a", "first"), Document("b", "second"), Document("a", "a later document with the same id")
    assert dataset_inputs.documents_by_id([a, b]) == {"a": a, "b": b}
    assert dataset_inputs.documents_by_id([]) == {}
    # a repeated id: the later document wins, silently (the loaders reject or report duplicates before this)
    assert dataset_inputs.documents_by_id([a, b, c]) == {"a": c, "b": b}


# --------------------------------------------------------------------------------------------------
# suite

SUITE_A = """
benchmarks:
- id: api:dumps
  question: How do I turn a dict into a JSON string?
  benchmark_type: api_understanding
  answers: [{fully_qualified_class_name: [json.dumps]}]
- id: api:loads
  question: How do I parse a JSON string?
  benchmark_type: api_understanding
  answers: [{fully_qualified_class_name: [json.loads]}]
- question: a case without an id
  benchmark_type: api_understanding
  answers: [{fully_qualified_class_name: [json.dumps]}]
"""
SUITE_B = """
benchmarks:
- id: api:dumps
  question: The same id again, in another file
  benchmark_type: api_understanding
  answers: [{fully_qualified_class_name: [json.dump]}]
"""


def test_suite_cases_and_an_introspected_corpus(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SUITE_A, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(SUITE_B, encoding="utf-8")
    cfg = config("suite", suites=[str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")], corpus={"introspect_modules": ["json"]})
    cases = dataset_inputs.load_cases(cfg)
    # by hand: 4 rows read; the one without an id and the repeated id (second file) are rejected
    assert [c.case_id for c in cases.cases] == ["api:dumps", "api:loads"] and cases.total == 4
    assert [(Path(r.source_file).name, r.case_id) for r in cases.rejects] == [("a.yaml", None), ("b.yaml", "api:dumps")]
    assert "id" in cases.rejects[0].reason and f"already defined in {tmp_path / 'a.yaml'}" in cases.rejects[1].reason
    assert cases.cases[0].gold_fqns == ["json.dumps"] and cases.cases[0].query == "How do I turn a dict into a JSON string?"
    corpus = dataset_inputs.build_corpus(cfg)
    ids = {d.doc_id for d in corpus.documents}
    assert {"json", "json.dumps", "json.loads", "json.JSONDecoder"} <= ids and all(i == "json" or i.startswith("json.") for i in ids)
    assert corpus.source == "introspection of 1 modules" and corpus.rejects == []


def test_a_missing_suite_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    cfg = config("suite", suites=[str(missing)], corpus={"introspect_modules": ["json"]})
    with pytest.raises(InputError, match="nowhere.yaml"):
        dataset_inputs.load_cases(cfg)


# --------------------------------------------------------------------------------------------------
# nq

NQ_CSV = (
    "question,long_answer,short_answer\n"
    "who made python,Guido van Rossum created Python.,Guido van Rossum\n"
    ",An answer without a question.,x\n"
    'when was python first released,"Guido van Rossum  created\nPython.",1991\n'
)


def test_nq_cases_carry_their_gold_chunk_and_the_corpus_merges_equal_long_answers(tmp_path: Path) -> None:
    path = tmp_path / "nq.csv"
    path.write_text(NQ_CSV, encoding="utf-8")
    cfg = config("nq", nq={"csv": str(path)})
    cases = dataset_inputs.load_cases(cfg)
    # by hand: 3 data rows; row 3 (spreadsheet numbering) has no question; rows 2 and 4 give the same passage
    # once whitespace is folded, so both questions point at the one chunk nq_000000
    assert [c.case_id for c in cases.cases] == ["nq_q000000", "nq_q000002"] and cases.total == 3
    assert [c.extra["gold_chunk_id"] for c in cases.cases] == ["nq_000000", "nq_000000"]
    assert cases.cases[1].query == "when was python first released" and cases.cases[1].extra["short_answers"] == ["1991"]
    (reject,) = cases.rejects
    assert (reject.case_id, reject.index) == ("nq_q000001", 1) and reject.reason == f"file {path}, row 3: empty 'question'"
    corpus = dataset_inputs.build_corpus(cfg)
    assert [(d.doc_id, d.text) for d in corpus.documents] == [("nq_000000", "Guido van Rossum created Python.")]
    assert corpus.report == {"long_answers": 2, "chunks": 1, "merged_duplicates": 1} and corpus.source == str(path)


def test_nq_sample_size_reads_only_the_first_rows(tmp_path: Path) -> None:
    path = tmp_path / "nq.csv"
    path.write_text(NQ_CSV, encoding="utf-8")
    cases = dataset_inputs.load_cases(config("nq", nq={"csv": str(path), "sample_size": 1}))
    assert ([c.case_id for c in cases.cases], cases.rejects, cases.total) == (["nq_q000000"], [], 1)


def test_a_missing_nq_csv_is_an_error_naming_it(tmp_path: Path) -> None:
    cfg = config("nq", nq={"csv": str(tmp_path / "absent.csv")})
    for call in (dataset_inputs.load_cases, dataset_inputs.build_corpus):
        with pytest.raises(InputError, match="absent.csv"):
            call(cfg)


# --------------------------------------------------------------------------------------------------
# context_qa

POLICY = textwrap.dedent("""\
    # Policy

    ## Cover

    The insurer pays for fire damage to the house.

    ## Claims

    Report a claim within 24 hours of the loss.
""")
EMPTY_DOC = "# Only a heading\n\n## And another\n"


def test_context_qa_cases_and_a_chunked_corpus_with_empty_documents_rejected(tmp_path: Path) -> None:
    (tmp_path / "policy.md").write_text(POLICY, encoding="utf-8")
    (tmp_path / "empty.md").write_text(EMPTY_DOC, encoding="utf-8")
    rows = [
        {"question": "What does the insurer pay for?", "context": "The insurer pays for fire damage."},
        {"question": "", "context": "x"},
    ]
    (tmp_path / "qa.json").write_text(json.dumps(rows), encoding="utf-8")
    documents = [str(tmp_path / "policy.md"), str(tmp_path / "empty.md")]
    cfg = config(
        "context_qa", context_qa={"qa": str(tmp_path / "qa.json"), "documents": documents, "chunking": {"size": 200, "overlap": 20}}
    )
    cases = dataset_inputs.load_cases(cfg)
    assert [c.case_id for c in cases.cases] == ["qa_0000"] and cases.total == 2 and len(cases.rejects) == 1
    assert cases.cases[0].extra["expected_context"] == "The insurer pays for fire damage."
    assert cases.report["accepted"] == 1 and cases.report["empty_question"] == 1
    corpus = dataset_inputs.build_corpus(cfg)
    # by hand: one chunk per section with text (the headings are not chunk text); empty.md has headings only
    assert [(d.doc_id, d.text) for d in corpus.documents] == [
        ("policy#0", "The insurer pays for fire damage to the house."),
        ("policy#1", "Report a claim within 24 hours of the loss."),
    ]
    (reject,) = corpus.rejects
    assert (
        reject.case_id == "empty"
        and reject.reason == f"file {tmp_path / 'empty.md'}: document 'empty' has headings but no text: it contributes no chunk"
    )
    assert corpus.report == {
        "documents_read": 2,
        "documents": 1,
        "documents_rejected": 1,
        "chunks": 2,
        "chunk_size": 200,
        "chunk_overlap": 20,
    }


# --------------------------------------------------------------------------------------------------
# beir


def test_beir_rejects_are_split_between_corpus_and_cases(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus_rows = [
        {"_id": "d1", "title": "", "text": "first passage"},
        {"_id": "d2", "title": "", "text": ""},
        {"_id": "d3", "text": "third"},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus_rows), encoding="utf-8")
    query_rows = [{"_id": "q1", "text": "first query"}, {"_id": "q2", "text": "second query"}, {"_id": "q3", "text": "never judged"}]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in query_rows), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t2\nq1\td3\t1\nq2\td2\t1\nq9\td1\t1\n", encoding="utf-8")
    cfg = config("beir", beir={"path": str(folder)})
    cases = dataset_inputs.load_cases(cfg)
    corpus = dataset_inputs.build_corpus(cfg)
    # by hand: d2 is empty (a corpus reject); q2's only judgement names d2 (rejected line), so q2 is rejected for
    # having no valid judgement; q9 is not a query (rejected line); q3 is not in the split (not a case, not a reject)
    assert [d.doc_id for d in corpus.documents] == ["d1", "d3"]
    assert [(Path(r.source_file).name, r.case_id) for r in corpus.rejects] == [("corpus.jsonl", "d2")]
    assert [c.case_id for c in cases.cases] == ["q1"] and cases.cases[0].extra["qrels"] == {"d1": 2, "d3": 1}
    assert sorted((Path(r.source_file).name, r.case_id) for r in cases.rejects) == [
        ("queries.jsonl", "q2"),
        ("test.tsv", "q2"),
        ("test.tsv", "q9"),
    ]
    # total: the split's two query rows (q1, q2) and the two rejected qrels lines
    assert cases.total == 4 == len(cases.cases) + len(cases.rejects)


def test_a_missing_beir_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    cfg = config("beir", beir={"path": str(tmp_path / "no_such_folder")})
    for call in (dataset_inputs.load_cases, dataset_inputs.build_corpus):
        with pytest.raises(InputError, match="no_such_folder"):
            call(cfg)
