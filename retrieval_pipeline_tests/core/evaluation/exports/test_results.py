"""The evaluation_results.json report and its console table, on hand-made runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.exports.results import (
    METRIC_KEYS,
    comparison_table,
    evaluation_results,
    write_evaluation_results,
)
from retrieval_pipeline.core.retrieval.run_loop import TimedRun

QRELS: Qrels = {"q1": {"c1": 1}, "q2": {"c2": 1}, "q3": {"c3": 1}, "q4": {"c1": 1}}
QUESTIONS = {"q1": "first?", "q2": "second?", "q3": "third?", "q4": "fourth?"}


def ranked(*doc_ids: str) -> list[tuple[str, float]]:
    return [(doc, float(len(doc_ids) - i)) for i, doc in enumerate(doc_ids)]


# q1 at rank 1, q2 at rank 3, q3 at rank 7 (outside the top 5 but in the run), q4 not found.
KEYWORD: Run = {
    "q1": ranked("c1", "c2", "c3"),
    "q2": ranked("c9", "c8", "c2", "c7"),
    "q3": ranked("c10", "c11", "c12", "c13", "c14", "c15", "c3"),
    "q4": ranked("c5", "c6"),
}
# Everything found at rank 1 except q3, which is missing from the run altogether.
SEMANTIC: Run = {"q1": ranked("c1"), "q2": ranked("c2", "c1"), "q4": ranked("c1", "c3")}


def test_shape_and_values_on_a_hand_made_run() -> None:
    results = evaluation_results({"keyword": KEYWORD, "semantic": SEMANTIC}, QRELS, QUESTIONS, k=5)
    assert list(results) == ["keyword", "semantic"]
    keyword = results["keyword"]
    assert set(keyword) == {"metrics", "results"}
    assert keyword["metrics"] == pytest.approx(
        {
            "total_questions": 4,
            "recall_at_1": 0.25,
            "recall_at_5": 0.5,
            "mrr": (1 + 1 / 3 + 1 / 7 + 0) / 4,
            "not_found": 1,
            "not_found_pct": 25.0,
            "avg_rank_when_found": (1 + 3 + 7) / 3,
        }
    )
    assert list(keyword["metrics"]) == list(METRIC_KEYS)
    assert keyword["results"] == [
        {
            "question_id": "q1",
            "question": "first?",
            "expected_chunk_id": "c1",
            "found": True,
            "rank": 1,
            "returned_chunk_ids": ["c1", "c2", "c3"],
        },
        {
            "question_id": "q2",
            "question": "second?",
            "expected_chunk_id": "c2",
            "found": True,
            "rank": 3,
            "returned_chunk_ids": ["c9", "c8", "c2", "c7"],
        },
        {
            "question_id": "q3",
            "question": "third?",
            "expected_chunk_id": "c3",
            "found": True,
            "rank": 7,
            "returned_chunk_ids": ["c10", "c11", "c12", "c13", "c14"],
        },
        {
            "question_id": "q4",
            "question": "fourth?",
            "expected_chunk_id": "c1",
            "found": False,
            "rank": None,
            "returned_chunk_ids": ["c5", "c6"],
        },
    ]
    semantic = results["semantic"]
    assert semantic["metrics"]["recall_at_1"] == 0.75 and semantic["metrics"]["not_found"] == 1
    assert semantic["results"][2] == {
        "question_id": "q3",
        "question": "third?",
        "expected_chunk_id": "c3",
        "found": False,
        "rank": None,
        "returned_chunk_ids": [],
    }


def test_timed_runs_are_accepted_and_k_cuts_the_returned_ids() -> None:
    results = evaluation_results({"keyword": TimedRun("bm25", KEYWORD, {})}, QRELS, QUESTIONS, k=2)
    assert results["keyword"]["results"][2]["returned_chunk_ids"] == ["c10", "c11"]
    assert results["keyword"]["metrics"]["recall_at_5"] == 0.5  # k only limits the listed ids


def test_nothing_found_gives_null_average_rank_and_valid_json(tmp_path: Path) -> None:
    results = evaluation_results({"empty": {}}, QRELS, QUESTIONS)
    metrics = results["empty"]["metrics"]
    assert metrics["avg_rank_when_found"] is None and metrics["not_found_pct"] == 100.0 and metrics["mrr"] == 0.0
    path = write_evaluation_results(results, tmp_path / "out" / "evaluation_results.json")
    assert json.loads(path.read_text(encoding="utf-8")) == results


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="k must be"):
        evaluation_results({"x": KEYWORD}, QRELS, QUESTIONS, k=0)
    with pytest.raises(ValueError, match="no text"):
        evaluation_results({"x": KEYWORD}, QRELS, {"q1": "first?"})


def test_console_table_has_search_types_as_columns_and_metrics_as_rows() -> None:
    table = comparison_table(evaluation_results({"keyword": KEYWORD, "semantic": SEMANTIC}, QRELS, QUESTIONS))
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "keyword", "semantic"]
    assert set(lines[1]) <= {"-", " "}
    body = {line[:20].strip(): line[20:].split() for line in lines[2:]}
    assert body == {
        "questions": ["4", "4"],
        "recall@1": ["0.250", "0.750"],
        "recall@5": ["0.500", "0.750"],
        "MRR": ["0.369", "0.750"],
        "not found": ["1", "1"],
        "not found %": ["25.0", "25.0"],
        "avg rank when found": ["3.67", "1.00"],
    }
    assert len({len(line) for line in lines}) == 1  # columns line up


def test_console_table_shows_a_dash_for_a_missing_average() -> None:
    table = comparison_table(evaluation_results({"empty": {}}, QRELS, QUESTIONS))
    assert table.splitlines()[-1].split()[-1] == "-"
