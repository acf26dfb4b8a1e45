"""The alert records: each alert the sensor sends is also materialised on ``alerts/<dataset>``, by a small run.

A sensor that only sends alerts requests no run, and Dagster's tick list shows every tick of such a sensor the
same way: "0 runs requested" (the tick row renders the number of runs a tick requested, its status and its
cursor; a skip reason only in a tooltip and the tick's dialog; asset events a sensor returns do not appear on
the row at all). So the sensor (``defs/sensors.py``) requests one ``record_alerts`` run per tick that sent alerts:
that tick reads "1 run requested" (a green tag), with the run's status beside it, and the idle ticks keep the grey
"0 runs requested" (status Skipped, the reason in the tooltip).

The run logs one materialisation per alert on the dataset's ``alerts/<dataset>`` key (declared here, one per
dataset, not executable by hand: only the sensor's run writes it): its metadata holds the alert text, the source
asset and run (a link), the failed checks as a table, and for a drift failure the retriever and its drift metric
before and after. The asset is unpartitioned, so its plots (the number of failed checks per source asset, the drift metric before
and after) have time on the x-axis and one dataset's alerts only, as ``metric_trends/<dataset>``'s do.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from retrieval_pipeline.core.evaluation.metrics import metric_label
from retrieval_pipeline.defs.partitions import REGISTRY

#: The asset group of the alert records.
GROUP = "alerts"
#: The job of the run a sensor tick that alerted requests, and its one op (the run page's step: after the assets it writes).
RECORD_JOB = "record_alerts"
RECORD_OP = "alerts"


def alert_key(dataset: str) -> dg.AssetKey:
    return dg.AssetKey([GROUP, dataset or "no_dataset"])


class FailedCheck(dg.Config):
    """One failed check of the evaluation an alert is about."""

    check: str
    severity: str
    description: str


class DriftFigure(dg.Config):
    """A retriever whose drift metric fell: its value in the baseline evaluation and in this one."""

    retriever: str
    metric: str
    before: float
    after: float


class AlertRecord(dg.Config):
    """One alert as the sensor sent it."""

    dataset: str
    source: str  # the asset whose checks failed: retrieval_metrics or quality_report
    source_run: str
    summary: str
    failed_checks: list[FailedCheck]
    drift: list[DriftFigure] = []
    delivery: str = "logged"  # "logged", or the webhook's error


class RecordAlertsConfig(dg.Config):
    alerts: list[AlertRecord]


def drift_figures(failed: Sequence[Mapping[str, Any]]) -> list[DriftFigure]:
    """The drift figures of the failed drift checks (their ``dropped`` metadata: ``{retriever: {before, after}}``)."""
    figures = []
    for check in failed:
        for retriever, values in (check.get("dropped") or {}).items():
            figures.append(DriftFigure(retriever=retriever, metric=check.get("metric", ""), before=values["before"], after=values["after"]))
    return figures


def _checks_table(checks: Sequence[FailedCheck]) -> dg.TableMetadataValue:
    schema = dg.TableSchema(columns=[dg.TableColumn("check"), dg.TableColumn("severity"), dg.TableColumn("description")])
    return dg.MetadataValue.table(
        records=[dg.TableRecord({"check": c.check, "severity": c.severity, "description": c.description}) for c in checks], schema=schema
    )


def record_metadata(alert: AlertRecord) -> dict[str, Any]:
    """The metadata of one alert's materialisation: the alert in one line first, then its run, the checks, the drift.

    Numbers (plotted over time on the dataset's own key): the number of failed checks, keyed by the source asset
    (``retrieval_metrics failed checks``: one plot per source, so no line joins a metrics alert to a question alert)
    and, for a drift alert, the largest drop's metric before and after, keyed by the metric's label (``hit@5 before``).
    """
    checks = ", ".join(f"{c.severity} {c.check}" for c in alert.failed_checks)
    meta: dict[str, Any] = {
        # one line (the checks' descriptions are the table's): as the tick's log and the sensor's message name it
        "alert": dg.MetadataValue.text(f"{alert.source}[{alert.dataset}] run {alert.source_run[:8]}: {checks}"),
        "dataset": alert.dataset,
        "source_run": dg.MetadataValue.dagster_run(alert.source_run),
        "failed_checks": _checks_table(alert.failed_checks),
        f"{alert.source} failed checks": dg.MetadataValue.int(len(alert.failed_checks)),
        "severity": "ERROR" if any(c.severity == "ERROR" for c in alert.failed_checks) else "WARN",
        "delivery": alert.delivery,
    }
    if alert.drift:
        worst = max(alert.drift, key=lambda f: f.before - f.after)
        label = metric_label(worst.metric) if worst.metric else "drift metric"
        meta["drift_retriever"] = worst.retriever
        meta[f"{label} before"] = dg.MetadataValue.float(round(worst.before, 4))
        meta[f"{label} after"] = dg.MetadataValue.float(round(worst.after, 4))
        meta["drift"] = dg.MetadataValue.md(
            "| retriever | metric | before | after |\n|---|---|---|---|\n"
            + "\n".join(f"| {f.retriever} | {f.metric} | {f.before:.4f} | {f.after:.4f} |" for f in alert.drift)
        )
    return meta


def _spec(dataset: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key=alert_key(dataset),
        group_name=GROUP,
        description=f"alerts/{dataset}: one materialisation per alert the sensor retrieval_alert_sensor sent about {dataset} "
        "(failed checks of retrieval_metrics or quality_report), written by its record_alerts run: the alert text, the "
        "failed checks, the drift metric before and after. Not materialised by hand.",
        kinds={"alert"},
    )


alert_specs = [_spec(name) for name in REGISTRY.names]


def already_recorded(instance: dg.DagsterInstance, alert: AlertRecord, look_back: int = 50) -> bool:
    """Whether ``alerts/<dataset>`` already holds this alert (same source asset and run), e.g. when the run page's
    "Re-execute" starts the same run config again: the alert is then not recorded twice."""
    records = instance.fetch_materializations(alert_key(alert.dataset), limit=look_back).records
    for record in records:
        meta = record.asset_materialization.metadata if record.asset_materialization else {}
        run = meta.get("source_run")
        if run is not None and run.value == alert.source_run and str(meta["alert"].value).startswith(f"{alert.source}["):
            return True
    return False


@dg.op(name=RECORD_OP, out={}, description="Materialise each alert of the sensor's tick on alerts/<dataset>.")
def record_alerts(context: dg.OpExecutionContext, config: RecordAlertsConfig):
    for alert in config.alerts:
        if already_recorded(context.instance, alert):
            context.log.info(f"already on {alert_key(alert.dataset).to_user_string()}, not recorded again: {alert.summary}")
            continue
        context.log.warning(alert.summary)
        context.log_event(dg.AssetMaterialization(asset_key=alert_key(alert.dataset), metadata=record_metadata(alert)))


@dg.job(
    name=RECORD_JOB,
    description="Started by retrieval_alert_sensor on a tick that sent alerts: one materialisation of alerts/<dataset> "
    "per alert, so the tick reads '1 run requested' and the alerts are in the asset catalog.",
)
def record_alerts_job() -> None:
    record_alerts()
