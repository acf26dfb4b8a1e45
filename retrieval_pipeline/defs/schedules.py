"""The weekly schedule: every Monday 03:00 UTC, one run per dataset (the sensor of failed checks is in ``sensors.py``)."""

import dagster as dg

from retrieval_pipeline.core.registry import registry_at
from retrieval_pipeline.defs.partitions import REGISTRY_PATH

weekly_evaluation_job = dg.define_asset_job(
    "weekly_evaluation",
    selection=dg.AssetSelection.all(),  # every asset is partitioned by dataset: the whole graph of one dataset
    run_tags={"retrieval_pipeline/heavy": "embedding"},  # deploy/dagster.yaml: at most one such run at a time per host
    description="Rebuild the dataset, indexes, runs and metrics of one dataset partition, and re-verify its "
    "multiple-choice questions against the installed library (drift shows up as new Incorrect verdicts).",
)


@dg.schedule(
    job=weekly_evaluation_job,
    cron_schedule="0 3 * * 1",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Every Monday 03:00 UTC: re-evaluate every dataset of data/config/datasets.yaml whose input files are present "
    "(one run per dataset; a dataset with missing inputs is skipped and named in the tick's log; one marked `weekly: false` "
    "is evaluated on demand only).",
)
def weekly_evaluation_schedule(context: dg.ScheduleEvaluationContext):
    """Every Monday 03:00 UTC: one run per weekly dataset in the registry whose input files are all present."""
    registry = registry_at(REGISTRY_PATH)
    requests = []
    for name, config in registry.datasets.items():
        if not config.weekly:
            context.log.info(f"leaving out dataset {name}: weekly: false (evaluated on demand only)")
            continue
        missing = config.missing_inputs()
        if missing:
            context.log.warning(f"skipping dataset {name}: missing input {', '.join(map(str, missing))}")
            continue
        requests.append(dg.RunRequest(run_key=f"{name}-{context.scheduled_execution_time:%Y-%m-%d}", partition_key=name))
    return requests or dg.SkipReason("no dataset has all its inputs present")
