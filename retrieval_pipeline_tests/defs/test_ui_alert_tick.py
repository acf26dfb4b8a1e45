"""The alert sensor's tick list in headless Chromium: a tick that sent alerts does not look like the idle ones.

Dagster's tick list renders, per tick, its status, cursor and the number of runs it requested; a skip reason only
in a tooltip and the tick's dialog. So a tick that alerted requests one ``record_alerts`` run. Here the daemon's own
sensor loop evaluates the project's sensor twice over a test instance (a failed check on ``retrieval_metrics`` of
stdlib, then nothing new), the requested run starts at once and executes in process (``DefaultRunCoordinator``,
``SyncInMemoryRunLauncher``), and a real
``dagster-webserver`` shows the sensor page: one tick "1 run requested" beside the run, one "0 runs requested".
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget, freeze_time
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._daemon.sensor import execute_sensor_iteration

# _chromium_present (autouse): skip without chromium, fail under CI=true
from retrieval_pipeline_tests.core.report.test_report_browser import _chromium_present, chromium  # noqa: F401
from retrieval_pipeline_tests.defs import alert_location
from retrieval_pipeline_tests.defs.webserver import PROJECT, dagster_home_for_tests, open_page, webserver

DATASET = "stdlib"


@dg.asset(
    name="retrieval_metrics",
    partitions_def=dg.StaticPartitionsDefinition([DATASET]),
    check_specs=[dg.AssetCheckSpec("min_hit_rate_at_5", asset="retrieval_metrics")],
)
def failing_metrics():
    """Stands in for the evaluation: one failed WARN floor, as stdlib's sample run ends."""
    return dg.MaterializeResult(
        check_results=[
            dg.AssetCheckResult(
                check_name="min_hit_rate_at_5",
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                description="[dataset stdlib] hit_rate@5 below 0.8 for bm25 (0.436)",
            )
        ]
    )


def _tick(instance: dg.DagsterInstance) -> None:
    """One pass of the daemon's sensor loop over the test code location, as ``dagster-daemon`` runs it."""
    origin = LoadableTargetOrigin(python_file=alert_location.__file__, attribute="defs", working_directory=str(PROJECT))
    target = InProcessTestWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin, location_name=alert_location.LOCATION))
    with WorkspaceProcessContext(instance, target) as context:
        list(execute_sensor_iteration(context, logging.getLogger("sensor"), None, None))


@pytest.mark.heavy
@pytest.mark.integration
def test_a_tick_that_alerted_reads_one_run_requested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = dagster_home_for_tests(tmp_path / "dagster_home")
    with (home / "dagster.yaml").open("a") as fh:
        fh.write("run_launcher:\n  module: dagster._core.launcher.sync_in_memory_run_launcher\n  class: SyncInMemoryRunLauncher\n")
        fh.write("run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n")  # no queue
    monkeypatch.setenv("RETRIEVAL_TEST_ALERT_LOG", str(tmp_path / "alerts.jsonl"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        f"load_from:\n  - python_file:\n      relative_path: {alert_location.__file__}\n      attribute: defs\n"
        f"      working_directory: {PROJECT}\n      location_name: {alert_location.LOCATION}\n"
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert dg.materialize([failing_metrics], partition_key=DATASET, instance=instance, raise_on_error=False).success
        _tick(instance)
        with freeze_time(time.time() + 61):  # past the sensor's minimum interval of 60 s: nothing new, skipped
            _tick(instance)
        runs = instance.get_runs(filters=dg.RunsFilter(job_name="record_alerts"))
        assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.SUCCESS
        record = instance.fetch_materializations(dg.AssetKey(["alerts", DATASET]), limit=1).records[0]
        assert "min_hit_rate_at_5" in record.asset_materialization.metadata["alert"].value
    assert len((tmp_path / "alerts.jsonl").read_text().splitlines()) == 1

    keep = Path(os.environ["RETRIEVAL_UI_SCREENSHOTS"]) if os.environ.get("RETRIEVAL_UI_SCREENSHOTS") else tmp_path
    with webserver(home, tmp_path / "webserver.log", workspace) as url, chromium(tmp_path / "profile") as browser:
        page = f"{url}/locations/{alert_location.LOCATION}/sensors/retrieval_alert_sensor"
        text, shot = open_page(browser, page, ["Cursor", "1 run requested", runs[0].run_id[:8]])
        shot.save(keep / "ui_sensor_tick_alerted.png")
    lines = [line.strip() for line in text.splitlines()]
    assert lines.count("1 run requested") >= 2  # the alerting tick's status tag and its result (the latest tick: idle)
    assert "0 runs requested" in lines  # the idle tick still reads so: Dagster's wording for a skipped tick
    assert "retrieval_metrics=" in text and '{"' not in text  # the cursor: readable, not JSON
    if keep != tmp_path:
        shutil.copy(tmp_path / "webserver.log", keep / "ui_alert_webserver.log")
