"""What a run's materialisations tell the console: rejected rows and retrievers that answered nothing (issue 39.7)."""

from __future__ import annotations

import pandas as pd

from retrieval_pipeline.cli.console import run_notes
from retrieval_pipeline.defs.assets.retrieval import empty_runs


def test_rejects_and_empty_runs_become_console_lines() -> None:
    notes = run_notes(
        {
            "case_rejects": {"rejected": 3, "reasons": "..."},
            "corpus_rejects": {"rejected": 0},
            "retrieval_runs": {"empty_runs": "sleepy", "queries": 5},
        }
    )
    assert notes == [
        "rejected: 3 row(s) in case_rejects, 0 row(s) in corpus_rejects (reasons in each asset)",
        "warning: sleepy returned no hit for any query: every metric of it is 0 (a wrong index or service?)",
    ]
    assert run_notes({"retrieval_runs": {"empty_runs": "none"}}) == []


def test_a_retriever_with_only_empty_queries_is_an_empty_run() -> None:
    frame = pd.DataFrame({"retriever": ["bm25", "bm25", "empty", "empty"], "query_id": ["q1", "q2", "q1", "q2"], "rank": [1, 0, 0, 0]})
    assert empty_runs(frame, ["bm25", "empty", "absent"]) == ["empty", "absent"]
