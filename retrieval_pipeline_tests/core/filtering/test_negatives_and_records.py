from __future__ import annotations

import json

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.filtering.negatives import SiblingIndex, bm25_negatives
from retrieval_pipeline.core.filtering.retrieval_dataset import build_record, qrels_from_records, write_jsonl

DOCS = [
    Document("json", "json module", kind="module", module="json"),
    Document("json.dumps", "dumps", kind="function", module="json"),
    Document("json.JSONDecoder", "decoder", kind="class", module="json"),
    Document("json.loads", "loads", kind="function", module="json"),
    Document("json.dump", "dump", kind="function", module="json"),
    Document("csv.reader", "reader", kind="function", module="csv"),
]


def test_siblings_same_module_same_kind_first_and_no_gold():
    sib = SiblingIndex(DOCS).siblings(["json.dumps"], 3)
    assert sib == ["json.loads", "json.dump", "json.JSONDecoder"]
    assert SiblingIndex(DOCS).siblings(["json.dumps", "json.loads"], 5) == ["json.dump", "json.JSONDecoder"]


def test_bm25_negatives_skip_gold_and_chosen():
    hits = [("json.dumps", 3.0), ("json.dump", 2.0), ("csv.reader", 1.0), ("json.loads", 0.5)]
    assert bm25_negatives(hits, ["json.dumps"], 2, exclude=["json.dump"]) == ["csv.reader", "json.loads"]


def test_record_shape_and_jsonl_round_trip(tmp_path):
    docs = {d.doc_id: d for d in DOCS}
    rec = build_record(
        query_id="q1",
        source="stdlib/api",
        query="serialise to a string",
        gold_doc_ids=["json.dumps"],
        docs=docs,
        sibling_ids=["json.loads", "json.dump"],
        bm25_ids=["json.dump", "csv.reader"],
        random_ids=["csv.reader", "json"],
        metadata={"judge": "offline_lexical"},
    )
    assert set(rec) == {"id", "source", "query", "positive_ctxs", "negative_ctxs", "metadata"}
    assert rec["positive_ctxs"] == [{"fqn": "json.dumps", "text": "dumps", "rank_relevance": 1}]
    negs = [(n["fqn"], n["is_hard_negative"], n["kind"]) for n in rec["negative_ctxs"]]
    assert negs == [
        ("json.loads", True, "sibling"),
        ("json.dump", True, "sibling"),
        ("csv.reader", True, "bm25"),
        ("json", False, "random"),
    ]
    path = tmp_path / "out" / "retrieval_dataset.jsonl"
    assert write_jsonl([rec, rec], path) == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == rec
    assert qrels_from_records(lines) == {"q1": {"json.dumps": 1}}


def test_zero_siblings_asked_gives_none() -> None:
    from retrieval_pipeline.core.common.types import Document
    from retrieval_pipeline.core.filtering.negatives import SiblingIndex

    docs = [Document("m.a", "a", kind="function", module="m"), Document("m.b", "b", kind="function", module="m")]
    assert SiblingIndex(docs).siblings(["m.a"], 0) == []
    assert SiblingIndex(docs).siblings(["m.a"], 1) == ["m.b"]
