"""Metrics, against the mutants ``benchmarks/mutation.py`` found alive in :mod:`retrieval_pipeline.core.evaluation.metrics`.

What the older tests left open: the exact error messages (they name the query or say what to pass),
integer ``n_relevant``, latencies combined with the metric means, double-precision latency summaries,
and the zeros of the formulas where a division is undefined (R = 0, IDCG = 0, nothing found), which
must be zeros whatever memory numpy hands back, with no numpy warning.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.evaluation.metrics import aggregate, per_query_metrics
from retrieval_pipeline.core.evaluation.metrics.families.binary.f1 import f1
from retrieval_pipeline.core.evaluation.metrics.families.binary.mrr import reciprocal_rank
from retrieval_pipeline.core.evaluation.metrics.families.binary.recall import recall
from retrieval_pipeline.core.evaluation.metrics.families.graded.ndcg import ndcg


def _exactly(message: str) -> str:
    return "^" + re.escape(message) + "$"


def _dirty_heap(n: int, value: float = 7.0) -> None:
    """Free a few float64 buffers of ``n`` elements holding ``value``: numpy's allocator cache hands such
    buffers back to the next arrays of that size, so an output array left uninitialised would hold ``value``."""
    junk = [np.full(n, value) for _ in range(7)]
    del junk


def _strict(function, *args):
    """Call with every warning an error (numpy warns when ``where=`` is used without ``out=``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*args)


def test_recall_is_zero_without_relevant_documents_whatever_the_memory_held():
    relevant = np.zeros((5, 3), dtype=bool)
    relevant[0, 0] = True
    n_relevant = np.array([1, 0, 0, 0, 0])
    _dirty_heap(5)
    assert _strict(recall, relevant, n_relevant, 3).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_ndcg_is_zero_when_the_ideal_dcg_is_zero_whatever_the_memory_held():
    gains, ideal = np.zeros((5, 3)), np.zeros((5, 3))
    gains[0, 1], ideal[0, 0] = 2.0, 2.0  # grade 2 at rank 2, ideal at rank 1: (2 / log2 3) / (2 / log2 2)
    _dirty_heap(5)
    assert _strict(ndcg, gains, ideal, 3).tolist() == [pytest.approx(1 / math.log2(3)), 0.0, 0.0, 0.0, 0.0]


def test_reciprocal_rank_is_zero_when_nothing_was_found_whatever_the_memory_held():
    first = np.array([4.0, np.nan, np.nan, np.nan, np.nan])
    _dirty_heap(5)
    assert _strict(reciprocal_rank, first).tolist() == [0.25, 0.0, 0.0, 0.0, 0.0]


def test_f1_is_zero_when_precision_and_recall_are_zero_whatever_the_memory_held():
    precision_at_k = np.array([0.2, 0.0, 0.0, 0.0, 0.0])
    recall_at_k = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    _dirty_heap(5)
    assert _strict(f1, precision_at_k, recall_at_k).tolist() == [pytest.approx(1 / 3), 0.0, 0.0, 0.0, 0.0]  # 2 * 0.2 / 1.2


def test_per_query_metrics_raise_no_warning_on_unjudgeable_queries():
    qrels = {"q1": {"d": 1}, "q2": {"d": 0}, "q3": {"e": 1}}
    frame = _strict(per_query_metrics, {"q1": [("d", 1.0)], "q2": [("d", 1.0)]}, qrels)
    assert frame["ndcg@10"].tolist() == [1.0, 0.0, 0.0] and frame["recall@5"].tolist() == [1.0, 0.0, 0.0]


def test_n_relevant_is_an_integer_count():
    frame = per_query_metrics({"q": [("a", 1.0)]}, {"q": {"a": 2, "b": 1, "c": 0}, "r": {"x": 0}})
    assert pd.api.types.is_integer_dtype(frame["n_relevant"]) and frame["n_relevant"].tolist() == [2, 0]


def test_error_messages_are_exact():
    with pytest.raises(ValueError, match=_exactly("qrels is empty: there are no queries to evaluate (need {query_id: {doc_id: grade}})")):
        per_query_metrics({"q": [("d", 1.0)]}, {})
    with pytest.raises(ValueError, match=_exactly("run for query 'q7' lists the same doc_id more than once")):
        per_query_metrics({"q7": [("d", 2.0), ("d", 1.0)]}, {"q7": {"d": 1}})
    frame = per_query_metrics({"q": [("d", 1.0)]}, {"q": {"d": 1}})
    with pytest.raises(ValueError, match=_exactly("per_query has no rows: nothing to aggregate")):
        aggregate(frame.iloc[:0])
    with pytest.raises(ValueError, match=_exactly("latencies_ms is empty; pass None when latencies were not measured")):
        aggregate(frame, latencies_ms=[])


def test_latencies_are_added_to_the_means_not_instead_of_them():
    frame = per_query_metrics({"q1": [("d", 1.0)], "q2": [("x", 1.0)]}, {"q1": {"d": 1}, "q2": {"d": 1}})
    result = aggregate(frame, latencies_ms=[10.0, 30.0])
    assert result["mrr"] == 0.5 and result["n_queries"] == 2 and result["not_found"] == 1
    assert result["latency_mean_ms"] == 20.0 and result["latency_p95_ms"] == pytest.approx(29.0)  # 10 + 0.95 * 20


def test_latency_summary_is_computed_in_double_precision():
    """float32 latencies: the mean and the 95th percentile are those of the same values as float64."""
    latencies = np.array([0.1, 0.2, 0.7, 1e4, 3.3, 2.9], dtype=np.float32)
    as_double = [float(v) for v in latencies]
    result = aggregate(per_query_metrics({"q": [("d", 1.0)]}, {"q": {"d": 1}}), latencies_ms=latencies)
    assert result["latency_mean_ms"] == math.fsum(as_double) / len(as_double)
    ordered = sorted(as_double)
    position = 0.95 * (len(ordered) - 1)  # linear interpolation between the closest ranks
    low = math.floor(position)
    assert result["latency_p95_ms"] == pytest.approx(ordered[low] + (position - low) * (ordered[low + 1] - ordered[low]), rel=1e-15)
