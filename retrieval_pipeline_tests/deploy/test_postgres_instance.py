"""The production instance (``deploy/dagster.yaml``) on a real PostgreSQL server.

The server is Debian's PostgreSQL, initialised in a temporary folder as an unprivileged user and listening
on loopback only (``postgres_server.py``). Each test gets a database of its own and a ``DagsterInstance``
loaded from the deploy YAML, with its connection taken from the ``DAGSTER_PG_*`` variables. On that
instance, the tests run the daemon's scheduler over a tick of ``weekly_evaluation_schedule``, using the
production code location (``deploy/code_location.py``). They materialise the tiny dataset of the defs
tests twice, with the keyword encoder, so the drift check compares with the previous materialisation.
They evaluate ``retrieval_alert_sensor`` and read the run history back, both through Dagster and straight
from the server. They also check that the run queue's embedding limit holds, and run a job with the
multiprocess executor. The tests skip only when no server can be installed or started, and say why.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._scheduler.scheduler import launch_scheduled_runs

from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.sensors import retrieval_alert_sensor
from retrieval_pipeline_tests.defs.conftest import VOCAB, write_dataset
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.deploy import multiprocess_job
from retrieval_pipeline_tests.deploy.postgres_server import PostgresServer, PostgresUnavailable, running_postgres
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

pytestmark = [pytest.mark.integration, pytest.mark.heavy]
pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed: pip install -e '.[deploy]'")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_INSTANCE = PROJECT_ROOT / "deploy" / "dagster.yaml"
PARTITION = "stdlib"
HEAVY_TAGS = {"retrieval_pipeline/heavy": "embedding"}
METRICS_KEY = dg.AssetKey("retrieval_metrics")
DRIFT_CHECK = dg.AssetCheckKey(METRICS_KEY, "drift_hit_rate_at_5")
#: Monday 2026-11-23 03:00 UTC is a tick of the schedule's cron "0 3 * * 1"; the first pass starts the schedule.
BEFORE_TICK = datetime(2026, 11, 23, 2, 0, tzinfo=timezone.utc)
AFTER_TICK = datetime(2026, 11, 23, 3, 0, 5, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Deployed:
    """A production instance on its own database of the test server."""

    instance: dg.DagsterInstance
    server: PostgresServer
    db: str

    def sql(self, query: str) -> list[tuple]:
        return self.server.query(self.db, query)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """One server for the module; stopped by PID when the module's tests are done."""
    manager = running_postgres()
    try:
        server = manager.__enter__()
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL server here: {exc}")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def deployed(postgres: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    """``deploy/dagster.yaml`` as ``$DAGSTER_HOME/dagster.yaml``, pointed at a new database by environment variables."""
    db = f"dagster_{uuid.uuid4().hex[:12]}"
    postgres.create_database(db)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY_INSTANCE, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name, value in postgres.dagster_env(db).items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        yield Deployed(instance, postgres, db)
    finally:
        instance.dispose()


@contextmanager
def production_workspace(instance: dg.DagsterInstance) -> Iterator[WorkspaceProcessContext]:
    """The production code location (``deploy/code_location.py``), loaded in process as the daemon would load it."""
    origin = LoadableTargetOrigin(python_file=str(multiprocess_job.CODE_LOCATION), attribute="defs", working_directory=str(PROJECT_ROOT))
    target = InProcessTestWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin, location_name="retrieval_pipeline"))
    with WorkspaceProcessContext(instance, target) as context:
        yield context


def tick_schedule(instance: dg.DagsterInstance) -> None:
    """Two passes of the daemon's scheduler: the first starts the schedule, the second meets its Monday tick."""
    with production_workspace(instance) as context:
        for end in (BEFORE_TICK, AFTER_TICK):
            list(launch_scheduled_runs(context, logging.getLogger("scheduler"), end, iteration_times={}))


def weekly_job_origin(instance: dg.DagsterInstance) -> RemoteJobOrigin:
    """Where the weekly job lives, as a queued run records it (the queue refuses runs without one)."""
    with production_workspace(instance) as context:
        location = next(iter(context.create_request_context().get_code_location_entries().values())).code_location
        assert location is not None
        repository = next(iter(location.get_repositories().values()))
        return repository.get_full_job("weekly_evaluation").get_remote_origin()


def materialise(resources: dict[str, object], instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(list(defs().assets), partition_key=PARTITION, resources=resources, instance=instance, raise_on_error=False)


def queued_run(instance: dg.DagsterInstance, origin: RemoteJobOrigin, tags: dict[str, str], status: dg.DagsterRunStatus) -> str:
    run = dg.DagsterRun(job_name="weekly_evaluation", run_id=str(uuid.uuid4()), status=status, tags=tags, remote_job_origin=origin)
    instance.add_run(run)
    return run.run_id


def test_the_production_instance_keeps_runs_events_and_schedules_in_postgres(deployed: Deployed):
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    instance = deployed.instance
    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
    assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
    queue = instance.get_concurrency_config().run_queue_config
    assert queue is not None and queue.max_concurrent_runs == 2
    assert [dict(limit) for limit in queue.tag_concurrency_limits] == [
        {"key": "retrieval_pipeline/heavy", "value": "embedding", "limit": 1}
    ]
    tables = {row[0] for row in deployed.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
    assert {"runs", "run_tags", "event_logs", "asset_keys", "jobs", "job_ticks"} <= tables  # Dagster created them on this server


def test_schedule_tick_two_materialisations_drift_history_and_alert(deployed: Deployed, tmp_path: Path):
    instance = deployed.instance

    # 1. The daemon's scheduler: one queued run per dataset whose inputs are present, held by the run queue.
    tick_schedule(instance)
    expected = sorted(name for name, config in load_registry().datasets.items() if config.weekly and not config.missing_inputs())
    scheduled = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/schedule_name": "weekly_evaluation_schedule"}))
    assert sorted(run.tags["dagster/partition"] for run in scheduled) == expected
    assert {run.status for run in scheduled} == {dg.DagsterRunStatus.QUEUED}
    by_partition = {run.tags["dagster/partition"]: run for run in scheduled}
    assert by_partition[PARTITION].tags["dagster/run_key"] == f"{PARTITION}-2026-11-23"
    state = next(s for s in instance.all_instigator_state() if s.instigator_name == "weekly_evaluation_schedule")
    ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id)
    assert ticks and ticks[0].status == TickStatus.SUCCESS and sorted(ticks[0].run_ids) == sorted(r.run_id for r in scheduled)

    # 2. The tiny dataset, materialised twice; the second encoder is degenerate, so the dense retriever drifts.
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), write_dataset(tmp_path / "in", "drift: {rule: relative}"))
    first = materialise(resources, instance)
    assert first.success, [e.message for e in first.all_events if e.is_failure]
    assert {e.check_name: e for e in first.get_asset_check_evaluations()}["drift_hit_rate_at_5"].passed
    second = materialise({**resources, "encoder": KeywordEncoderResource(vocabulary=["zzzz"])}, instance)
    drift = {e.check_name: e for e in second.get_asset_check_evaluations()}["drift_hit_rate_at_5"]
    assert not drift.passed and drift.severity == dg.AssetCheckSeverity.WARN
    assert any(name in drift.description for name in ("dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60"))

    # 3. The run history, through Dagster and straight from the server.
    done = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": PARTITION}, statuses=[dg.DagsterRunStatus.SUCCESS]))
    assert [run.run_id for run in done] == [second.run_id, first.run_id]  # newest first
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=METRICS_KEY, asset_partitions=[PARTITION]), limit=10).records
    assert [record.run_id for record in records] == [second.run_id, first.run_id]
    # the queued scheduled runs have planned the check too: the executed ones are the two materialisations'
    executed = {AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED}
    history = instance.event_log_storage.get_asset_check_execution_history(DRIFT_CHECK, limit=10, status=executed)
    assert [(h.run_id, h.status.value) for h in history] == [(second.run_id, "FAILED"), (first.run_id, "SUCCEEDED")]
    assert deployed.sql("SELECT count(*) FROM runs")[0][0] == len(scheduled) + 2
    materialised = deployed.sql(
        "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND asset_key = '[\"retrieval_metrics\"]'"
    )
    assert materialised[0][0] == 2

    # 4. The alert sensor reads the same instance: one alert, for the drifting run, and none on the next tick.
    context = dg.build_sensor_context(instance=instance, resources={"alerts": resources["alerts"]})
    tick = retrieval_alert_sensor.evaluate_tick(context)
    alerts = resources["alerts"].sink().read()
    assert len(alerts) == 1 and alerts[0]["run_id"] == second.run_id and alerts[0]["dataset"] == PARTITION
    assert [f["check"] for f in alerts[0]["failed_checks"]] == ["drift_hit_rate_at_5"]
    again = dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources={"alerts": resources["alerts"]})
    retrieval_alert_sensor.evaluate_tick(again)
    assert len(resources["alerts"].sink().read()) == 1


def test_the_run_queue_lets_one_embedding_heavy_run_through(deployed: Deployed):
    instance = deployed.instance
    daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)

    def next_launches() -> set[str]:
        # the daemon's own choice of queued runs to launch now, from the runs stored in PostgreSQL
        return {run.run_id for run in daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), fixed_iteration_time=None)}

    origin, queued = weekly_job_origin(instance), dg.DagsterRunStatus.QUEUED
    heavy_a, heavy_b = queued_run(instance, origin, HEAVY_TAGS, queued), queued_run(instance, origin, HEAVY_TAGS, queued)
    light = queued_run(instance, origin, {}, queued)
    assert next_launches() == {heavy_a, light}  # two slots, but only one embedding-heavy run
    queued_run(instance, origin, HEAVY_TAGS, dg.DagsterRunStatus.STARTED)  # one heavy run already in progress
    assert next_launches() == {light}
    assert heavy_b not in next_launches()


def test_a_multiprocess_run_on_the_production_instance(deployed: Deployed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(multiprocess_job.ROOT_ENV, str(tmp_path))
    monkeypatch.setenv(multiprocess_job.REGISTRY_ENV, str(write_dataset(tmp_path / "in")))
    job = dg.reconstructable(multiprocess_job.tiny_ingest_job)
    with dg.execute_job(job, instance=deployed.instance, tags={"dagster/partition": PARTITION}) as result:
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        run_id = result.run_id
    workers = deployed.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED)
    assert len(workers) == len(multiprocess_job.STEPS)  # each step in a process of its own
    stored = deployed.sql(f"SELECT DISTINCT step_key FROM event_logs WHERE run_id = '{run_id}' AND dagster_event_type = 'STEP_SUCCESS'")
    assert sorted(row[0] for row in stored) == sorted(multiprocess_job.STEPS)
