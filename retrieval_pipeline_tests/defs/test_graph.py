"""The whole asset graph, in-process, on a tiny inline dataset with the keyword encoder (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd

from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.assets.alerts import RECORD_OP, alert_key, record_alerts_job
from retrieval_pipeline.defs.schedules import weekly_evaluation_schedule
from retrieval_pipeline.defs.sensors import retrieval_alert_sensor
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

PARTITION = "stdlib"


def all_assets():
    """The executable assets (not the non-executable metric_trends/<dataset> specs, which only receive observations)."""
    return [a for a in defs().assets if isinstance(a, dg.AssetsDefinition)]


def materialize(resources, instance):
    return dg.materialize(all_assets(), partition_key=PARTITION, resources=resources, instance=instance, raise_on_error=False)


def value(result, key: str) -> pd.DataFrame:
    return result.asset_value(key) if hasattr(result, "asset_value") else result.output_for_node(key)


def test_definitions_load_with_schedule_sensor_and_checks():
    d = defs()
    weekly = d.resolve_job_def("weekly_evaluation")
    every_asset = {key for assets in d.assets if isinstance(assets, dg.AssetsDefinition) for key in assets.keys}  # not the trend specs
    assert weekly.asset_layer.selected_asset_keys == every_asset  # inputs, dataset, indexes, runs, metrics, report, verifier
    assert d.resolve_schedule_def("weekly_evaluation_schedule").cron_schedule == "0 3 * * 1"
    assert d.resolve_sensor_def("retrieval_alert_sensor") is not None
    # what the code server builds (a name used twice, e.g. a job and an op, fails only here)
    repository = d.get_repository_def()
    repository.load_all_definitions()
    assert repository.get_job("record_alerts").graph.node_defs[0].name == RECORD_OP
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
    assert int(dense_meta.materialization.metadata["embedded_now"].value) > 0
    assert_no_number_to_plot_across_datasets(result)
    assert_metrics_table_and_trend(result, instance, metrics)

    again = materialize(resources, instance)
    assert again.success
    dense_meta = [m for m in again.get_asset_materialization_events() if m.asset_key == dg.AssetKey(["retrievers", "dense_minilm_index"])][
        0
    ]
    assert int(dense_meta.materialization.metadata["embedded_now"].value) == 0
    trend = instance.fetch_observations(dg.AssetKey(["metric_trends", PARTITION]), limit=10).records
    assert len(trend) == 2  # one point per evaluation of this dataset, on its own unpartitioned key


def _numbers(metadata) -> list[str]:
    return [k for k, v in metadata.items() if isinstance(v.value, (int, float)) and not isinstance(v.value, bool)]


def assert_no_number_to_plot_across_datasets(result) -> None:
    """Every asset is partitioned by dataset; the UI plots a partitioned asset's numeric metadata across partitions
    (a line from one dataset to the next), so no materialisation or check result of the graph carries a number."""
    numeric = {e.asset_key.to_user_string(): _numbers(e.materialization.metadata) for e in result.get_asset_materialization_events()}
    assert {k: v for k, v in numeric.items() if v} == {}
    checks = {e.check_name: _numbers(e.metadata) for e in result.get_asset_check_evaluations()}
    assert {k: v for k, v in checks.items() if v} == {}


def assert_metrics_table_and_trend(result, instance, metrics: pd.DataFrame) -> None:
    """retrieval_metrics shows a typed headline table (hit@5 per retriever); the dataset's trend key gets the floats."""
    event = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("retrieval_metrics")][0]
    headline = event.materialization.metadata["headline"]
    assert isinstance(headline, dg.TableMetadataValue)
    assert {c.name: c.type for c in headline.schema.columns}["hit@5"] == "float"
    rows = {r.data["retriever"]: r.data for r in headline.records}
    assert set(rows) == set(metrics.index)
    assert all(abs(rows[r]["hit@5"] - metrics.loc[r, "hit_rate@5"]) <= 5e-4 for r in rows)  # 3 digits
    assert rows["bm25"]["role"] == "baseline" and rows["bm25"]["queries"] == int(metrics.loc["bm25", "n_queries"])
    observed = instance.fetch_observations(dg.AssetKey(["metric_trends", PARTITION]), limit=1).records[0]
    values = observed.event_log_entry.asset_observation.metadata
    assert abs(values["bm25 hit@5"].value - metrics.loc["bm25", "hit_rate@5"]) < 1e-4
    assert {"bm25 MRR", "bm25 nDCG@10"} <= set(values) and observed.event_log_entry.asset_observation.partition is None


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
    assert not tick.cursor.startswith("{") and "retrieval_metrics=" in tick.cursor  # no raw JSON in the tick list
    # the tick that alerted requests the run that records the alert: the tick list reads "1 run requested", not the
    # "0 runs requested" of every idle tick
    assert tick.skip_message is None and len(tick.run_requests) == 1
    request = tick.run_requests[0]
    assert request.run_key == f"alerts:{tick.cursor}" and request.tags["retrieval_pipeline/alerts"] == f"1 ({PARTITION})"
    [record] = request.run_config["ops"][RECORD_OP]["config"]["alerts"]
    assert record["dataset"] == PARTITION and record["summary"] == alerts[0]["summary"]

    # the run materialises the alert on alerts/<dataset>: the text, the failed checks, a link to the evaluation's run
    assert record_alerts_job.execute_in_process(run_config=request.run_config, instance=instance).success
    stored = instance.fetch_materializations(alert_key(PARTITION), limit=1).records[0].asset_materialization.metadata
    run = alerts[0]["run_id"][:8]
    assert (
        stored["alert"].value.startswith(f"retrieval_metrics[{PARTITION}] run {run}: ")
        and "ERROR min_hit_rate_at_5" in stored["alert"].value
    )
    assert stored["severity"] == dg.MetadataValue.text("ERROR")
    assert stored["source_run"].value == alerts[0]["run_id"] and stored["retrieval_metrics failed checks"].value >= 1
    assert "quality_report failed checks" not in stored  # one plot per source: no line joins two kinds of alert
    assert "min_hit_rate_at_5" in [r.data["check"] for r in stored["failed_checks"].value.records]
    # "Re-execute" on the run page starts the same config again: the alert is not recorded twice
    assert record_alerts_job.execute_in_process(run_config=request.run_config, instance=instance).success
    assert len(instance.fetch_materializations(alert_key(PARTITION), limit=10).records) == 1

    again = dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources={"alerts": resources["alerts"]})
    idle = retrieval_alert_sensor.evaluate_tick(again)
    assert len(resources["alerts"].sink().read()) == 1  # once per failing evaluation
    assert idle.skip_message == "no new evaluation: no alert" and not idle.run_requests  # idle: "Skipped", no run


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
    tick = retrieval_alert_sensor.evaluate_tick(context)
    alerts = resources["alerts"].sink().read()
    assert len(alerts) == 1 and alerts[0]["failed_checks"][0]["check"] == "drift_hit_rate_at_5"

    # the alert record names the retriever that fell and plots its hit@5 before and after (on stdlib's own key)
    [request] = tick.run_requests
    assert record_alerts_job.execute_in_process(run_config=request.run_config, instance=instance).success
    stored = instance.fetch_materializations(alert_key(PARTITION), limit=1).records[0].asset_materialization.metadata
    dropped = alerts[0]["failed_checks"][0]["dropped"]
    assert stored["drift_retriever"].value in dropped and stored["drift_retriever"].value in drift.description
    before, after = stored["hit@5 before"].value, stored["hit@5 after"].value
    assert before > after and before == round(dropped[stored["drift_retriever"].value]["before"], 4)


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


def test_a_quick_look_in_the_projects_own_out_dir_is_refused_not_silently_written(tiny_resources, tmp_path):
    """A sample_size run writes the dataset's outputs like a full run: in the project's data/out it would replace the
    full evaluation with a 20-query one. It is refused there (before anything is written), with the command that runs
    it in its own folder; elsewhere, or with overwrite_main_outputs, it runs."""
    from retrieval_pipeline.defs.assets.retrieval import RunsConfig, side_run_refusal
    from retrieval_pipeline.defs.resources import DEFAULT_OUT_DIR, PipelineSettings

    resources = tiny_resources()
    main = PipelineSettings(**{**resources["settings"].model_dump(), "out_dir": str(DEFAULT_OUT_DIR)})
    result = dg.materialize(
        [a for a in all_assets() if isinstance(a, dg.AssetsDefinition)],
        selection=["retrieval_runs"],
        partition_key=PARTITION,
        resources={**resources, "settings": main},
        instance=dg.DagsterInstance.ephemeral(),
        run_config=dg.RunConfig(ops={"retrieval_runs": {"config": {"sample_size": 20}}}),
        raise_on_error=False,
    )
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.message
    assert "sample_size=20 would replace the full evaluation of stdlib" in failure and "--out-dir data/out/quick-look" in failure
    assert side_run_refusal(RunsConfig(sample_size=20, overwrite_main_outputs=True), str(DEFAULT_OUT_DIR), PARTITION) is None
    assert side_run_refusal(RunsConfig(sample_size=20), str(tmp_path), PARTITION) is None
    assert side_run_refusal(RunsConfig(), str(DEFAULT_OUT_DIR), PARTITION) is None  # a full run


def test_unused_retrievers_runs_are_read_as_absent_without_a_warning_each(tiny_resources):
    """retrieval_runs reads the runs of every registered retriever, most of them never built for a dataset (``make run``
    and a quick look leave their steps out): Dagster logged one "Couldn't load partition" WARNING per missing one."""
    from retrieval_pipeline.defs.assets.retrieval import RETRIEVER_NAMES, runs_key

    resources = tiny_resources()
    listed = resources["settings"].registry().get(PARTITION).retrievers
    unused = [runs_key(n) for n in RETRIEVER_NAMES if n not in listed]
    instance = dg.DagsterInstance.ephemeral()
    selection = dg.AssetSelection.all() - dg.AssetSelection.assets(*unused)
    result = dg.materialize(all_assets(), selection=selection, partition_key=PARTITION, resources=resources, instance=instance)
    assert result.success and len(unused) > 10
    messages = [e.user_message or "" for e in instance.all_logs(result.run_id)]
    assert not [m for m in messages if "Couldn't load partition" in m]
    assert len(result.asset_value("retrieval_runs")["retriever"].unique()) == len(listed)


def test_the_sensor_cursor_is_readable_and_reads_the_old_json_one():
    from retrieval_pipeline.defs.sensors import read_cursor, tick_message, write_cursor

    seen = {"retrieval_metrics": 34, "quality_report": 12}
    assert write_cursor(seen) == "quality_report=12,retrieval_metrics=34" and read_cursor(write_cursor(seen)) == seen
    assert read_cursor('{"quality_report": 12, "retrieval_metrics": 34}') == seen  # what earlier versions stored
    assert read_cursor(None) == {} and read_cursor("") == {}
    assert tick_message(2, []) == "2 new evaluation(s), no failed check: no alert"
    assert tick_message(1, ["a[x] WARN c", "b[y] ERROR d"]) == "ALERTED 2: a[x] WARN c | b[y] ERROR d"
