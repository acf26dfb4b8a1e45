"""The whole asset graph, in-process, on a tiny inline dataset with the keyword encoder (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd

from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.schedules import weekly_evaluation_schedule
from retrieval_pipeline.defs.sensors import retrieval_alert_sensor
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

PARTITION = "stdlib"


def all_assets():
    return list(defs().assets)


def materialize(resources, instance):
    return dg.materialize(all_assets(), partition_key=PARTITION, resources=resources, instance=instance, raise_on_error=False)


def value(result, key: str) -> pd.DataFrame:
    return result.asset_value(key) if hasattr(result, "asset_value") else result.output_for_node(key)


def test_definitions_load_with_schedule_sensor_and_checks():
    d = defs()
    weekly = d.resolve_job_def("weekly_evaluation")
    every_asset = {key for assets in d.assets for key in assets.keys}
    assert weekly.asset_layer.selected_asset_keys == every_asset  # inputs, dataset, indexes, runs, metrics, report, verifier
    assert d.resolve_schedule_def("weekly_evaluation_schedule").cron_schedule == "0 3 * * 1"
    assert d.resolve_sensor_def("retrieval_alert_sensor") is not None
    checks = {k.name for k in d.resolve_asset_graph().asset_check_keys}
    assert {"min_hit_rate_at_5", "min_mrr", "drift_hit_rate_at_5"} <= checks


def test_graph_end_to_end_counts_add_up_and_rerun_embeds_nothing(tiny_resources, tmp_path):
    resources = tiny_resources()
    instance = dg.DagsterInstance.ephemeral()
    result = materialize(resources, instance)
    assert result.success, [e.message for e in result.all_events if e.is_failure]

    cases = value(result, "raw_cases")
    rejects = value(result, "case_rejects")
    assert len(cases) == 5 and len(rejects) == 1  # 6 rows read: the case without an id is rejected
    assert "id" in rejects.iloc[0]["reason"] and rejects.iloc[0]["source_file"].endswith("api_understanding.yaml")

    pairs = value(result, "qa_pairs").set_index("query_id")
    assert pairs.loc["api_understanding:missing_gold", "status"] == "unresolved"
    assert list(pairs.loc["api_understanding:serialise", "gold_doc_ids"]) == ["json.dumps"]
    assert list(pairs.loc["fix_errors:01_writer", "gold_doc_ids"]) == ["csv.DictWriter"]

    verified = value(result, "verified_pairs")
    assert len(verified) == len(pairs)  # nothing lost: every retrieval pair has a decision
    assert set(verified["judge"]) <= {"offline_lexical", "none"}
    assert verified["reason"].str.len().gt(0).all()

    dataset = value(result, "retrieval_dataset")
    assert len(dataset) == int(verified["keep"].sum())
    jsonl = Path(resources["settings"].export_path(PARTITION, "retrieval_dataset.jsonl"))
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["id"] for r in records] == list(dataset["id"])
    assert all(r["positive_ctxs"] and {"fqn", "text", "rank_relevance"} <= set(r["positive_ctxs"][0]) for r in records)

    metrics = value(result, "retrieval_metrics").set_index("retriever")
    assert list(metrics.index) == ["bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"]
    from retrieval_pipeline_tests.defs.independent import hit_rate_at  # hit_rate@5 from the runs with pandas alone

    hit_rate = hit_rate_at(value(result, "retrieval_runs"), dataset, 5)
    assert set(hit_rate) == set(metrics.index) and all(abs(metrics.loc[r, "hit_rate@5"] - hit_rate[r]) < 1e-12 for r in hit_rate)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["min_hit_rate_at_5"].passed and evaluations["drift_hit_rate_at_5"].passed

    dense_meta = [m for m in result.get_asset_materialization_events() if m.asset_key == dg.AssetKey(["retrievers", "dense_minilm_index"])][
        0
    ]
    assert dense_meta.materialization.metadata["embedded_now"].value > 0

    again = materialize(resources, instance)
    assert again.success
    dense_meta = [m for m in again.get_asset_materialization_events() if m.asset_key == dg.AssetKey(["retrievers", "dense_minilm_index"])][
        0
    ]
    assert dense_meta.materialization.metadata["embedded_now"].value == 0


def test_failing_error_check_fails_the_run_and_sensor_alerts_once(tiny_resources):
    resources = tiny_resources(thresholds="thresholds: {hit_rate@5: {min: 1.01, severity: ERROR}}")
    instance = dg.DagsterInstance.ephemeral()
    result = materialize(resources, instance)
    assert not result.success  # blocking ERROR check
    evaluation = {e.check_name: e for e in result.get_asset_check_evaluations()}["min_hit_rate_at_5"]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR

    context = dg.build_sensor_context(instance=instance, resources={"alerts": resources["alerts"]})
    tick = retrieval_alert_sensor.evaluate_tick(context)
    alerts = resources["alerts"].sink().read()
    assert len(alerts) == 1 and alerts[0]["dataset"] == PARTITION
    assert any(f["check"] == "min_hit_rate_at_5" for f in alerts[0]["failed_checks"])

    again = dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources={"alerts": resources["alerts"]})
    retrieval_alert_sensor.evaluate_tick(again)
    assert len(resources["alerts"].sink().read()) == 1  # once per failing evaluation


def test_drift_against_previous_materialisation_raises_an_alert(tiny_resources):
    # the tiny dataset has too few queries for the significance rule: the relative rule is tested here
    # (the significance rule: test_regression_gate_asset.py)
    resources = tiny_resources("drift: {rule: relative}")
    instance = dg.DagsterInstance.ephemeral()
    assert materialize(resources, instance).success
    # a degenerate encoder (every text the same vector) makes the dense retriever collapse
    degraded = {**resources, "encoder": KeywordEncoderResource(vocabulary=["zzzz"])}
    result = materialize(degraded, instance)
    drift = {e.check_name: e for e in result.get_asset_check_evaluations()}["drift_hit_rate_at_5"]
    assert not drift.passed and drift.severity == dg.AssetCheckSeverity.WARN
    # only retrievers that use the encoder can have moved; BM25 is unchanged
    assert any(n in drift.description for n in ("dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"))
    assert "bm25 " not in drift.description

    context = dg.build_sensor_context(instance=instance, resources={"alerts": resources["alerts"]})
    retrieval_alert_sensor.evaluate_tick(context)
    alerts = resources["alerts"].sink().read()
    assert len(alerts) == 1 and alerts[0]["failed_checks"][0]["check"] == "drift_hit_rate_at_5"


def test_weekly_schedule_requests_every_dataset_with_inputs_present():
    context = dg.build_schedule_context(
        scheduled_execution_time=pd.Timestamp("2026-11-23T03:00:00Z").to_pydatetime(), repository_def=defs().get_repository_def()
    )
    data = weekly_evaluation_schedule.evaluate_tick(context)
    from retrieval_pipeline.core.registry import load_registry

    expected = [n for n, c in load_registry().datasets.items() if c.weekly and not c.missing_inputs()]
    requested = sorted(r.partition_key for r in data.run_requests or [])
    assert requested == sorted(expected)
    on_demand = [n for n, c in load_registry().datasets.items() if not c.weekly]  # the scale benchmark's 546k-document corpus
    assert on_demand and not set(on_demand) & set(requested)


def test_sample_size_evaluates_only_the_first_queries(tiny_resources):
    resources = tiny_resources()
    result = dg.materialize(
        all_assets(),
        partition_key=PARTITION,
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
        run_config=dg.RunConfig(ops={"retrieval_runs": {"config": {"sample_size": 1}}}),
    )
    assert result.success
    results = result.asset_value("query_results")
    assert results["query_id"].nunique() == 1  # the unsampled queries are not scored as misses
