"""Metric names with any cut-off: every spelling maps to one canonical name; bad names say why."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.evaluation.metrics import MetricName, parse_metric, parse_metrics


@pytest.mark.parametrize(
    ("name", "canonical", "trec_eval"),
    [
        ("ndcg@20", "ndcg@20", "ndcg_cut.20"),
        ("NDCG", "ndcg", "ndcg"),
        ("ndcg_cut.10", "ndcg@10", "ndcg_cut.10"),
        ("recall@100", "recall@100", "recall.100"),
        ("R@5", "recall@5", "recall.5"),
        ("mrr@10", "mrr@10", None),
        ("mrr", "mrr", "recip_rank"),
        ("recip_rank", "mrr", "recip_rank"),
        ("P@3", "precision@3", "P.3"),
        ("P_5", "precision@5", "P.5"),
        ("precision@7", "precision@7", "P.7"),
        ("R-prec", "r_prec", "Rprec"),
        ("Rprec", "r_prec", "Rprec"),
        ("map", "map", "map"),
        ("map@100", "map@100", "map_cut.100"),
        ("hit_rate@5", "hit_rate@5", "success.5"),
        ("hit@1", "hit_rate@1", "success.1"),
        ("success@10", "hit_rate@10", "success.10"),
    ],
)
def test_spellings(name: str, canonical: str, trec_eval: str | None) -> None:
    parsed = parse_metric(name)
    assert parsed.name == str(parsed) == canonical
    assert parsed.trec_eval_measure == trec_eval
    assert parse_metric(parsed) is parsed
    assert parsed.describe()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndgc@10", "unknown metric 'ndgc@10'"),
        ("recall", "needs a cut-off, e.g. recall@10"),
        ("P@0", "cut-off must be an integer >= 1"),
        ("R-prec@5", "takes no cut-off"),
        ("rprec@5", "takes no cut-off"),
        ("ndcg@x", "unknown metric"),
        (5, "metric names are strings"),
    ],
)
def test_bad_names(name: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_metric(name)  # type: ignore[arg-type]


def test_parse_metrics_drops_repeats_and_needs_one() -> None:
    assert parse_metrics(["P@3", "precision@3", "map"]) == [MetricName("precision", 3), MetricName("map")]
    assert parse_metrics("ndcg@10") == [MetricName("ndcg", 10)]
    with pytest.raises(ValueError, match="no metric given"):
        parse_metrics([])
