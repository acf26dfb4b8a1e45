"""The sensor that turns failed checks (thresholds, drift, disproven benchmark answers) into alerts, and requests the
run that records them on ``alerts/<dataset>`` (``assets/alerts.py``)."""

import json
from datetime import datetime, timezone
from typing import Any

import dagster as dg

from retrieval_pipeline.core.report.alerts import Alert
from retrieval_pipeline.defs.assets.alerts import RECORD_OP, AlertRecord, FailedCheck, RecordAlertsConfig, drift_figures, record_alerts_job
from retrieval_pipeline.defs.resources import AlertSinkResource

METRICS_KEY = dg.AssetKey("retrieval_metrics")
#: Assets whose failed checks raise alerts: metric floors and drift, and disproven benchmark answers.
WATCHED_KEYS = (METRICS_KEY, dg.AssetKey("quality_report"))


def read_cursor(cursor: str | None) -> dict[str, int]:
    """``{asset: last storage id seen}`` from the sensor's cursor: ``asset=id,asset=id`` (a JSON object, as older
    versions wrote it, is read too)."""
    if not cursor:
        return {}
    if cursor.startswith("{"):
        return {str(k): int(v) for k, v in json.loads(cursor).items()}
    return {name: int(sid) for name, _, sid in (part.partition("=") for part in cursor.split(",")) if sid}


def write_cursor(seen: dict[str, int]) -> str:
    """The cursor as the tick list shows it: ``quality_report=12,retrieval_metrics=34`` (storage ids, internal)."""
    return ",".join(f"{name}={sid}" for name, sid in sorted(seen.items()))


def tick_message(seen: int, sent: list[str]) -> str:
    """The tick's result text: the alerts it sent, by name, or that it sent none (the UI shows it on the tick)."""
    if sent:
        return f"ALERTED {len(sent)}: " + " | ".join(sent)
    return f"{seen} new evaluation(s), no failed check: no alert" if seen else "no new evaluation: no alert"


def _plain(value: dg.MetadataValue) -> Any:
    return value.value if isinstance(value, dg.MetadataValue) else value


def failed_checks_of_run(instance: dg.DagsterInstance, run_id: str, partition: str | None, asset_key: dg.AssetKey) -> list[dict]:
    """The failed check evaluations on ``asset_key`` recorded by one run (for one partition); a failed drift check also
    carries its metric and the retrievers that dropped (``dropped``: ``{retriever: {before, after}}``)."""
    failed = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data
        if evaluation.asset_key != asset_key or evaluation.passed:
            continue
        if partition and evaluation.partition and evaluation.partition != partition:
            continue
        check = {"check": evaluation.check_name, "severity": evaluation.severity.value, "description": evaluation.description}
        dropped = _plain(evaluation.metadata.get("dropped"))
        if dropped:
            check |= {"metric": str(_plain(evaluation.metadata.get("metric", "")) or ""), "dropped": dropped}
        failed.append(check)
    return failed


def alert_record(alert: Alert, delivery_error: str | None) -> AlertRecord:
    """What the ``record_alerts`` run materialises for one alert on ``alerts/<dataset>``."""
    return AlertRecord(
        dataset=alert.dataset,
        source=alert.asset,
        source_run=alert.run_id,
        summary=alert.summary,
        failed_checks=[
            FailedCheck(check=f["check"], severity=f["severity"], description=f["description"] or "") for f in alert.failed_checks
        ],
        drift=drift_figures(alert.failed_checks),
        delivery=delivery_error or "logged",
    )


def record_request(records: list[AlertRecord], cursor: str) -> dg.RunRequest:
    """The tick's one ``record_alerts`` run: every alert it sent, materialised on ``alerts/<dataset>``.

    The run key is the cursor after the tick: should the tick be evaluated again (its cursor not stored), Dagster
    starts no second run for the same alerts.
    """
    datasets = sorted({r.dataset for r in records})
    return dg.RunRequest(
        run_key=f"alerts:{cursor}",
        run_config=dg.RunConfig(ops={RECORD_OP: RecordAlertsConfig(alerts=records)}),
        tags={"retrieval_pipeline/alerts": f"{len(records)} ({', '.join(datasets)})"},  # one tag on the runs list: "1 (stdlib)"
    )


@dg.sensor(
    job=record_alerts_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Once per new retrieval_metrics or quality_report materialisation with a failed check (floors, drift, "
    "disproven benchmark answers; WARN included): one alert to data/out/alerts.jsonl and the optional webhook, and a "
    "record_alerts run that materialises it on alerts/<dataset> (a tick that alerted reads '1 run requested').",
)
def retrieval_alert_sensor(context: dg.SensorEvaluationContext, alerts: AlertSinkResource):
    """Alert once per failing evaluation: any failed check on a new ``retrieval_metrics`` or
    ``quality_report`` materialisation.

    Covers WARN failures too (they do not fail runs, so run-failure sensors never see them), including
    the drift check that fires when the drift metric falls more than the allowed share below the
    baseline evaluation, and benchmark questions whose marked answer was disproven. The cursor
    keeps the last storage id seen per asset, so each materialisation is looked at once.

    A tick that sent alerts requests one ``record_alerts`` run, which materialises each alert on
    ``alerts/<dataset>`` (``defs/assets/alerts.py``): the tick list shows "1 run requested" and the run's status, where an
    idle tick reads "0 runs requested" (skipped; its reason, ``no new evaluation: no alert``, in the tooltip). The tick's log names every alert sent.
    """
    cursor = read_cursor(context.cursor)
    sink, seen, sent, records = alerts.sink(), 0, [], []
    for key in WATCHED_KEYS:
        name = key.to_user_string()
        found = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_storage_id=cursor.get(name)), limit=100, ascending=True
        ).records
        for record in found:
            seen += 1
            failed = failed_checks_of_run(context.instance, record.run_id, record.partition_key, key)
            if not failed:
                continue
            summary = f"{name}[{record.partition_key}] run {record.run_id[:8]}: " + "; ".join(
                f"{f['severity']} {f['check']}: {f['description']}" for f in failed
            )
            context.log.warning(summary)
            alert = Alert(
                dataset=record.partition_key or "",
                asset=name,
                run_id=record.run_id,
                failed_checks=failed,
                summary=summary,
                created_at=datetime.now(timezone.utc).isoformat(),
            )
            error = sink.send(alert)
            if error:
                context.log.error(error)
            records.append(alert_record(alert, error))
            checks = ", ".join(f"{f['severity']} {f['check']}" for f in failed)
            sent.append(
                f"{name}[{record.partition_key}] run {record.run_id[:8]}: {checks}" + (f" (not delivered: {error})" if error else "")
            )
        if found:
            cursor[name] = found[-1].storage_id
    new_cursor = write_cursor(cursor)
    message = tick_message(seen, sent)
    if not records:
        return dg.SensorResult(skip_reason=message, cursor=new_cursor)
    context.log.warning(message)
    return dg.SensorResult(run_requests=[record_request(records, new_cursor)], cursor=new_cursor)
