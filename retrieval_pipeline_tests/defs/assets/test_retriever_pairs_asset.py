"""The ``retriever_pairs`` asset on the tiny dataset: every retriever against every other, in the graph's run."""

from __future__ import annotations

import dagster as dg
import pytest

from retrieval_pipeline.core.evaluation.statistics import stats
from retrieval_pipeline.core.evaluation.statistics.pairwise import PAIR_COLUMNS, pairwise_metrics
from retrieval_pipeline.definitions import defs

PARTITION = "stdlib"
RETRIEVERS = ["bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"]


def _materialise(resources: dict) -> dg.ExecuteInProcessResult:
    selection = dg.AssetSelection.assets("retriever_pairs").upstream().required_multi_asset_neighbors()
    result = dg.materialize(list(defs().assets), selection=selection, partition_key=PARTITION, resources=resources, raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return result


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    event = next(m for m in result.get_asset_materialization_events() if m.asset_key == dg.AssetKey("retriever_pairs"))
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_too_few_queries_give_deltas_and_cis_but_no_p_values(tiny_resources) -> None:
    result = _materialise(tiny_resources())
    pairs = result.asset_value("retriever_pairs")
    query_results = result.asset_value("query_results")
    n = query_results["query_id"].nunique()
    assert n < 6  # the tiny dataset: below the default min_queries_for_test
    assert list(pairs.columns) == list(PAIR_COLUMNS)
    metrics = pairwise_metrics(query_results.columns)
    assert metrics == ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "not_found_rate"]
    assert len(pairs) == len(metrics) * 6 and list(dict.fromkeys(pairs["metric"])) == metrics
    assert list(zip(pairs["a"], pairs["b"]))[:3] == [("dense_minilm", "bm25"), ("hybrid_minmax_a0.5", "bm25"), ("hybrid_rrf_k60", "bm25")]
    assert pairs["p"].isna().all() and not pairs["significant"].any()
    assert (pairs["note"] == f"not enough queries for a test (n={n} < 6)").all()
    means = query_results.groupby("retriever")["hit_rate@5"].mean()
    for pair in pairs[pairs["metric"] == "hit_rate@5"].to_dict("records"):
        assert pair["delta"] == pytest.approx(means[pair["a"]] - means[pair["b"]], abs=1e-12)
        assert pair["ci_low"] <= pair["delta"] <= pair["ci_high"]
    meta = _metadata(result)
    assert (meta["pairs"], meta["pairs_tested"], meta["significant"]) == (str(len(pairs)), "0", "0")  # text: never plotted across datasets
    assert f"- hit@5: no test (not enough queries for a test (n={n} < 6))" in meta["comparison"]
    header = next(line for line in meta["comparison"].splitlines() if "hit@5: row − column" in line)
    assert header.split("|")[2:-1] == [f" {r} ".ljust(len(c)) for r, c in zip(RETRIEVERS, header.split("|")[2:-1])]


def test_with_enough_queries_every_pair_is_tested_and_holm_corrected_per_metric(tiny_resources) -> None:
    result = _materialise(tiny_resources("statistics: {min_queries_for_test: 2}"))
    pairs = result.asset_value("retriever_pairs")
    assert pairs["p"].notna().all() and (pairs["note"] == "").all()
    for _, part in pairs.groupby("metric"):
        assert part["p_holm"].tolist() == pytest.approx(stats.holm(part["p"].to_numpy()).tolist())
    assert _metadata(result)["pairs_tested"] == str(len(pairs))
