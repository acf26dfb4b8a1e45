"""The drift check on ``retrieval_metrics`` as the regression gate: blessed baseline, significance, flipped queries.

``retrieval_metrics`` alone is materialised on hand-made per-query results (written where the IO manager
reads ``query_results``), so each evaluation's ranks are known exactly.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.evaluation.history import BLESSED_TAG
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.defs.assets.evaluation import retrieval_metrics
from retrieval_pipeline.defs.partitions import dataset_partitions

RETRIEVERS = ["bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"]
QUERIES = [f"q{i:02d}" for i in range(24)]


def _results(gold_rank: dict[str, dict[str, int]]) -> pd.DataFrame:
    """Per-query results where query q's gold sits at ``gold_rank[retriever].get(q, 1)`` among 10 hits."""
    qrels = {q: {f"{q}-gold": 1} for q in QUERIES}
    frames = []
    for name in RETRIEVERS:
        run = {}
        for q in QUERIES:
            hits = [f"{q}-other{i}" for i in range(9)]
            hits.insert(gold_rank.get(name, {}).get(q, 1) - 1, f"{q}-gold")
            run[q] = [(d, 10.0 - i) for i, d in enumerate(hits)]
        frame = per_query_metrics(run, qrels)
        frame.insert(0, "retriever", name)
        frame["latency_ms"], frame["error"] = 1.0, None
        frame["top_hits"] = [[d for d, _ in run[q]] for q in frame["query_id"]]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _evaluate(resources, instance, results: pd.DataFrame, tags: dict[str, str] | None = None):
    path = Path(resources["settings"].out_dir) / "query_results" / "stdlib.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    results.to_parquet(path, index=False)
    source = dg.SourceAsset("query_results", partitions_def=dataset_partitions)  # read by the IO manager from `path`
    result = dg.materialize([retrieval_metrics, source], partition_key="stdlib", resources=resources, instance=instance, tags=tags)
    return {e.check_name: e for e in result.get_asset_check_evaluations()}["drift_hit_rate_at_5"]


def test_significant_drop_alerts_with_flipped_queries_and_blessing_picks_the_baseline(tiny_resources):
    resources = tiny_resources("drift: {rule: significance, min_drop: 0.05}")
    instance = dg.DagsterInstance.ephemeral()
    first = _evaluate(resources, instance, _results({}), tags={BLESSED_TAG: "true"})
    assert first.passed and "first evaluation" in first.description

    degraded = {"dense_minilm": {q: 8 for q in QUERIES[:12]}}  # 12 of 24 queries fall from rank 1 to rank 8
    drift = _evaluate(resources, instance, _results(degraded))
    assert not drift.passed and drift.severity == dg.AssetCheckSeverity.WARN
    assert drift.metadata["alerting"].value == "dense_minilm"  # BM25 and the hybrids did not move
    flipped = drift.metadata["flipped_queries"].value
    assert {(f["retriever"], f["query_id"], f["old_rank"], f["new_rank"]) for f in flipped} == {
        ("dense_minilm", q, 1, 8) for q in QUERIES[:12]
    }

    # unchanged since the previous run, but the blessed baseline is still the first evaluation: still an alert
    again = _evaluate(resources, instance, _results(degraded))
    assert not again.passed and "blessed by tag" in again.description


def test_small_or_insignificant_changes_do_not_alert(tiny_resources):
    resources = tiny_resources("drift: {rule: significance, min_drop: 0.05}")
    instance = dg.DagsterInstance.ephemeral()
    _evaluate(resources, instance, _results({}))
    one_query = _evaluate(resources, instance, _results({"dense_minilm": {"q00": 8}}))  # 1 of 24 flips: noise
    assert one_query.passed and "previous evaluation" in one_query.description


def test_relative_rule_stays_available(tiny_resources):
    resources = tiny_resources("drift: {rule: relative, max_relative_drop: 0.10}")
    instance = dg.DagsterInstance.ephemeral()
    _evaluate(resources, instance, _results({}))
    drift = _evaluate(resources, instance, _results({"dense_minilm": {q: 8 for q in QUERIES[:3]}}))  # -12.5%: over 10%
    assert not drift.passed and "relative rule" in drift.description and "dense_minilm" in drift.description
