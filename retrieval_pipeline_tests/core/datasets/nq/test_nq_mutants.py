"""NQ golds, against the mutants ``benchmarks/mutation.py`` found alive in the NQ qrels path
(:mod:`retrieval_pipeline.core.datasets.nq.adapter`: the adapter's cases and :func:`nq_pair`).

A small CSV is written by hand: two questions share one long answer (spacing differs), one question has
its own, one row is rejected, and ``sample_size`` cuts the last row. Each question's gold is the chunk of
its own long answer, numbered in first-appearance order: ``nq_000000`` and ``nq_000001``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Case, QAPair
from retrieval_pipeline.core.datasets.nq import adapter as nq_adapter
from retrieval_pipeline.core.datasets.nq.adapter import NQAdapter, nq_pair
from retrieval_pipeline.core.registry import DatasetConfig

CSV = (
    "question,long_answer,short_answer\n"
    'who made python,"Python was made by Guido.",Guido\n'
    'when was python released,"Python 0.9.0 came out in 1991.",1991\n'
    'who created python,"Python  was made\nby Guido.",Guido van Rossum\n'
    "no answer here,,\n"
    'cut by the sample size,"Never read.",x\n'
)


def _config(tmp_path: Path, sample_size: int | None = 4) -> DatasetConfig:
    path = tmp_path / "nq.csv"
    path.write_text(CSV, encoding="utf-8")
    return DatasetConfig(name="n", kind="nq", nq={"csv": str(path), "sample_size": sample_size})


def test_cases_carry_the_chunk_of_their_own_long_answer(tmp_path: Path):
    config = _config(tmp_path)
    built = NQAdapter().load_cases(config)
    assert [(c.case_id, c.extra["gold_chunk_id"]) for c in built.cases] == [
        ("nq_q000000", "nq_000000"),
        ("nq_q000001", "nq_000001"),
        ("nq_q000002", "nq_000000"),  # the same passage as the first row, spaced differently
    ]
    assert built.total == 4 and [r.case_id for r in built.rejects] == ["nq_q000003"]
    assert {c.source_file for c in built.cases} == {str(tmp_path / "nq.csv")}
    assert [c.query for c in built.cases] == ["who made python", "when was python released", "who created python"]
    assert len(NQAdapter().load_cases(_config(tmp_path, None)).cases) == 4  # no sample size: every row


def test_pairs_from_the_adapter_are_the_gold_chunks(tmp_path: Path):
    config = _config(tmp_path)
    adapter = NQAdapter()
    builder = adapter.pair_builder(config, [])
    pairs = [builder(c) for c in adapter.load_cases(config).cases]
    assert [(p.gold_doc_ids, p.status, p.method) for p in pairs] == [
        (["nq_000000"], "resolved", "nq:long_answer"),
        (["nq_000001"], "resolved", "nq:long_answer"),
        (["nq_000000"], "resolved", "nq:long_answer"),
    ]
    assert pairs[2].evidence == {"short_answers": ["Guido van Rossum"]}


def test_nq_pair_is_the_whole_pair():
    case = Case(
        "nq_q000007", "natural_questions", "nq", "nq.csv", 7, "who?", extra={"gold_chunk_id": "nq_000003", "short_answers": ["a", "b"]}
    )
    assert nq_pair(case) == QAPair(
        "nq_q000007",
        "natural_questions",
        "nq",
        "nq.csv",
        "who?",
        ["nq_000003"],
        "resolved",
        "nq:long_answer",
        {"short_answers": ["a", "b"]},
    )


def test_nq_pair_without_a_chunk_is_unresolved():
    pair = nq_pair(Case("q", "natural_questions", "nq", "nq.csv", 0, "who?", extra={}))
    assert (pair.gold_doc_ids, pair.status, pair.method, pair.evidence) == ([], "unresolved", "nq:long_answer", {"short_answers": []})


def test_sampling_questions_never_removes_documents(tmp_path: Path):
    """The first 4 questions are asked against every row's long answer, the 5th row's included."""
    sampled, whole = _config(tmp_path, 4), _config(tmp_path, None)
    corpus = NQAdapter().build_corpus(sampled)
    assert [d.doc_id for d in corpus.documents] == [d.doc_id for d in NQAdapter().build_corpus(whole).documents]
    assert "Never read." in {d.text for d in corpus.documents} and "corpus_subset" not in corpus.report
    golds = {c.case_id: c.extra["gold_chunk_id"] for c in NQAdapter().load_cases(sampled).cases}
    assert golds == {c.case_id: c.extra["gold_chunk_id"] for c in NQAdapter().load_cases(whole).cases if c.case_id in golds}


def test_an_explicit_corpus_subset_keeps_the_sampled_golds_and_says_so(tmp_path: Path):
    path = tmp_path / "nq.csv"
    path.write_text(CSV, encoding="utf-8")
    config = DatasetConfig(name="n", kind="nq", nq={"csv": str(path), "sample_size": 2, "corpus_rows": 1})
    corpus = NQAdapter().build_corpus(config)
    texts = {d.text for d in corpus.documents}
    assert texts == {"Python was made by Guido.", "Python 0.9.0 came out in 1991."}  # row 1, and row 2's gold
    assert "SUBSET" in corpus.report["corpus_subset"]
    ids = {d.doc_id for d in corpus.documents}
    assert {c.extra["gold_chunk_id"] for c in NQAdapter().load_cases(config).cases} <= ids


def test_each_step_reads_the_csv_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """With ``sample_size`` and ``corpus_rows`` set, the cases and the corpus each read the file once, whole."""
    path = tmp_path / "nq.csv"
    path.write_text(CSV, encoding="utf-8")
    config = DatasetConfig(name="n", kind="nq", nq={"csv": str(path), "sample_size": 2, "corpus_rows": 1})
    reads: list[tuple[object, ...]] = []
    read = nq_adapter.load_nq_csv

    def counted(*args: object, **kwargs: object) -> object:
        reads.append((*args, *kwargs.values()))
        return read(*args, **kwargs)

    monkeypatch.setattr(nq_adapter, "load_nq_csv", counted)
    assert len(NQAdapter().load_cases(config).cases) == 2
    assert reads == [(path,)]
    assert len(NQAdapter().build_corpus(config).documents) == 2
    assert reads == [(path,), (path,)]
