"""The ``evaluation_report`` asset: the HTML file, its metadata, the weekly trend read from the instance, its place in the graph."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import dagster as dg
import pytest
from PIL import Image

from retrieval_pipeline.core.evaluation.scoring import metric_table
from retrieval_pipeline.core.evaluation.statistics.significance import significance_table
from retrieval_pipeline.core.report.data import trend_frame
from retrieval_pipeline.core.report.mlflow_log import flatten_params, sanitise_name
from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.assets.report import SUMMARY_MAX_BYTES, evaluation_report, metrics_history
from retrieval_pipeline.defs.mlflow_resource import MLflowResource
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import PipelineSettings
from retrieval_pipeline_tests.core.report.test_html import (
    buckets_frame,
    corpus_frame,
    dataset_frame,
    metrics_frame,
    pairs_frame,
    query_results_frame,
    significance_frame,
    sweep_frame,
)

PARTITION = "stdlib"
INPUTS = ("metric_significance", "retriever_pairs", "query_results", "fusion_sweep", "failure_buckets", "retrieval_dataset", "corpus")


def _materialise_metrics(instance: dg.DagsterInstance, partition: str, metadata: dict) -> None:
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="retrieval_metrics", partition=partition, metadata=metadata))


def _inputs() -> dict:
    query_results = query_results_frame()
    return {
        "metric_significance": significance_frame(),
        "retriever_pairs": pairs_frame(),
        "query_results": query_results,
        "fusion_sweep": sweep_frame(),
        "failure_buckets": buckets_frame(),
        "retrieval_dataset": dataset_frame(),
        "corpus": corpus_frame(),
    }


@pytest.fixture
def instance_with_history():
    """An instance holding two ``stdlib`` evaluations (old flat keys, then the ``metrics`` JSON) and one of another dataset."""
    instance = dg.DagsterInstance.ephemeral()
    _materialise_metrics(instance, PARTITION, {"bm25/hit_rate@5": 0.25, "bm25/mrr": 0.2, "comparison": dg.MetadataValue.md("| x |")})
    _materialise_metrics(instance, PARTITION, {"metrics": dg.MetadataValue.json({"bm25": {"hit_rate@5": 0.5}})})
    _materialise_metrics(instance, "python_nq", {"metrics": dg.MetadataValue.json({"bm25": {"hit_rate@5": 0.9, "ndcg@10": 0.8}})})
    return instance


def test_metrics_history_reads_only_this_dataset_as_plain_values(instance_with_history):
    history = metrics_history(instance_with_history, PARTITION)
    assert len(history) == 2
    newest, oldest = history[0][1], history[1][1]  # newest first
    assert newest == {"metrics": {"bm25": {"hit_rate@5": 0.5}}}
    assert oldest["bm25/hit_rate@5"] == 0.25 and oldest["comparison"] == "| x |"


def test_asset_writes_the_report_and_returns_path_size_trend_and_summary(tmp_path: Path, instance_with_history):
    settings = PipelineSettings(out_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    context = dg.build_asset_context(
        partition_key=PARTITION, instance=instance_with_history, resources={"settings": settings, "mlflow": MLflowResource()}
    )
    result = evaluation_report(context, **_inputs())

    path = tmp_path / "out" / "exports" / PARTITION / "report.html"
    meta = result.metadata
    assert meta["report"].value == str(path) and path.is_file()
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "Retrieval evaluation: stdlib" in text
    assert float(meta["size_kb"]) == pytest.approx(path.stat().st_size / 1024, abs=0.1)
    # the two past stdlib evaluations and this one fall in one week: this one's values supersede theirs
    # (one point per retriever and metric), and the other dataset's evaluation is not read
    current = trend_frame([(0.0, {"metrics": metric_table(_inputs()["query_results"], []).by_retriever})])
    assert meta["trend_weeks"] == "1" and int(meta["trend_points"]) == len(current) > 2
    assert 'data-chart="trend"' in text
    assert meta["inputs_without_data"].value == []

    summary = meta["summary"].value
    assert len(summary.encode()) <= SUMMARY_MAX_BYTES
    assert "| retriever | hit_rate@1 | hit_rate@5 | mrr | not_found_rate |" in summary
    pngs = re.findall(r"!\[\w+\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", summary)
    assert len(pngs) == 2 and all(Image.open(io.BytesIO(base64.b64decode(p))).format == "PNG" for p in pngs)
    headline = meta["headline"].value
    assert set(headline) == {"bm25", "dense", "hybrid_mm"}
    assert all(v == round(v, 4) for ms in headline.values() for v in ms.values())
    json.dumps(headline)  # plain JSON


def test_asset_with_empty_new_inputs_still_writes_a_report(tmp_path: Path):
    settings = PipelineSettings(out_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    context = dg.build_asset_context(
        partition_key=PARTITION, instance=dg.DagsterInstance.ephemeral(), resources={"settings": settings, "mlflow": MLflowResource()}
    )
    inputs = _inputs() | {
        "metric_significance": significance_frame().iloc[0:0],
        "fusion_sweep": sweep_frame().iloc[0:0],
        "failure_buckets": buckets_frame().iloc[0:0],
    }
    result = evaluation_report(context, **inputs)
    text = Path(result.metadata["report"].value).read_text(encoding="utf-8")
    assert "No fusion sweep for this dataset" in text and "No failure buckets" in text
    assert sorted(result.metadata["inputs_without_data"].value) == ["failure_buckets", "fusion_sweep", "metric_significance"]
    assert result.metadata["trend_weeks"] == "1"  # a first evaluation: its own point is the trend


def test_asset_is_in_the_graph_partitioned_in_the_report_group_after_its_inputs():
    graph = defs().resolve_asset_graph()
    node = graph.get(dg.AssetKey("evaluation_report"))
    # the inputs, and evaluation_exports (no input: it runs first, so the exports logged to MLflow are this evaluation's)
    assert {k.to_user_string() for k in node.parent_keys} == {*INPUTS, "evaluation_exports"}
    assert node.group_name == "report"  # the group is the file: defs/assets/report.py
    assert node.partitions_def == dataset_partitions


@pytest.mark.integration
def test_whole_graph_on_the_tiny_dataset_writes_the_report(tiny_resources, tmp_path: Path):
    """A real in-process run of every asset on the tiny inline dataset (keyword encoder), twice: the trend grows."""
    resources = tiny_resources()
    instance = dg.DagsterInstance.ephemeral()
    assets = list(defs().assets)
    for _ in range(2):
        result = dg.materialize(assets, partition_key=PARTITION, resources=resources, instance=instance, raise_on_error=False)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
    report = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("evaluation_report")]
    meta = report[0].materialization.metadata
    path = Path(meta["report"].value)
    assert path == tmp_path / "out" / "exports" / PARTITION / "report.html" and path.is_file()
    text = path.read_text(encoding="utf-8")
    assert 'data-chart="bars"' in text and 'data-chart="ranks"' in text and 'data-chart="trend"' in text
    assert int(meta["trend_points"].value) > 0  # the first run's metrics (and this run's) are in the history


def _registry_named_inputs(settings: PipelineSettings) -> tuple[dict, list[str]]:
    """The inputs with the retrievers renamed to three of the dataset's own (so each has its spec), and a real
    ``metric_significance`` computed from them; and those names."""
    config = settings.dataset(PARTITION)
    names = dict(zip(["bm25", "dense", "hybrid_mm"], config.retrievers[:3]))
    inputs = _inputs()
    for key in ("query_results", "failure_buckets"):
        inputs[key] = inputs[key].assign(retriever=inputs[key]["retriever"].map(names))
    retrievers = list(names.values())
    inputs["metric_significance"] = significance_table(inputs["query_results"], retrievers, retrievers[0], config.statistics)
    return inputs, retrievers


def test_asset_logs_the_evaluation_to_a_real_mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """With a tracking URI, the report asset logs a parent run (dataset settings, report, exports) with a child
    run per retriever (its spec as params, every mean and its CI at the evaluation week)."""
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    settings = PipelineSettings(out_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    resources = {"settings": settings, "mlflow": MLflowResource(tracking_uri=uri, experiment="test_eval")}
    context = dg.build_asset_context(partition_key=PARTITION, instance=dg.DagsterInstance.ephemeral(), resources=resources)
    inputs, retrievers = _registry_named_inputs(settings)
    # what evaluation_exports left: the results, the qrels and one retriever's TREC run (the others' are absent)
    exports = {name: settings.export_path(PARTITION, name) for name in ("evaluation_results.json", "qrels.txt", f"{retrievers[0]}.run")}
    for name, path in exports.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name}\n")
    result = evaluation_report(context, **inputs)

    run_id, step = result.metadata["mlflow_run_id"], int(result.metadata["mlflow_step"])  # text in the UI: not plotted
    client = mlflow.MlflowClient(tracking_uri=uri)
    parent = client.get_run(run_id)
    config = settings.dataset(PARTITION)
    assert parent.data.params["baseline"] == "bm25" and parent.data.tags["dataset"] == PARTITION
    assert parent.data.params["statistics.confidence"] == str(config.statistics.confidence)
    assert parent.data.params["retrievers"] == json.dumps(config.retrievers)
    assert (parent.data.params["queries"], parent.data.params["corpus_documents"]) == ("6", str(len(inputs["corpus"])))
    assert sorted(a.path for a in client.list_artifacts(run_id)) == sorted(["report.html", *exports])

    # one child per retriever, as MLflow's run comparison finds them
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    frame = mlflow.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{run_id}'")
    assert sorted(frame["tags.mlflow.runName"]) == sorted(retrievers)
    assert dict(zip(frame["tags.mlflow.runName"], frame["run_id"])) == result.metadata["mlflow_child_runs"].value
    table = metrics_frame(inputs["query_results"]).set_index("retriever")
    significance = inputs["metric_significance"].set_index(["retriever", "metric"])
    specs = settings.registry().retrievers
    for name, child_id in result.metadata["mlflow_child_runs"].value.items():
        child = client.get_run(child_id)
        assert child.data.params == flatten_params(specs.get(name).model_dump(mode="json"))  # the spec, as the registry states it
        assert child.data.params["kind"] == specs.get(name).kind
        for metric in ("hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr", "not_found_rate"):
            key = sanitise_name(metric)
            mean, low, high = (child.data.metrics[k] for k in (key, f"{key}_ci_low", f"{key}_ci_high"))
            assert mean == pytest.approx(float(table.loc[name, metric]))
            assert (low, high) == tuple(significance.loc[(name, metric), ["ci_low", "ci_high"]])
            assert low <= mean + 1e-12 and mean <= high + 1e-12
        history = client.get_metric_history(child_id, "hit_rate_at_5")
        assert [(h.step, h.value) for h in history] == [(step, pytest.approx(float(table.loc[name, "hit_rate@5"])))]
    # two retrievers side by side, metric by metric
    side_by_side = frame.set_index("tags.mlflow.runName").loc[retrievers[:2], ["metrics.mrr_ci_low", "metrics.mrr", "metrics.mrr_ci_high"]]
    assert side_by_side["metrics.mrr"].tolist() == pytest.approx(table.loc[retrievers[:2], "mrr"].tolist())
    assert (side_by_side["metrics.mrr_ci_low"] <= side_by_side["metrics.mrr_ci_high"]).all()
