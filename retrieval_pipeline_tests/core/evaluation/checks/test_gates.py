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
