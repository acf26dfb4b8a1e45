from __future__ import annotations

import math

from retrieval_pipeline.core.evaluation.checks.thresholds import check_name, drift_gate, threshold_check

METRICS = {"bm25": {"hit_rate@5": 0.9, "mrr": 0.7}, "dense": {"hit_rate@5": 0.75, "mrr": 0.8}}


def test_threshold_gate_fails_when_any_checked_retriever_is_below():
    gate = threshold_check("hit_rate@5", 0.8, "ERROR", METRICS, ["bm25", "dense"])
    assert not gate.passed and gate.severity == "ERROR" and "dense (0.750)" in gate.description
    assert gate.name == check_name("hit_rate@5") == "min_hit_rate_at_5"


def test_threshold_gate_only_looks_at_checked_retrievers():
    assert threshold_check("hit_rate@5", 0.8, "ERROR", METRICS, ["bm25"]).passed


def test_threshold_gate_treats_nan_and_missing_as_failures():
    assert not threshold_check("mrr", 0.1, "WARN", {"x": {"mrr": math.nan}}, ["x"]).passed
    assert not threshold_check("mrr", 0.1, "WARN", METRICS, ["bm25", "absent"]).passed


def test_drift_gate_first_evaluation_passes():
    assert drift_gate("hit_rate@5", 0.1, METRICS, None, ["bm25"]).passed


def test_drift_gate_relative_drop_boundary():
    prev = {"bm25": 1.0, "dense": 0.75}
    current = {"bm25": {"hit_rate@5": 0.905}, "dense": {"hit_rate@5": 0.75}}
    ok = drift_gate("hit_rate@5", 0.10, current, prev, ["bm25", "dense"])
    assert ok.passed and math.isclose(ok.values["bm25_relative_drop"], 0.095)
    current["bm25"]["hit_rate@5"] = 0.89
    bad = drift_gate("hit_rate@5", 0.10, current, prev, ["bm25", "dense"])
    assert not bad.passed and bad.severity == "WARN" and "bm25 1.000 -> 0.890" in bad.description


def test_drift_gates_name_the_retrievers_that_dropped_with_before_and_after():
    """The alert record (alerts/<dataset>) shows and plots these: only the retrievers that fell, both rules."""
    import pandas as pd

    from retrieval_pipeline.core.evaluation.scoring import dropped_figures

    prev = {"bm25": 1.0, "dense": 0.75}
    current = {"bm25": {"hit_rate@5": 0.89}, "dense": {"hit_rate@5": 0.75}}
    bad = drift_gate("hit_rate@5", 0.10, current, prev, ["bm25", "dense"])
    assert bad.extra == {"metric": "hit_rate@5", "dropped": {"bm25": {"before": 1.0, "after": 0.89}}}
    assert drift_gate("hit_rate@5", 0.2, current, prev, ["bm25", "dense"]).extra == {}  # passed: nothing fell

    frame = pd.DataFrame(
        {"retriever": ["bm25", "dense", "new"], "before": [0.6, 0.5, None], "after": [0.4, 0.49, 0.3], "alert": [True, False, None]}
    )
    assert dropped_figures(frame) == {"bm25": {"before": 0.6, "after": 0.4}}
    assert dropped_figures(frame.iloc[0:0]) == {}
