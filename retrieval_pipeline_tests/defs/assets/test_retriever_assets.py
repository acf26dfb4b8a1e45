"""Dataset x retriever in Dagster: one index and one runs asset per retriever, and adding one computes only it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import dagster as dg
import pandas as pd

from retrieval_pipeline.definitions import defs
from retrieval_pipeline_tests.defs.conftest import API_SUITE, VOCAB
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

PARTITION = "stdlib"


def registry(root: Path, retrievers: list[str]) -> Path:
    (root / "suites").mkdir(parents=True, exist_ok=True)
    (root / "suites" / "api.yaml").write_text(API_SUITE)
    path = root / "datasets.yaml"
    path.write_text(
        textwrap.dedent(f"""
        root: .
        defaults:
          filter: {{judge: none}}
          thresholds: {{hit_rate@5: {{min: 0.0, severity: ERROR}}}}
        datasets:
          stdlib:
            suites: [suites/api.yaml]
            corpus: {{introspect_modules: [json, csv]}}
            retrievers: {retrievers}
            baseline: {retrievers[-1]}
    """)
    )
    return path


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def metadata(result: dg.ExecuteInProcessResult, key: str) -> dict:
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key)
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_adding_a_retriever_builds_and_runs_only_that_retriever(tmp_path: Path) -> None:
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), registry(tmp_path / "in", ["bm25", "tfidf_plugin"]))
    instance = dg.DagsterInstance.ephemeral()
    assets = list(defs().assets)
    first = dg.materialize(assets, partition_key=PARTITION, resources=resources, instance=instance)
    assert first.success
    metrics = first.asset_value("retrieval_metrics").set_index("retriever")
    assert list(metrics.index) == ["bm25", "tfidf_plugin"]
    assert metadata(first, "retrievers/dense_minilm_index")["evaluated"] is False  # not listed: nothing built
    assert not (tmp_path / "out" / "indexes" / PARTITION / "dense_minilm").exists()
    assert metadata(first, "retrievers/tfidf_plugin_index")["persisted"] is True
    bm25_runs = tmp_path / "out" / "retrievers" / "bm25_runs" / f"{PARTITION}.parquet"
    before = bm25_runs.stat().st_mtime_ns

    registry(tmp_path / "in", ["bm25", "tfidf_plugin", "bm25_code"])  # the user adds one retriever
    selection = dg.AssetSelection.assets(["retrievers", "bm25_code_index"], ["retrievers", "bm25_code_runs"])
    selection = selection | dg.AssetSelection.assets("retrieval_runs").downstream()
    second = dg.materialize(assets, selection=selection, partition_key=PARTITION, resources=resources, instance=instance)
    assert second.success
    assert materialized(second) == {
        "retrievers/bm25_code_index",
        "retrievers/bm25_code_runs",
        "retrieval_runs",
        "query_results",
        "retrieval_metrics",
        "metric_significance",
        "retriever_pairs",
        "fusion_sweep",
        "failure_buckets",
        "evaluation_report",
        "evaluation_exports",
    }
    assert bm25_runs.stat().st_mtime_ns == before  # the unchanged retrievers were not recomputed
    table = second.asset_value("retrieval_metrics").set_index("retriever")
    assert list(table.index) == ["bm25", "tfidf_plugin", "bm25_code"]  # side by side, in the dataset's order
    pd.testing.assert_series_equal(table.loc["bm25"], metrics.loc["bm25"], check_names=False)
    params = metadata(second, "retrievers/bm25_code_runs")["params"]
    assert params["spec"]["tokenizer"] == "code" and params["corpus_sha256"] and params["versions"]["numpy"]
    assert (tmp_path / "out" / "exports" / PARTITION / "bm25_code.run").read_text().split()[5] == "bm25_code"  # TREC tag


def test_a_listed_retriever_without_runs_names_the_asset_to_materialise(tmp_path: Path) -> None:
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), registry(tmp_path / "in", ["bm25"]))
    instance = dg.DagsterInstance.ephemeral()
    assets = list(defs().assets)
    assert dg.materialize(assets, partition_key=PARTITION, resources=resources, instance=instance).success
    registry(tmp_path / "in", ["bm25", "bm25_code"])
    only_metrics = dg.AssetSelection.assets("retrieval_runs")
    result = dg.materialize(
        assets, selection=only_metrics, partition_key=PARTITION, resources=resources, instance=instance, raise_on_error=False
    )
    assert not result.success
    message = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_step_failure)
    assert "materialise `retrievers/bm25_code_runs` for this dataset first" in message


def test_retriever_assets_are_grouped_by_family_tagged_by_dataset_and_described_by_name():
    """The graph groups retrievers by family; ``tag:"dataset/<name>"`` selects the retriever assets a dataset builds;
    each description starts with the asset's full name (the graph cuts long names in the middle)."""
    import dagster as dg

    from retrieval_pipeline.defs.partitions import REGISTRY as PROJECT

    definitions = defs()
    graph = definitions.resolve_asset_graph()
    specs = {s.key: s for s in definitions.resolve_all_asset_specs()}
    for name in PROJECT.retrievers.names:
        spec = PROJECT.retrievers.specs.get(name)
        for suffix in ("index", "runs"):
            asset = specs[dg.AssetKey(["retrievers", f"{name}_{suffix}"])]
            assert asset.group_name == f"retrievers_{spec.kind if spec else 'invalid'}"
            assert asset.description.startswith(f"{name}_{suffix}: ")
    config = PROJECT.get("stdlib")
    selected = dg.AssetSelection.tag("dataset/stdlib", "").resolve(graph)
    runs = {k.path[1][: -len("_runs")] for k in selected if k.path[1].endswith("_runs")}
    indexes = {k.path[1][: -len("_index")] for k in selected if k.path[1].endswith("_index")}
    assert runs == set(config.retrievers)
    assert indexes == set(PROJECT.retrievers.closure(config.retrievers))
    assert len(selected) < len([k for k in specs if k.path[0] == "retrievers"]) / 2  # a dataset's view is a small part
