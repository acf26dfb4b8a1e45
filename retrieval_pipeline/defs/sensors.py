"""The sensor that turns failed checks (thresholds, drift, disproven benchmark answers) into alerts."""

import json
from datetime import datetime, timezone

import dagster as dg

from retrieval_pipeline.core.report.alerts import Alert
from retrieval_pipeline.defs.resources import AlertSinkResource

METRICS_KEY = dg.AssetKey("retrieval_metrics")
#: Assets whose failed checks raise alerts: metric floors and drift, and disproven benchmark answers.
WATCHED_KEYS = (METRICS_KEY, dg.AssetKey("quality_report"))


def failed_checks_of_run(instance: dg.DagsterInstance, run_id: str, partition: str | None, asset_key: dg.AssetKey) -> list[dict]:
    """The failed check evaluations on ``asset_key`` recorded by one run (for one partition)."""
    failed = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data
        if evaluation.asset_key != asset_key or evaluation.passed:
            continue
        if partition and evaluation.partition and evaluation.partition != partition:
            continue
        failed.append({"check": evaluation.check_name, "severity": evaluation.severity.value, "description": evaluation.description})
    return failed


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Once per new retrieval_metrics or quality_report materialisation with a failed check (floors, drift, "
    "disproven benchmark answers; WARN included): one alert to data/out/alerts.jsonl and the optional webhook.",
)
def retrieval_alert_sensor(context: dg.SensorEvaluationContext, alerts: AlertSinkResource):
    """Alert once per failing evaluation: any failed check on a new ``retrieval_metrics`` or
    ``quality_report`` materialisation.

    Covers WARN failures too (they do not fail runs, so run-failure sensors never see them), including
    the drift check that fires when the drift metric falls more than the allowed share below the
    previous materialisation, and benchmark questions whose marked answer was disproven. The cursor
    keeps the last storage id seen per asset, so each materialisation is looked at once.
    """
    cursor = json.loads(context.cursor) if context.cursor else {}
    sink, seen, sent = alerts.sink(), 0, 0
    for key in WATCHED_KEYS:
        name = key.to_user_string()
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_storage_id=cursor.get(name)), limit=100, ascending=True
        ).records
        for record in records:
            seen += 1
            failed = failed_checks_of_run(context.instance, record.run_id, record.partition_key, key)
            if not failed:
                continue
            summary = f"{name}[{record.partition_key}] run {record.run_id[:8]}: " + "; ".join(
                f"{f['severity']} {f['check']}: {f['description']}" for f in failed
            )
            context.log.warning(summary)
            error = sink.send(
                Alert(
                    dataset=record.partition_key or "",
                    asset=name,
                    run_id=record.run_id,
                    failed_checks=failed,
                    summary=summary,
                    created_at=datetime.now(timezone.utc).isoformat(),
                )
            )
            if error:
                context.log.error(error)
            sent += 1
        if records:
            cursor[name] = records[-1].storage_id
    context.update_cursor(json.dumps(cursor, sort_keys=True))
    return dg.SkipReason(f"{seen} new evaluation(s), {sent} alert(s) sent" if seen else "no new evaluation")
