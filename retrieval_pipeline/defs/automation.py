"""Weekly re-evaluation of every dataset, and the sensor that turns failed checks into alerts."""

from datetime import datetime, timezone

import dagster as dg

from retrieval_pipeline.core.alerts import Alert
from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.defs.partitions import REGISTRY_PATH
from retrieval_pipeline.defs.resources import AlertSinkResource

METRICS_KEY = dg.AssetKey("retrieval_metrics")

weekly_evaluation_job = dg.define_asset_job(
    "weekly_evaluation",
    selection=dg.AssetSelection.groups("ingest", "dataset", "indexes", "evaluation"),
    description="Rebuild the dataset, indexes, runs and metrics of one dataset partition.",
)


@dg.schedule(job=weekly_evaluation_job, cron_schedule="0 3 * * 1", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def weekly_evaluation_schedule(context: dg.ScheduleEvaluationContext):
    """Every Monday 03:00 UTC: one run per dataset in the registry whose input files are all present."""
    registry = load_registry(REGISTRY_PATH)
    requests = []
    for name, config in registry.datasets.items():
        missing = config.missing_inputs()
        if missing:
            context.log.warning(f"skipping dataset {name}: missing input {', '.join(map(str, missing))}")
            continue
        requests.append(dg.RunRequest(run_key=f"{name}-{context.scheduled_execution_time:%Y-%m-%d}", partition_key=name))
    return requests or dg.SkipReason("no dataset has all its inputs present")


def failed_checks_of_run(instance: dg.DagsterInstance, run_id: str, partition: str | None) -> list[dict]:
    """The failed check evaluations on ``retrieval_metrics`` recorded by one run (for one partition)."""
    failed = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data
        if evaluation.asset_key != METRICS_KEY or evaluation.passed:
            continue
        if partition and evaluation.partition and evaluation.partition != partition:
            continue
        failed.append({"check": evaluation.check_name, "severity": evaluation.severity.value,
                       "description": evaluation.description})
    return failed


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def retrieval_alert_sensor(context: dg.SensorEvaluationContext, alerts: AlertSinkResource):
    """Alert once per failing evaluation: any failed check on a new ``retrieval_metrics`` materialisation.

    Covers WARN failures too (they do not fail runs, so run-failure sensors never see them), including
    the drift check that fires when the drift metric falls more than the allowed share below the
    previous materialisation. The cursor is the last materialisation's storage id, so each is seen once.
    """
    after = int(context.cursor) if context.cursor else None
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=METRICS_KEY, after_storage_id=after), limit=100, ascending=True
    ).records
    if not records:
        return dg.SkipReason("no new evaluation")
    sink, sent = alerts.sink(), 0
    for record in records:
        failed = failed_checks_of_run(context.instance, record.run_id, record.partition_key)
        if failed:
            summary = f"retrieval_metrics[{record.partition_key}] run {record.run_id[:8]}: " + "; ".join(
                f"{f['severity']} {f['check']}: {f['description']}" for f in failed)
            context.log.warning(summary)
            error = sink.send(Alert(dataset=record.partition_key or "", asset="retrieval_metrics", run_id=record.run_id,
                                    failed_checks=failed, summary=summary,
                                    created_at=datetime.now(timezone.utc).isoformat()))
            if error:
                context.log.error(error)
            sent += 1
    context.update_cursor(str(records[-1].storage_id))
    return dg.SkipReason(f"{len(records)} new evaluation(s), {sent} alert(s) sent")
