"""The metric registry: every produced column is registered, directions, lookup errors, headline order, the short
lists, tuning objectives and formulas."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.common.types import Document, Qrels, Run
from retrieval_pipeline.core.datasets.context_qa.metrics import context_qa_metrics
from retrieval_pipeline.core.datasets.context_qa.similarity import SimilaritySettings
from retrieval_pipeline.core.evaluation.exports.tables import comparison_table
from retrieval_pipeline.core.evaluation.metrics import (
    HEADLINE_COLUMNS,
    METRIC_DESCRIPTIONS,
    METRICS,
    Judged,
    MetricInfo,
    UnknownMetricError,
    aggregate,
    compute_metric,
    describe_metric,
    headline_columns,
    higher_is_better,
    is_metric_column,
    known_metric_names,
    metric,
    metric_definitions_md,
    metric_label,
    per_query_metrics,
    resolve_metric,
    tuning_objectives,
    validate_metric_name,
    view_columns,
)
from retrieval_pipeline.core.evaluation.metrics.families.binary.hit_rate import hit_rate_at
from retrieval_pipeline.core.evaluation.metrics.registry import _index

QRELS: Qrels = {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 1}, "q3": {"d9": 1}}
RUN: Run = {"q1": [("d4", 0.9), ("d1", 0.8)], "q2": [("d2", 0.9)]}

TODAYS_HEADLINE = [
    "hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@5", "recall@10", "precision@5", "f1@5", "mrr",
    "context_coverage@5", "best_match_position@5",
    "ndcg@10", "not_found_rate", "avg_rank_when_found", "latency_mean_ms", "latency_p95_ms",
]  # fmt: skip


def context_frame() -> pd.DataFrame:
    """A context-QA frame on three tiny chunks (similarity to "abcd": c1 0.0, c2 1.0, c3 0.5)."""
    chunks = {d: Document(doc_id=d, text=t, kind="chunk") for d, t in {"c1": "wxyz", "c2": "abcd", "c3": "abxy"}.items()}
    run: Run = {"q1": [("c1", 0.9), ("c3", 0.8), ("c2", 0.7)]}
    return context_qa_metrics(
        run, {"q1": {"c2": 1, "c3": 1}}, {"q1": "abcd"}, chunks, SimilaritySettings(threshold=0.5), ranking=per_query_metrics
    )


def produced_columns() -> dict[str, set[str]]:
    """Per-query columns and aggregate keys of the ranking metrics (custom cut-offs too) and context QA."""
    per_query = per_query_metrics(RUN, QRELS)
    custom = per_query_metrics(RUN, QRELS, ks=(3, 20), ndcg_k=5, f1_k=10, precision_ks=(1, 7))
    context = context_frame()
    aggregates = [aggregate(frame, latencies_ms=[1.0, 2.0]) for frame in (per_query, custom, context)]
    return {
        "per_query": {*per_query.columns, *custom.columns, *context.columns},
        "aggregate": {key for result in aggregates for key in result},
    }


def test_every_produced_column_is_registered_with_the_right_kind() -> None:
    produced = produced_columns()
    for name in produced["per_query"]:
        assert metric(name).kind in ("per_query", "bookkeeping"), name
    for name in produced["aggregate"]:
        assert metric(name).kind in ("per_query", "summary"), name
    assert {"context_coverage@5", "best_match_position@10", "mrr@1", "hit@3", "ndcg@5", "precision@7"} <= produced["per_query"]


def test_aggregate_averages_exactly_the_registered_per_query_metrics() -> None:
    frame = context_frame()
    result = aggregate(frame)
    assert {c for c in frame.columns if is_metric_column(c)} <= set(result)
    assert not {"query_id", "n_relevant", "found", "first_relevant_rank"} & set(result)
    assert result["best_match_position@5"] == 3.0  # c2 (exact match) is third


def test_aggregate_skips_bookkeeping_and_averages_judge_scores_over_judged_queries() -> None:
    frame = per_query_metrics(RUN, QRELS)
    frame.insert(0, "retriever", "bm25")
    frame["top_hits"] = [["d4"], ["d2"], []]
    frame["error"] = [None, None, "timeout"]
    frame["judge_quality"] = pd.Series([0.5, None, 1.0], dtype=object)
    frame["judge_pass"] = pd.Series([False, None, True], dtype=object)
    result = aggregate(frame)
    assert result["judge_quality"] == 0.75 and result["judge_pass"] == 0.5
    assert not {"retriever", "top_hits", "error"} & set(result)


def test_aggregate_refuses_an_unregistered_column() -> None:
    frame = per_query_metrics(RUN, QRELS).assign(my_new_metric=1.0)
    with pytest.raises(KeyError, match="unknown metric 'my_new_metric'.*metrics/families/"):
        aggregate(frame)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("latency_mean_ms", False), ("latency_p95_ms", False), ("not_found", False), ("not_found_rate", False),
        ("avg_rank_when_found", False), ("best_match_position@5", False), ("best_match_position@20", False),
        ("hit_rate@1", True), ("recall@10", True), ("mrr", True), ("mrr@5", True), ("ndcg@10", True),
        ("context_coverage@5", True), ("judge_pass", True), ("n_queries", None), ("query_id", None),
    ],
)  # fmt: skip
def test_higher_is_better(name: str, expected: bool | None) -> None:
    assert higher_is_better(name) is expected


def test_patterns_resolve_any_cutoff() -> None:
    info, k = resolve_metric("ndcg@20")
    assert (info.name, k) == ("ndcg@{k}", 20)
    assert metric("hit_rate@500") is metric("hit_rate@1")
    assert describe_metric("recall@20").count("20") >= 2
    assert "{k}" not in describe_metric("best_match_position@3")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("nope", ""), ("recall", "needs a cut-off"), ("hit_rate@0", "cut-off must be an integer >= 1"),
        ("hit_rate@x", "cut-off must be"), ("hit_rate@{k}", "cut-off must be"), ("mrr@", "cut-off must be"),
        ("not_found_rate@5", "takes no cut-off"), ("n_relevant@5", "takes no cut-off"),
    ],
)  # fmt: skip
def test_unknown_names_raise_with_the_known_list(name: str, hint: str) -> None:
    with pytest.raises(KeyError) as caught:
        metric(name)
    assert isinstance(caught.value, UnknownMetricError)
    message = str(caught.value)
    assert message.startswith(f"unknown metric {name!r}") and hint in message
    assert all(known in message for known in ("hit_rate@{k}", "mrr", "latency_p95_ms", "best_match_position@{k}"))
    with pytest.raises(KeyError):
        describe_metric(name)
    with pytest.raises(KeyError):
        higher_is_better(name)


def test_validate_metric_name() -> None:
    validate_metric_name("hit_rate@5")
    validate_metric_name("mrr", max_k=10)
    validate_metric_name("hit_rate@10", max_k=10)
    with pytest.raises(ValueError, match=r"cut-off 500, deeper than the run depth 100: use hit_rate@100"):
        validate_metric_name("hit_rate@500", max_k=100)
    with pytest.raises(ValueError, match=re.escape("unknown metric 'hitrate@5'") + ".*hit_rate@{k}"):
        validate_metric_name("hitrate@5")
    with pytest.raises(ValueError, match="bookkeeping column, not a metric"):
        validate_metric_name("first_relevant_rank")


def test_descriptions_are_single_non_empty_sentences() -> None:
    for info in METRICS:
        text = info.describe(7)
        assert text and not text[0].islower() and text.endswith(".") and "{" not in text, info.name
    assert all(METRIC_DESCRIPTIONS.values())
    assert "recall@5" in METRIC_DESCRIPTIONS["hit_rate@5"] and "hit_rate@5" in METRIC_DESCRIPTIONS["recall@5"]


def test_headline_order_is_todays() -> None:
    assert list(HEADLINE_COLUMNS) == TODAYS_HEADLINE
    assert headline_columns() == TODAYS_HEADLINE
    available = pd.Index(["retriever", "latency_p95_ms", "mrr", "hit_rate@1", "n_queries", "context_coverage@5"])
    assert headline_columns(available) == ["hit_rate@1", "mrr", "context_coverage@5", "latency_p95_ms"]


def test_metric_definitions_markdown_covers_every_column() -> None:
    md = metric_definitions_md(["hit_rate@5", "best_match_position@5"])
    lines = md.splitlines()
    assert lines[0] == f"- **hit_rate@5**: {describe_metric('hit_rate@5')}"
    assert lines[1].startswith("- **best_match_position@5**: ")


def test_comparison_table_bolds_the_best_value_in_the_registered_direction() -> None:
    metrics = {
        "bm25": {"hit_rate@5": 0.9, "best_match_position@5": 2.0, "latency_p95_ms": 5.0, "n_queries": 3},
        "dense": {"hit_rate@5": 0.8, "best_match_position@5": 1.5, "latency_p95_ms": 9.0, "n_queries": 3},
    }
    rows = comparison_table(metrics, ["hit_rate@5", "best_match_position@5", "latency_p95_ms", "n_queries"]).splitlines()
    bm25, dense = (next(r for r in rows if name in r) for name in ("bm25", "dense"))
    assert "**0.900**" in bm25 and "**5.000**" in bm25 and "**1.500**" in dense
    assert "**" not in bm25.split("|")[-2] and "**" not in dense.split("|")[-2]  # n_queries has no better direction
    with pytest.raises(KeyError, match="unknown metric 'recall'"):
        comparison_table(metrics, ["recall"])


def test_comparison_table_leaves_a_column_without_values_unformatted() -> None:
    rows = comparison_table({"bm25": {"mrr": 0.5}, "dense": {"mrr": 0.25}}, ["mrr", "latency_mean_ms"]).splitlines()
    assert [cell.strip() for cell in rows[2].split("|")[1:-1]] == ["bm25", "**0.500**", "nan"]
    assert [cell.strip() for cell in rows[3].split("|")[1:-1]] == ["dense", "0.250", "nan"]


def test_registry_refuses_inconsistent_entries() -> None:
    with pytest.raises(ValueError, match="duplicate name"):
        _index([METRICS[0], METRICS[0]])
    with pytest.raises(ValueError, match="mention \\{k\\}"):
        _index([MetricInfo("recall@{k}", "No cut-off here.", True, "mean", "per_query", (5,))])
    with pytest.raises(ValueError, match="headline is a tuple"):
        _index([MetricInfo("recall@{k}", "Top {k}.", True, "mean", "per_query", True)])
    with pytest.raises(ValueError, match="per-query metrics are averaged"):
        _index([MetricInfo("x", "X.", True, "p95", "per_query")])
    with pytest.raises(ValueError, match="bookkeeping"):
        _index([MetricInfo("y", "Y.", True, "none", "bookkeeping")])
    assert len(known_metric_names()) == len(METRICS)


def test_the_short_lists_come_from_the_registry_in_todays_order() -> None:
    assert view_columns("console") == ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10"]
    assert [metric_label(name) for name in view_columns("console")] == ["hit@1", "hit@5", "MRR", "nDCG@10"]
    assert view_columns("summary") == ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "not_found_rate"]
    assert view_columns("chart") == ["hit_rate@5", "mrr", "ndcg@10"]
    assert view_columns("sweep") == ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@10"]
    assert view_columns("summary", ["mrr", "not_found_rate", "recall@5"]) == ["mrr", "not_found_rate"]
    assert metric_label("recall@20") == "recall@20"
    with pytest.raises(ValueError, match="unknown metric view 'nope'"):
        view_columns("nope")  # type: ignore[arg-type]


def test_tuning_objectives_are_the_flagged_names_with_a_formula() -> None:
    assert tuning_objectives() == [
        *["hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@1", "recall@5", "recall@10"],
        *["precision@5", "f1@5", "mrr", "ndcg@10"],
    ]
    assert all(metric(name).formula is not None and higher_is_better(name) for name in tuning_objectives())


def test_compute_metric_uses_the_entry_formula_and_refuses_columns_without_one() -> None:
    judged = Judged(
        gains=np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]]),
        ideal_gains=np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
        n_relevant=np.array([2, 1]),
        first_relevant_rank=np.array([2.0, np.nan]),
    )
    assert compute_metric("hit_rate@1", judged).tolist() == [0.0, 0.0]
    assert compute_metric("recall@3", judged).tolist() == [1.0, 0.0]
    assert compute_metric("mrr", judged).tolist() == [0.5, 0.0]
    assert compute_metric("mrr@1", judged).tolist() == [0.0, 0.0]
    assert compute_metric("map", judged).tolist() == pytest.approx([(1 / 2 + 2 / 3) / 2, 0.0])
    assert compute_metric("r_prec", judged).tolist() == [0.5, 0.0]
    assert compute_metric("ndcg", judged).tolist() == compute_metric("ndcg@3", judged).tolist()
    with pytest.raises(ValueError, match="'context_coverage@5' is not computed from a ranking"):
        compute_metric("context_coverage@5", judged)
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        compute_metric("nope", judged)


def test_registry_refuses_inconsistent_views_objectives_and_labels() -> None:
    with pytest.raises(ValueError, match=r"views\.console: a tuple of cut-offs"):
        _index([MetricInfo("recall@{k}", "Top {k}.", True, "mean", "per_query", (5,), views={"console": True})])
    with pytest.raises(ValueError, match=r"views\.elsewhere: unknown view"):
        _index([MetricInfo("mrr", "M.", True, "mean", "per_query", views={"elsewhere": True})])  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="a tuning objective needs a formula"):
        _index([MetricInfo("mrr", "M.", True, "mean", "per_query", objective=True)])
    with pytest.raises(ValueError, match="a tuning objective needs a formula, and higher must be better"):
        _index([MetricInfo("x@{k}", "X {k}.", False, "mean", "per_query", formula=hit_rate_at, objective=(5,))])
    with pytest.raises(ValueError, match="only per-query metrics have a formula"):
        _index([MetricInfo("n", "N.", None, "count", "summary", formula=hit_rate_at)])
    with pytest.raises(ValueError, match="the label mentions"):
        _index([MetricInfo("mrr", "M.", True, "mean", "per_query", label="MRR@{k}")])
