"""The retrieval dataset built from a verified-pairs table in core: records, JSONL, counts (no Dagster)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.filtering.retrieval_dataset import build_dataset, dataset_records

DOCS = [Document(d, f"text of {d}") for d in ("g1", "g2", "g3", "s1", "s2", "b1", "r1", "r2")]


def row(query_id: str, keep: bool, golds: list[str], grades: list[int], sib: list[str], bm25: list[str], rand: list[str]) -> dict:
    return {
        "query_id": query_id,
        "suite": "api",
        "benchmark_type": "api_understanding",
        "query": f"question {query_id}",
        "gold_doc_ids": np.array(golds),
        "gold_grades": np.array(grades),
        "gold_method": "exact",
        "keep": keep,
        "undecided": False,
        "judge": "offline_lexical",
        "reason": "kept: ..." if keep else "dropped: ...",
        "sufficiency": 1.0,
        "best_random": 0.0,
        "random_doc_ids": np.array(rand),
        "judge_details": "{}",
        "sibling_negatives": np.array(sib),
        "bm25_negatives": np.array(bm25),
    }  # arrays: as Parquet gives them back


#: By construction: 2 kept rows (positives 2 and 1; negatives 4 and 1), 1 dropped row that must not appear.
VERIFIED = pd.DataFrame(
    [
        # negatives: s1, s2 (siblings), b1 (bm25; s1 again is skipped), r1 (random); "gone" is not in the corpus
        row("q1", True, ["g1", "g2"], [3, 1], ["s1", "s2"], ["s1", "b1"], ["r1", "gone"]),
        # negatives: r2 only (the gold g1 and the sibling s1 listed again by bm25 are skipped)
        row("q2", True, ["g3"], [1], [], ["g3"], ["r2"]),
        row("q3", False, ["g1"], [1], [], [], []),
    ]
)


def test_only_kept_rows_become_records_with_deduplicated_negatives():
    records = dataset_records(VERIFIED, DOCS, "stdlib")
    assert [r["id"] for r in records] == ["q1", "q2"]
    first = records[0]
    assert first["source"] == "stdlib/api" and first["query"] == "question q1"
    assert first["positive_ctxs"] == [
        {"fqn": "g1", "text": "text of g1", "rank_relevance": 3},
        {"fqn": "g2", "text": "text of g2", "rank_relevance": 1},
    ]
    assert [(n["fqn"], n["kind"], n["is_hard_negative"]) for n in first["negative_ctxs"]] == [
        ("s1", "sibling", True),
        ("s2", "sibling", True),
        ("b1", "bm25", True),
        ("r1", "random", False),
    ]
    assert first["metadata"] == {
        "benchmark_type": "api_understanding",
        "gold_method": "exact",
        "judge": "offline_lexical",
        "judge_reason": "kept: ...",
        "dataset": "stdlib",
    }
    assert [n["fqn"] for n in records[1]["negative_ctxs"]] == ["r2"]


def test_build_writes_the_jsonl_and_reports_counts(tmp_path):
    path = tmp_path / "exports" / "stdlib" / "retrieval_dataset.jsonl"
    result = build_dataset(VERIFIED, DOCS, "stdlib", path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in lines] == ["q1", "q2"] and result.path == path
    assert list(result.frame.columns) == ["id", "source", "query", "positive_ctxs", "negative_ctxs", "metadata"]
    assert json.loads(result.frame.iloc[0]["metadata"]) == lines[0]["metadata"]  # metadata as sorted JSON text
    assert result.frame.iloc[0]["metadata"] == json.dumps(lines[0]["metadata"], sort_keys=True)
    assert result.summary == {"tuples": 2, "jsonl_path": path, "positives_per_query": 1.5, "negatives_per_query": 2.5}
    preview = result.details["preview"]
    assert isinstance(preview, Markdown) and "question q2" in preview and "question q3" not in preview
    assert list(result.metadata()) == ["tuples", "jsonl_path", "positives_per_query", "negatives_per_query", "preview"]


def test_nothing_kept_is_an_error_and_writes_nothing(tmp_path):
    path = tmp_path / "retrieval_dataset.jsonl"
    dropped = VERIFIED.assign(keep=False)
    with pytest.raises(ValueError, match=r"dataset stdlib: the filter kept no pair.*\(3 pairs judged"):
        build_dataset(dropped, DOCS, "stdlib", path)
    with pytest.raises(ValueError, match=r"\(0 pairs judged"):
        build_dataset(pd.DataFrame(), DOCS, "stdlib", path)
    assert not path.exists()
