"""BEIR qrels, against the mutants ``benchmarks/mutation.py`` found alive in the BEIR qrels path
(:func:`retrieval_pipeline.core.datasets.beir.adapter.beir_pair` and the qrels reading of
:mod:`retrieval_pipeline.core.datasets.beir.reader`).

What the older tests left open: the pair built from a case's judgements (graded, ordered, the
non-relevant kept as evidence), the case id and lines named by rejected qrels lines, the counters of
the report, and the layout named in a wrong-column-count reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_pipeline.core.common.types import Case, QAPair
from retrieval_pipeline.core.datasets.beir.adapter import BeirAdapter, beir_pair
from retrieval_pipeline.core.datasets.beir.reader import load_beir

CORPUS = [{"_id": d, "text": f"text {d}"} for d in ("d1", "d2", "d3", "d:4")]
QUERIES = [{"_id": "q1", "text": "one"}, {"_id": "q2", "text": ""}, {"_id": "q3", "text": "three"}]


def _beir(tmp_path: Path, qrels: list[str]) -> Path:
    root = tmp_path / "mini"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUERIES), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("".join(line + "\n" for line in qrels), encoding="utf-8")
    return root


def _case(qrels: dict | None) -> Case:
    extra = {} if qrels is None else {"qrels": qrels}
    return Case("q7", "mini", "beir", "mini/queries.jsonl", 6, "a question", extra=extra)


def test_beir_pair_keeps_the_grades_best_first_and_the_non_relevant_as_evidence():
    pair = beir_pair(_case({"d1": 1, "d2": "3", "d3": 0, "d4": 3, "d5": 2, "d6": -1}))
    assert pair == QAPair(
        "q7",
        "mini",
        "beir",
        "mini/queries.jsonl",
        "a question",
        ["d2", "d4", "d5", "d1"],  # grade descending, then doc id
        "resolved",
        "beir:qrels",
        {"judged_non_relevant": ["d3", "d6"]},
        [],
        [3, 3, 2, 1],
    )
    assert pair.grades() == [3, 3, 2, 1]


def test_beir_pair_without_a_relevant_judgement_is_unresolved_with_a_warning():
    for qrels in ({"d3": 0, "d1": 0}, {}, None):
        pair = beir_pair(_case(qrels))
        assert (pair.gold_doc_ids, pair.status, pair.method, pair.gold_grades) == ([], "unresolved", "beir:qrels", [])
        assert pair.evidence == {"judged_non_relevant": sorted(qrels or {})}
        assert pair.warnings == ["query 'q7' (mini/queries.jsonl) has no judgement with grade >= 1"]


def test_beir_adapter_pairs_with_beir_pair():
    assert BeirAdapter().pair_builder(None, []) is beir_pair  # type: ignore[arg-type]


def test_rejected_lines_name_their_query_and_the_counters_add(tmp_path: Path):
    root = _beir(
        tmp_path,
        [
            "q1\td1\t2",
            "q1\td2\tx",  # non-integer grade
            "q3\td1\thigh",  # non-integer grade
            "q3\td2\t1.5",  # non-integer grade: q3 has no valid judgement left
            "q2\td1\t1",  # q2 was rejected in queries.jsonl (empty text)
            "q1\td:4\t1",
            "q1\td:5\t1",  # unknown document whose id holds a colon
            "\td3\t1",  # empty query id
            "q1\td3\t2",
        ],
    )
    load = load_beir(root)
    path = root / "qrels" / "test.tsv"
    qrels_rejects = [r for r in load.rejects if r.source_file == str(path)]
    assert [(r.case_id, r.index) for r in qrels_rejects] == [("q1", 1), ("q3", 2), ("q3", 3), ("q2", 4), ("q1", 6), (None, 7)]
    assert qrels_rejects[3].reason == f"file {path}, line 5: unknown query: 'q2' was rejected in queries.jsonl (line 2)"
    assert load.report["qrels_rejected_by_reason"] == {"non-integer grade": 3, "unknown query": 1, "unknown document": 1, "empty id": 1}
    assert load.report["qrels_grades"] == {1: 1, 2: 2}
    assert load.qrels == {"q1": {"d1": 2, "d:4": 1, "d3": 2}}
    (unjudged,) = [r for r in load.rejects if r.source_file == str(root / "queries.jsonl") and r.case_id == "q3"]
    assert unjudged.reason == (
        f"file {root / 'queries.jsonl'}, line 3: query 'q3' has no valid judgement in {path}: "
        "its 2 qrels line(s) there were rejected (line 3, 4)"
    )


def test_wrong_column_counts_name_the_layout_in_force(tmp_path: Path):
    path = tmp_path / "mini" / "qrels" / "test.tsv"
    load = load_beir(_beir(tmp_path, ["q1 d1 2 7 9", "q1 d2 1"]))
    assert load.rejects[-1].reason == f"file {path}, line 1: wrong column count: expected 3 (query-id corpus-id score), got 5"
    assert load.qrels == {"q1": {"d2": 1}} and load.report["qrels_columns"] == 3
    trec = load_beir(_beir(tmp_path / "trec", ["q1 0 d1 2", "q1 d2 1"]))
    trec_path = tmp_path / "trec" / "mini" / "qrels" / "test.tsv"
    assert (
        trec.rejects[-1].reason == f"file {trec_path}, line 2: wrong column count: expected 4 (query-id iteration corpus-id score), got 3"
    )
    assert trec.qrels == {"q1": {"d1": 2}} and trec.report["qrels_columns"] == 4
