"""Tests for context-QA metrics: hand-computed values, the ceiling bound, and the real insurance data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.common.types import Document, Run
from retrieval_pipeline.core.datasets.context_qa.chunking import chunk_markdown
from retrieval_pipeline.core.datasets.context_qa.documents import load_documents
from retrieval_pipeline.core.datasets.context_qa.metrics import context_qa_metrics
from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa
from retrieval_pipeline.core.datasets.context_qa.similarity import (
    SimilaritySettings,
    qrels_from_similarity,
    relevance_ceiling,
    similarity_rows,
)
from retrieval_pipeline.core.evaluation.metrics import aggregate, per_query_metrics
from retrieval_pipeline.core.evaluation.metrics import describe_metric as describe_context_metric

SETTINGS = SimilaritySettings(threshold=0.5)
# similarity to "abcd": c1 0.0, c2 1.0, c3 2*2/8 = 0.5 (relevant at the threshold), c4 0.0, c5 1.0
CHUNKS = {
    doc_id: Document(doc_id=doc_id, text=text, kind="chunk")
    for doc_id, text in {"c1": "wxyz", "c2": "abcd", "c3": "abxy", "c4": "zzzz", "c5": "ABCD"}.items()
}
EXPECTED = {"q1": "abcd", "q2": "efgh", "q3": "abcd"}


def frame_for(run: Run, ks: tuple[int, ...] = (1, 2, 3)):
    rows = similarity_rows(EXPECTED, list(CHUNKS.values()), SETTINGS)
    qrels = qrels_from_similarity(rows, SETTINGS.threshold)
    assert qrels == {"q1": {"c2": 1, "c3": 1, "c5": 1}, "q2": {}, "q3": {"c2": 1, "c3": 1, "c5": 1}}
    return context_qa_metrics(run, qrels, EXPECTED, CHUNKS, SETTINGS, ks=ks, ranking=per_query_metrics).set_index("query_id")


RUN: Run = {
    "q1": [("c1", 0.9), ("c3", 0.8), ("c2", 0.7), ("c4", 0.6)],  # relevant at ranks 2 and 3
    # q2: nothing retrieved
    "q3": [("c2", 0.9), ("c5", 0.8)],  # two exact matches: a tie for the best match
}


def test_hand_computed_values() -> None:
    frame = frame_for(RUN)
    q1 = frame.loc["q1"]
    assert [q1[f"hit_rate@{k}"] for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert [q1[f"context_coverage@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 1.0]
    assert [q1[f"precision@{k}"] for k in (1, 2, 3)] == pytest.approx([0.0, 1 / 2, 2 / 3])
    assert [q1[f"mrr@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 0.5]
    assert math.isnan(q1["best_match_position@1"])
    assert (q1["best_match_position@2"], q1["best_match_position@3"]) == (2.0, 3.0)
    assert (q1["hit@1"], q1["hit@3"], q1["hit@5"], q1["mrr"]) == (0.0, 1.0, 1.0, 0.5)
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert q1["ndcg@10"] == pytest.approx(dcg / idcg)


def test_query_without_hits_scores_zero_and_has_no_best_position() -> None:
    q2 = frame_for(RUN).loc["q2"]
    assert q2["context_coverage@3"] == 0.0 and q2["hit_rate@3"] == 0.0 and q2["ndcg@10"] == 0.0
    assert all(math.isnan(q2[f"best_match_position@{k}"]) for k in (1, 2, 3))


def test_best_match_ties_take_the_first_position() -> None:
    q3 = frame_for(RUN).loc["q3"]
    assert (q3["best_match_position@1"], q3["best_match_position@3"]) == (1.0, 1.0)
    assert (q3["context_coverage@1"], q3["precision@3"]) == (1.0, pytest.approx(2 / 3))


def test_columns_settings_and_aggregate() -> None:
    frame = context_qa_metrics(RUN, {"q1": {"c2": 1}}, EXPECTED, CHUNKS, SETTINGS, ranking=per_query_metrics)
    per_k = ["hit_rate", "context_coverage", "precision", "mrr", "best_match_position"]
    assert list(frame.columns) == [
        "query_id",
        "n_relevant",
        *(f"{name}@{k}" for k in (1, 5, 10) for name in per_k),
        "hit@1",
        "hit@3",
        "hit@5",
        "ndcg@10",
        "mrr",
        "found",
        "first_relevant_rank",
    ]
    assert frame.attrs["similarity_settings"] == SETTINGS.as_dict()
    assert aggregate(frame)["hit_rate@5"] == 1.0
    for column in frame.columns[2:-2]:
        assert describe_context_metric(column)


def test_errors_name_the_query_or_document() -> None:
    qrels = {"q1": {"c2": 1}}
    with pytest.raises(ValueError, match="no expected context for query 'q1'"):
        context_qa_metrics(RUN, qrels, {}, CHUNKS, SETTINGS, ranking=per_query_metrics)
    with pytest.raises(ValueError, match="'nope'"):
        context_qa_metrics({"q1": [("nope", 1.0)]}, qrels, EXPECTED, CHUNKS, SETTINGS, ranking=per_query_metrics)
    with pytest.raises(KeyError):
        describe_context_metric("coverage")


@pytest.mark.integration
def test_oracle_run_on_insurance_data_reaches_the_ceiling(shared_data: Path) -> None:
    """Ranking chunks by their similarity puts a relevant chunk first whenever one exists."""
    folder = shared_data / "insurance"
    loaded = load_context_qa(folder / "filtered_qa_pairs.json")
    expected = {case.case_id: case.extra["expected_context"] for case in loaded.cases}
    documents = load_documents(sorted((folder / "documents").glob("*.md")))
    chunks = [c for doc_id, text in documents for c in chunk_markdown(doc_id, text, 800, 100)]
    rows = similarity_rows(expected, chunks, SETTINGS)
    qrels = qrels_from_similarity(rows, SETTINGS.threshold)
    oracle = {q: sorted(row.items(), key=lambda hit: -hit[1]) for q, row in rows.items()}
    frame = context_qa_metrics(oracle, qrels, expected, {c.doc_id: c for c in chunks}, SETTINGS, ranking=per_query_metrics)
    ceiling = relevance_ceiling(rows, SETTINGS.threshold)
    assert frame["hit_rate@1"].mean() == pytest.approx(ceiling)
    found = frame["hit_rate@1"] == 1.0
    assert (frame.loc[found, "best_match_position@1"] == 1.0).all()
    assert np.allclose(frame.loc[found, "context_coverage@1"], [max(rows[q].values()) for q in frame.loc[found, "query_id"]])
