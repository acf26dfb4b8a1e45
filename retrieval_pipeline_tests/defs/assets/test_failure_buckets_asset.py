"""``failure_buckets`` in Dagster: materialised on the tiny inline stdlib sample with the keyword encoder (no model)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.evaluation.buckets import BUCKETS, COLUMNS
from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.assets.diagnostics import FailureBucketsConfig
from retrieval_pipeline.defs.partitions import dataset_partitions

PARTITION = "stdlib"
KEY = dg.AssetKey("failure_buckets")


def metadata(result: dg.ExecuteInProcessResult, key: str) -> dict:
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key)
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_failure_buckets_is_an_evaluation_asset_per_dataset() -> None:
    graph = defs().resolve_asset_graph()
    node = graph.get(KEY)
    assert node.group_name == "diagnostics"  # the group is the file: defs/assets/diagnostics.py
    assert node.partitions_def == dataset_partitions
    assert {k.to_user_string() for k in node.parent_keys} == {"query_results", "retrieval_dataset", "corpus"}


def test_materialised_buckets_cover_every_miss_once(tiny_resources, tmp_path: Path) -> None:
    k = 1  # the tiny sample is easy at 5; at 1 every retriever misses something
    result = dg.materialize(
        list(defs().assets),
        selection=dg.AssetSelection.assets(KEY).upstream().required_multi_asset_neighbors(),
        partition_key=PARTITION,
        resources=tiny_resources(),
        instance=dg.DagsterInstance.ephemeral(),
        run_config=dg.RunConfig({"failure_buckets": FailureBucketsConfig(k=k)}),
    )
    assert result.success
    results = result.asset_value("query_results")
    frame = result.asset_value("failure_buckets")
    assert list(frame.columns) == list(COLUMNS)

    # the misses, counted from the evaluation's own hit_rate@1, are exactly the rows, one each
    missed = results.loc[results["hit_rate@1"] == 0, ["retriever", "query_id"]]
    assert len(missed) > 0  # precondition: something to explain
    assert sorted(map(tuple, frame[["retriever", "query_id"]].to_numpy())) == sorted(map(tuple, missed.to_numpy()))
    assert set(frame["bucket"]) <= set(BUCKETS) and frame["evidence"].str.len().gt(20).all()
    stored = pd.read_parquet(tmp_path / "out" / "failure_buckets" / f"{PARTITION}.parquet")
    assert len(stored) == len(frame) and list(stored["bucket"]) == list(frame["bucket"])  # the project's IO manager kept it

    meta = metadata(result, "failure_buckets")
    assert (int(meta["k"]), int(meta["misses"])) == (k, len(missed))  # text: no plot across datasets
    assert sum(int(meta[f"misses/{b}"]) for b in BUCKETS) == len(missed)
    table = meta["bucket_counts"].splitlines()
    retrievers = list(dict.fromkeys(results["retriever"]))
    assert len(table) == 2 + len(retrievers)  # one markdown table: header, rule, a line per retriever
    for retriever, line in zip(retrievers, table[2:]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        queries, misses, *per_bucket = (int(c) for c in cells[1:])
        assert cells[0] == retriever and queries == results.loc[results["retriever"] == retriever, "query_id"].nunique()
        assert misses == int((missed["retriever"] == retriever).sum()) == sum(per_bucket)
    assert meta["examples"].startswith("| retriever")
