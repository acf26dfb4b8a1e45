"""Materialise the asset graph per dataset, show progress, and print what came out.

Usage::

    python -m retrieval_pipeline.cli.run --datasets stdlib python_nq python_reference_qa
        [--select '*'] [--config-json JSON] [--log data/out/logs/run-<timestamp>.log] [--out-dir DIR] [--cache-dir DIR]

One Dagster run per dataset partition, on the job ``dagster asset materialize`` runs (the implicit
``__ASSET_JOB`` of :func:`retrieval_pipeline.definitions.defs`, with its resources, in one process),
against the persistent instance of ``DAGSTER_HOME``: runs, materialisations and check results land in
the instance as with the CLI, so the drift check and the alert sensor read them. ``--select`` takes the
CLI's syntax (comma-separated; ``*`` is everything, ``retrieval_runs*`` an asset and what is downstream),
``--config-json`` the same run config (e.g. ``{"ops": {"retrieval_runs": {"config": {"sample_size": 20}}}}``).

The terminal shows one line per finished step (stage, assets, seconds). The full Dagster event stream
(every event the instance stores, DEBUG included, read as it is stored), Dagster's own logging and
Python warnings go to the log file; the console logger of the run is set to CRITICAL. Then, per
dataset: retrievers x hit@1, hit@5, MRR and nDCG@10 (best per column marked ``*``), the failed checks
with their numbers, and where the exports and the quality report are.

Exit code, as ``dagster asset materialize``'s: 0 when every run succeeded, 1 when a run failed (a failing
blocking check, e.g. an ERROR metric floor, fails its run), after the whole summary; 2 for bad arguments
(unknown dataset, invalid selection). Failed checks that do not fail a run (WARN floors, drift, the
non-blocking ``no_incorrect_questions``) are listed, with their severity, and leave the exit code 0.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import dagster as dg
import pandas as pd
from dagster import DagsterEvent, EventLogEntry
from tabulate import tabulate

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.retrieval.base import RetrieverError

try:  # importing the definitions reads the registries: a refusal there is one line on the command line, not a traceback
    from retrieval_pipeline.definitions import defs
    from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory
    from retrieval_pipeline.defs.mlflow_resource import mlflow_from_environment
    from retrieval_pipeline.defs.resources import DEFAULT_CACHE_DIR, DEFAULT_OUT_DIR, AlertSinkResource, LLMResource, PipelineSettings
    from retrieval_pipeline.defs.retrieval import retriever_step
except (InputError, RetrieverError) as _refused:
    if __name__ != "__main__":
        raise
    print(f"error: {' '.join(str(_refused).split())}", file=sys.stderr)
    sys.exit(2)

#: The table columns: (header, metric column of ``retrieval_metrics``).
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (("hit@1", "hit_rate@1"), ("hit@5", "hit_rate@5"), ("MRR", "mrr"), ("nDCG@10", "ndcg@10"))
METRICS_KEY = dg.AssetKey("retrieval_metrics")
SIGNIFICANCE_KEY = dg.AssetKey("metric_significance")
#: The console's marks: significantly better / worse than the baseline retriever.
MARKS = {"better": "▲", "worse": "▼"}
#: The one metric whose confidence interval the console table shows.
CI_METRIC = "hit_rate@5"
LOG_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
#: Run config of every run: Dagster's console logger (stderr) prints only CRITICAL; the log file gets every event.
QUIET_CONSOLE: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
#: The error class of a step whose blocking check failed (the check itself is reported, not the step).
CHECK_FAILED_ERROR = "DagsterAssetCheckFailedError"
#: The error class of a step stopped by SIGINT (or SIGTERM): Dagster ends the run, the runner stops after it.
INTERRUPTED_ERROR = "DagsterExecutionInterruptedError"
#: Exit codes.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_STEP_END = {
    dg.DagsterEventType.STEP_SUCCESS: "ok",
    dg.DagsterEventType.STEP_FAILURE: "failed",
    dg.DagsterEventType.STEP_SKIPPED: "skipped",
}


class UsageError(ValueError):
    """An argument the runner cannot act on (unknown dataset, empty or invalid selection)."""


@dataclass
class StepResult:
    """One finished step (op) of a run: the assets it materialised and how long it took."""

    step_key: str
    stage: str
    assets: list[str]
    status: str  # ok | failed | skipped
    seconds: float
    error: str = ""
    error_class: str = ""


@dataclass(frozen=True)
class FailedCheck:
    """A failed asset check, as recorded in the instance."""

    asset: str
    name: str
    severity: str  # ERROR | WARN
    description: str
    metadata: dict[str, Any]
    blocking: bool = False  # a blocking check that fails fails its step, hence the run


@dataclass
class DatasetRun:
    """What one dataset's run produced, for the summary (and the stage benchmark)."""

    dataset: str
    run_id: str
    success: bool
    seconds: float
    steps: list[StepResult]
    failed_checks: list[FailedCheck]
    metrics: pd.DataFrame | None
    exports_dir: Path
    error: str = ""
    significance: pd.DataFrame | None = None  # metric_significance: CIs and tests against the baseline

    @property
    def failed_steps(self) -> list[StepResult]:
        return [s for s in self.steps if s.status == "failed"]

    @property
    def interrupted(self) -> bool:
        """Whether a signal stopped the run (Dagster ends it with the interrupted step failed)."""
        return any(s.error_class == INTERRUPTED_ERROR for s in self.steps)


@dataclass
class _Plan:
    """The steps a run of the selection executes: ``{step key: (stage, asset names)}``."""

    steps: dict[str, tuple[str, list[str]]]

    @classmethod
    def of(cls, definitions: dg.Definitions, keys: Sequence[dg.AssetKey]) -> _Plan:
        steps: dict[str, tuple[str, list[str]]] = {}
        for key in sorted(keys):
            assets_def = definitions.resolve_assets_def(key)
            stage, names = steps.setdefault(assets_def.node_def.name, (assets_def.group_names_by_key.get(key, ""), []))
            names.append(key.to_user_string())
        return cls(steps)

    def label(self, step_key: str) -> tuple[str, str]:
        stage, names = self.steps.get(step_key, ("", [step_key]))
        return stage, ", ".join(names)


class _EventStream:
    """Every event the instance stores for the current run: to the log file, and one terminal line per finished step.

    Registered with ``DagsterInstance.add_event_listener``, so it sees exactly what the instance records
    (what the UI shows), DEBUG events included, as they are stored.
    """

    def __init__(self, out: TextIO, log: logging.Handler) -> None:
        self.out = out
        self.log = log
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.plan = _Plan({})
        self.steps: list[StepResult] = []
        self._started: dict[str, float] = {}

    def begin(self, plan: _Plan) -> None:
        self.plan, self.steps, self._started = plan, [], {}

    def __call__(self, entry: EventLogEntry) -> None:
        try:
            self._write(entry)
            event = entry.dagster_event
            if event is None or not event.step_key:
                return
            if event.event_type == dg.DagsterEventType.STEP_START:
                self._started[event.step_key] = entry.timestamp
                if self.live:  # a transient line while the step runs, replaced by its result
                    stage, label = self.plan.label(event.step_key)
                    self.out.write(f"\r\x1b[K  {self._counter(len(self.steps) + 1)} {stage:<10} {label} ...")
                    self.out.flush()
            elif event.event_type in _STEP_END:
                self._finish(event, entry.timestamp)
        except Exception:  # never let the display break the run: an error here would fail the event write
            logging.getLogger("dagster").exception("retrieval_pipeline.cli.run: could not show an event")

    def _write(self, entry: EventLogEntry) -> None:
        """One line per event, as Dagster's console logger writes it, with the error's traceback when there is one."""
        event = entry.dagster_event
        parts = [entry.job_name, entry.run_id, entry.step_key, event.event_type.name if event else None, entry.message]
        message = " - ".join(str(p) for p in parts if p)
        error = entry.error_info or (event.step_failure_data.error if event and event.is_step_failure else None)
        if error is not None:
            message += "\n" + error.to_string()
        record = logging.LogRecord("dagster", int(entry.level), "", 0, message, None, None)
        record.created, record.msecs = entry.timestamp, (entry.timestamp % 1) * 1000
        self.log.handle(record)

    def _finish(self, event: DagsterEvent, at: float) -> None:
        step_key = event.step_key or ""
        stage, label = self.plan.label(step_key)
        status = _STEP_END[event.event_type]
        seconds = at - self._started.get(step_key, at)
        error = error_class = ""
        if event.is_step_failure and event.step_failure_data.error is not None:
            error, error_class = _error_text(event.step_failure_data.error), event.step_failure_data.error.cls_name or ""
        _, names = self.plan.steps.get(step_key, ("", [step_key]))
        self.steps.append(StepResult(step_key, stage, list(names), status, seconds, error, error_class))
        note = {"ok": f"{seconds:6.1f} s", "failed": f"{seconds:6.1f} s  FAILED", "skipped": "     -    skipped: an upstream step failed"}
        if error_class == CHECK_FAILED_ERROR:
            error = "a blocking ERROR check failed (see the summary)"
        line = note[status] + (f": {_first_line(error)}" if error else "")
        prefix = "\r\x1b[K" if self.live else ""
        self.out.write(f"{prefix}  {self._counter(len(self.steps))} {stage:<10} {label:<44} {line}\n")
        self.out.flush()

    def _counter(self, n: int) -> str:
        total = len(self.plan.steps)
        return f"[{n:>{len(str(total))}}/{total}]"


@contextlib.contextmanager
def _logging_to(path: Path) -> Iterator[logging.Handler]:
    """Send Dagster's python logging, library warnings and ``warnings`` to ``path`` (not the terminal) inside the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.DEBUG)
    dagster_logger, root = logging.getLogger("dagster"), logging.getLogger()
    saved = (list(dagster_logger.handlers), dagster_logger.level, dagster_logger.propagate)
    dagster_logger.handlers, dagster_logger.propagate = [handler], False
    dagster_logger.setLevel(logging.DEBUG)
    root.addHandler(handler)  # root keeps its level: libraries' INFO chatter (and progress bars tied to it) stays off
    logging.captureWarnings(True)
    try:
        yield handler
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        dagster_logger.handlers, dagster_logger.propagate = saved[0], saved[2]
        dagster_logger.setLevel(saved[1])
        handler.close()


def quiet_progress_bars() -> None:
    """No Hugging Face progress bars (``Loading weights: 100%|...``) on the terminal: they would break the step lines."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when huggingface_hub and transformers are imported
    if "huggingface_hub" in sys.modules:  # already imported: switch them off where the flag was read
        importlib.import_module("huggingface_hub.utils").disable_progress_bars()
    if "transformers" in sys.modules:
        importlib.import_module("transformers.utils.logging").disable_progress_bar()


@contextlib.contextmanager
def _instance(given: dg.DagsterInstance | None, out: TextIO) -> Iterator[dg.DagsterInstance]:
    """The given instance, else ``DAGSTER_HOME``'s (as ``dagster asset materialize`` uses), else an ephemeral one."""
    if given is not None:
        yield given
        return
    home = os.environ.get("DAGSTER_HOME")
    if home:
        Path(home).mkdir(parents=True, exist_ok=True)
        with dg.DagsterInstance.get() as instance:
            yield instance
    else:
        out.write("note: DAGSTER_HOME is not set: an ephemeral instance keeps no run history (the drift check compares with nothing)\n")
        with dg.DagsterInstance.ephemeral() as instance:
            yield instance


def resources_under(out_dir: Path, cache_dir: Path) -> dict[str, object]:
    """The project's resources with every output, index, export, alert and cache under ``out_dir`` / ``cache_dir``.

    The encoder is the project's; the LLM endpoint and the alert webhook come from the environment as in
    :func:`retrieval_pipeline.defs.resources.default_resources` (secrets only through ``dg.EnvVar``).
    """
    env = os.environ
    return {
        "io_manager": ParquetIOManagerFactory(base_path=str(out_dir)),
        "settings": PipelineSettings(out_dir=str(out_dir), cache_dir=str(cache_dir)),
        "alerts": AlertSinkResource(
            log_path=str(out_dir / "alerts.jsonl"),
            webhook_url=dg.EnvVar("RETRIEVAL_ALERT_WEBHOOK_URL") if env.get("RETRIEVAL_ALERT_WEBHOOK_URL") else None,
        ),
        "llm": LLMResource(
            provider=env.get("RETRIEVAL_LLM_PROVIDER", "offline"),
            base_url=env.get("RETRIEVAL_LLM_BASE_URL"),
            model=env.get("RETRIEVAL_LLM_MODEL"),
            api_key=dg.EnvVar("RETRIEVAL_LLM_API_KEY") if env.get("RETRIEVAL_LLM_API_KEY") else None,
            cache_path=str(cache_dir / "llm.sqlite"),
        ),
        "mlflow": mlflow_from_environment(),
    }


def project_definitions(resources: Mapping[str, object] | None = None) -> dg.Definitions:
    """:func:`retrieval_pipeline.definitions.defs`, with ``resources`` replacing its own.

    Assets, checks, jobs, schedules, sensors, loggers and the executor are the project's. Replacing resources
    means building the definitions again: those bound to the assets conflict with any passed at execution.
    """
    base = defs()
    if not resources:
        return base
    return dg.Definitions(
        assets=base.assets,
        asset_checks=base.asset_checks,
        jobs=base.jobs,
        schedules=base.schedules,
        sensors=base.sensors,
        resources={**(base.resources or {}), **resources},
        executor=base.executor,
        loggers=base.loggers,
    )


def run_datasets(
    datasets: Sequence[str],
    *,
    select: str = "*",
    log_path: Path,
    out: TextIO,
    resources: Mapping[str, object] | None = None,
    instance: dg.DagsterInstance | None = None,
    run_config: Mapping[str, Any] | None = None,
) -> list[DatasetRun]:
    """Materialise ``select`` on each dataset partition, one run each, printing a line per finished step.

    Args:
        datasets: Partition keys (dataset names of the registry), run in this order.
        select: An asset selection in ``dagster asset materialize --select`` syntax.
        log_path: The file the full Dagster event stream goes to (appended to).
        out: Where the progress lines go.
        resources: Resources replacing the project's (tests: temporary folders, the keyword encoder, another registry).
        instance: The Dagster instance; ``None`` means ``DAGSTER_HOME``'s (an ephemeral one when it is unset).
        run_config: Run config of every run (``ops``, ``resources``); the console logger's level is set here.

    Returns:
        One :class:`DatasetRun` per dataset, in order (a run that could not start has ``run_id`` ``""``).

    Raises:
        UsageError: An unknown dataset, or a selection that is invalid or empty.
    """
    with _logging_to(log_path) as file_handler:
        stream = _EventStream(out, file_handler)
        definitions = project_definitions(resources)
        repository = definitions.get_repository_def()
        try:
            keys = dg.AssetSelection.from_coercible(select.split(",")).resolve(repository.asset_graph)
        except Exception as exc:  # Dagster raises several types for a bad selection string or unknown key
            raise UsageError(f"invalid --select {select!r}: {_first_line(str(exc))}") from exc
        if not keys:
            raise UsageError(f"--select {select!r} selects no asset")
        job = repository.get_implicit_job_def_for_assets(keys)
        if job is None or job.partitions_def is None:
            raise UsageError(f"--select {select!r}: the selected assets are not all partitioned by dataset")
        try:
            job.get_subset(asset_selection=set(keys))  # what execute_in_process builds: refused here, before any run
        except Exception as exc:  # e.g. one output of a multi-asset without the others
            raise UsageError(f"--select {select!r}: {_first_line(str(exc))}") from exc
        known = job.partitions_def.get_partition_keys()
        unknown = [d for d in datasets if d not in known]
        if unknown:
            raise UsageError(f"unknown dataset(s) {', '.join(unknown)}; the registry has: {', '.join(known)}")
        settings = definitions.resources["settings"]
        invalid = _invalid_datasets(settings, datasets)
        for why in invalid.values():
            out.write(f"error: {_first_line(why)}: not run\n")
        graph = definitions.resolve_asset_graph()
        blocking = {(k.asset_key, k.name) for k in graph.asset_check_keys if graph.get_check_spec(k).blocking}
        config = {**(run_config or {}), "loggers": {**(run_config or {}).get("loggers", {}), **QUIET_CONSOLE["loggers"]}}
        runs: list[DatasetRun] = []
        with _instance(instance, out) as dagster_instance:
            for i, dataset in enumerate(datasets, 1):
                exports = Path(settings.out_dir) / "exports" / dataset
                if dataset in invalid:
                    runs.append(DatasetRun(dataset, "", False, 0.0, [], [], None, exports, error=invalid[dataset]))
                    continue
                try:
                    used, unused = used_by_dataset(keys, settings.registry(), dataset)
                    if unused:
                        out.write(f"   ({dataset} does not use {', '.join(unused)}: their steps are left out)\n")
                    plan = _Plan.of(definitions, sorted(used))
                    runs.append(
                        _run_one(job, config, dataset, (i, len(datasets)), used, plan, blocking, stream, dagster_instance, settings, out)
                    )
                    if runs[-1].interrupted:  # Ctrl-C, SIGINT or SIGTERM during the run: no further dataset
                        break
                except Exception as exc:  # e.g. the registry changed under the run: this dataset fails, the others still run
                    out.write(f"== {dataset}: FAILED: {_first_line(str(exc))}\n")
                    logging.getLogger("dagster").exception(f"run of {dataset} failed")
                    runs.append(DatasetRun(dataset, "", False, 0.0, list(stream.steps), [], None, exports, error=str(exc)))
        return runs


def _invalid_datasets(settings: Any, datasets: Sequence[str]) -> dict[str, str]:
    """``{dataset: why}`` for the datasets whose settings the registry refused (known partitions all the same).

    Raises:
        UsageError: The registry itself cannot be read (its message names the file).
    """
    try:
        registry = settings.registry()
    except (InputError, RetrieverError) as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    invalid = {}
    for dataset in datasets:
        try:
            registry.get(dataset)
        except InputError as exc:
            invalid[dataset] = str(exc)
    return invalid


def used_by_dataset(keys: AbstractSet[dg.AssetKey], registry: Any, dataset: str) -> tuple[set[dg.AssetKey], list[str]]:
    """The selection without the steps the dataset does not use, and the retrievers it does not use at all.

    A dataset uses the retrievers it lists (their index and runs) and their components (index only: a
    component's runs are not evaluated). The other retrievers' steps would only record "not evaluated here";
    ``retrieval_runs`` reads missing runs partitions as absent. A selection made only of unused steps is
    kept whole: asked for explicitly, they run and say so.
    """
    config = registry.get(dataset)
    try:
        needed = set(registry.retrievers.closure(config.retrievers))
    except RetrieverError:  # an invalid retriever spec: the run itself reports it, on the step that needs it
        return set(keys), []
    listed = set(config.retrievers)
    unused = {key for key in keys if (step := retriever_step(key)) is not None and step[0] not in (listed if step[1] == "runs" else needed)}
    if unused == set(keys):
        return set(keys), []
    names = sorted({step[0] for key in unused if (step := retriever_step(key)) is not None and step[0] not in needed})
    return set(keys) - unused, names


def _run_one(
    job: dg.JobDefinition,
    run_config: Mapping[str, Any],
    dataset: str,
    position: tuple[int, int],
    keys: AbstractSet[dg.AssetKey],
    plan: _Plan,
    blocking: set[tuple[dg.AssetKey, str]],
    stream: _EventStream,
    instance: dg.DagsterInstance,
    settings: Any,
    out: TextIO,
) -> DatasetRun:
    """One run of the selection on one partition, as ``dagster asset materialize --partition`` would start it."""
    out.write(f"== {dataset} ({position[0]}/{position[1]}): {len(plan.steps)} steps\n")
    out.flush()
    stream.begin(plan)
    exports = Path(settings.out_dir) / "exports" / dataset
    run_id = str(uuid.uuid4())  # known before the run starts, to listen to its events as they are stored
    instance.add_event_listener(run_id, stream)
    start = time.perf_counter()
    try:
        result = job.execute_in_process(
            run_config=dict(run_config),
            instance=instance,
            partition_key=dataset,
            asset_selection=list(keys),
            run_id=run_id,
            raise_on_error=False,
        )
    except Exception as exc:  # the run could not start or crashed outside a step (invalid config, a resource that fails to build)
        seconds = time.perf_counter() - start
        out.write(f"== {dataset}: FAILED after {seconds:.1f} s: {_first_line(str(exc))}\n")
        logging.getLogger("dagster").exception(f"run of {dataset} failed")
        return DatasetRun(dataset, "", False, seconds, list(stream.steps), [], None, exports, error=str(exc))
    seconds = time.perf_counter() - start
    failed = [
        FailedCheck(
            e.asset_key.to_user_string(),
            e.check_name,
            e.severity.value,
            e.description or "",
            {k: getattr(v, "value", v) for k, v in e.metadata.items()},
            (e.asset_key, e.check_name) in blocking,
        )
        for e in result.get_asset_check_evaluations()
        if not e.passed
    ]
    metrics = _asset_frame(result, METRICS_KEY) if METRICS_KEY in keys else None
    significance = _asset_frame(result, SIGNIFICANCE_KEY) if SIGNIFICANCE_KEY in keys else None
    out.write(f"== {dataset}: {'succeeded' if result.success else 'FAILED'} in {seconds:.1f} s (run {result.run_id[:8]})\n\n")
    out.flush()
    return DatasetRun(
        dataset, result.run_id, result.success, seconds, list(stream.steps), failed, metrics, exports, significance=significance
    )


def _asset_frame(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> pd.DataFrame | None:
    """The frame asset ``key`` produced in the run (also when a blocking check failed after it was stored)."""
    try:
        value = result.asset_value(key)
    except Exception:  # not produced: the step failed before its output
        return None
    return value if isinstance(value, pd.DataFrame) else None


# --------------------------------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------------------------------


def metrics_table(metrics: pd.DataFrame, significance: pd.DataFrame | None = None) -> str:
    """Retrievers x hit@1, hit@5 (with its 95% CI), MRR, nDCG@10 with 3 decimals; the best value of each column marked ``*``.

    Args:
        metrics: The ``retrieval_metrics`` frame (a ``retriever`` column, one column per metric).
        significance: The ``metric_significance`` frame, when the run made it: adds hit@5's confidence
            interval and marks each value significantly better (``▲``) or worse (``▼``) than the baseline.

    Returns:
        A plain-text table (``tabulate``'s ``simple`` format); a missing metric shows ``-``.
    """
    tests = (
        {} if significance is None or significance.empty else {(r["retriever"], r["metric"]): r for r in significance.to_dict("records")}
    )
    baseline = next((r["baseline_retriever"] for r in tests.values() if r.get("baseline_retriever")), None)
    rows = [[f"{name} (baseline)" if name == baseline else name] for name in metrics["retriever"]]
    headers = ["retriever"]
    for header, column in TABLE_COLUMNS:
        values = pd.to_numeric(metrics[column], errors="coerce") if column in metrics else pd.Series([math.nan] * len(metrics))
        best = values.max() if values.nunique() > 1 else None  # no mark when every retriever scores the same
        for row, name, value in zip(rows, metrics["retriever"], values.tolist()):
            test = tests.get((name, column), {})
            mark = MARKS.get(test.get("direction") or "", "") if test.get("significant") else ""
            row.append("-" if pd.isna(value) else f"{value:.3f}" + ("*" if value == best else " ") + (mark or " "))
            if column == CI_METRIC and tests:
                row.append(f"[{test['ci_low']:.3f}, {test['ci_high']:.3f}]" if test else "-")
        headers += [header, "95% CI"] if column == CI_METRIC and tests else [header]
    return tabulate(rows, headers=headers, tablefmt="simple", colalign=("left", *("right" for _ in headers[1:])), disable_numparse=True)


def format_summary(runs: Sequence[DatasetRun], log_path: Path) -> str:
    """Per dataset: outcome, the metrics table, failed checks and steps, where the outputs are; then the log file."""
    lines = ["Summary", "======="]
    for run in runs:
        outcome = "succeeded" if run.success else "FAILED"
        lines.append(f"{run.dataset}: {outcome} in {run.seconds:.1f} s" + (f" (run {run.run_id[:8]})" if run.run_id else ""))
        if run.error:
            lines.append(f"  error: {_first_line(run.error)}")
        if run.metrics is not None and not run.metrics.empty:
            lines += ["  " + line for line in metrics_table(run.metrics, run.significance).splitlines()]
            queries = f"; {int(run.metrics['n_queries'].max())} queries" if "n_queries" in run.metrics else ""
            tested = (
                " ▲/▼ significantly better/worse than the baseline (randomisation test, Holm-corrected);"
                if run.significance is not None
                else ""
            )
            lines.append(f"  (* best per column{queries};{tested} every metric: the report below and retrieval_metrics in the Dagster UI)")
        else:
            lines.append("  no retrieval_metrics from this run (not selected, or its step did not run)")
        retrievers = set(run.metrics["retriever"]) if run.metrics is not None else set()
        if run.failed_checks:
            lines.append("  failed checks:")
            for check in run.failed_checks:
                note = "" if check.blocking or check.severity != "ERROR" else " (not blocking: the run went on)"
                lines.append(f"    {check.severity:<5}  {check.name} on {check.asset}: {check.description}{note}")
                numbers = _numbers(check.metadata, skip=retrievers)
                if numbers:
                    lines.append(f"           {numbers}")
        else:
            lines.append("  failed checks: none")
        for step in (s for s in run.failed_steps if s.error_class != CHECK_FAILED_ERROR):  # failed checks are listed above
            lines.append(f"  failed step {step.step_key}: {_first_line(step.error)}")
        lines += _outputs(run.exports_dir)
        lines.append("")
    lines.append(f"Log (the full Dagster event stream): {_shown(log_path)}")
    failed = [r for r in runs if not r.success]
    if failed:
        why = [
            f"{r.dataset} ("
            + (
                ", ".join(f"ERROR check {c.name}" for c in r.failed_checks if c.blocking and c.severity == "ERROR")
                or ("did not run" if r.error else "a step failed")
            )
            + ")"
            for r in failed
        ]
        lines.append(f"FAILED: {len(failed)} of {len(runs)} run(s): {'; '.join(why)}. Exit code 1")
    else:
        counts = {sev: sum(c.severity == sev for r in runs for c in r.failed_checks) for sev in ("ERROR", "WARN")}
        failed_checks = [f"{n} {'non-blocking ' if sev == 'ERROR' else ''}{sev} check(s)" for sev, n in counts.items() if n]
        tail = f"; {' and '.join(failed_checks)} failed (listed above), none blocks a run" if failed_checks else ""
        lines.append(f"OK: {len(runs)} dataset(s) materialised{tail}")
    return "\n".join(lines) + "\n"


def _numbers(metadata: Mapping[str, Any], skip: set[str]) -> str:
    """A check's metadata in one line (``threshold`` first), without the per-retriever values the table shows."""
    items = sorted(((k, v) for k, v in metadata.items() if k not in skip and _one_line(k, v)), key=lambda kv: (kv[0] != "threshold", kv[0]))
    shown = []
    for key, value in items:
        if isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value)) or "none"
        elif isinstance(value, float):
            value = f"{value:.4g}"
        shown.append(f"{key} {value}")
    return "; ".join(shown)


def _one_line(key: str, value: Any) -> bool:
    """Whether a check's metadata entry fits the one-line summary (not a table, a list of records or the dataset)."""
    if key in {"dataset", "baseline", "rule"}:  # the description already says them
        return False
    if isinstance(value, str):
        return "\n" not in value and len(value) <= 80
    return not (isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value))


def _outputs(exports_dir: Path) -> list[str]:
    """Where the exports and the quality report of a dataset are."""
    if not exports_dir.is_dir():
        return [f"  exports: none yet ({_shown(exports_dir)}/)"]
    files = sorted(p.name for p in exports_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    runs = [f for f in files if f.endswith(".run")]
    named = [f for f in files if not f.endswith(".run")]
    listing = ", ".join(named + ([f"{len(runs)} TREC runs (*.run)"] if runs else []))
    lines = [f"  exports: {_shown(exports_dir)}/: {listing}"]
    shown = (
        ("report (open in a browser)", "report.html"),
        ("evaluation results", "evaluation_results.json"),
        ("quality report", "quality_report.md"),
    )
    for label, name in shown:
        if (exports_dir / name).is_file():
            lines.append(f"  {label}: {_shown(exports_dir / name)}")
    return lines


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


#: The wrappers Dagster puts around a step's own exception (the real message is their cause's).
_WRAPPER_ERRORS = {"DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError"}


def _error_text(error: Any) -> str:
    """A ``SerializableErrorInfo``'s message without the ``module.Class: `` prefix Dagster puts before it.

    ``Error occurred while executing op "raw_cases":`` says nothing: the exception the step raised is its
    cause (as the event log holds it), so the message shown is the innermost wrapped one's.
    """
    while error.cls_name in _WRAPPER_ERRORS and getattr(error, "cause", None) is not None:
        error = error.cause
    message = error.message.strip()
    head, sep, rest = message.partition(": ")
    return rest if sep and error.cls_name and head.split(".")[-1] == error.cls_name else message


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# --------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m retrieval_pipeline.cli.run",
        description="Materialise the asset graph on each dataset (one Dagster run per partition, recorded in DAGSTER_HOME's "
        "instance), one line per finished step; the full event stream goes to a log file; then per dataset the retriever "
        "comparison, the failed checks and where the exports are. Exit 1 when a run failed (a failing ERROR metric floor fails its run).",
    )
    parser.add_argument(
        "--datasets", nargs="+", required=True, metavar="NAME", help="dataset partitions (names in data/config/datasets.yaml)"
    )
    parser.add_argument("--select", default="*", help="asset selection, as `dagster asset materialize --select` (default: '*', everything)")
    parser.add_argument(
        "--config-json", type=json.loads, default=None, help="run config of every run, as `dagster asset materialize --config-json`"
    )
    parser.add_argument(
        "--log", type=Path, default=None, help="log file of the full event stream (default: <out-dir>/logs/run-<timestamp>.log)"
    )
    parser.add_argument("--out-dir", type=Path, default=None, help=f"outputs, indexes and exports (default: {_shown(DEFAULT_OUT_DIR)})")
    parser.add_argument("--cache-dir", type=Path, default=None, help=f"embedding and LLM caches (default: {_shown(DEFAULT_CACHE_DIR)})")
    return parser


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM stop the runs as Ctrl-C does, with or without a terminal.

    A background job of a non-interactive shell (``setsid make run &``, a CI step) inherits SIGINT *ignored*,
    so ``kill -INT`` did nothing; SIGTERM killed the process at once, mid-write. Inside the block SIGINT
    raises KeyboardInterrupt (Dagster's own handling during a run included) and SIGTERM is turned into a
    SIGINT, as Dagster's CLI does; the previous handlers come back after.
    """
    if threading.current_thread() is not threading.main_thread():  # handlers can only be set in the main thread
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: os.kill(os.getpid(), signal.SIGINT))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    resources: Mapping[str, object] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> int:
    """Run the datasets and print the summary; returns the exit code (0 ok, 1 a run failed, 2 bad arguments).

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
        stdout: Where progress and summary go; ``None`` means ``sys.stdout``.
        resources: Resources replacing the project's, over those of ``--out-dir``/``--cache-dir`` (tests).
        instance: The Dagster instance; ``None`` means ``DAGSTER_HOME``'s.

    Returns:
        The process exit code.
    """
    args = build_parser().parse_args(argv)
    out = stdout or sys.stdout
    quiet_progress_bars()
    overrides: dict[str, object] = {}
    if args.out_dir or args.cache_dir:
        overrides.update(resources_under(args.out_dir or DEFAULT_OUT_DIR, args.cache_dir or DEFAULT_CACHE_DIR))
    overrides.update(resources or {})
    out_dir = Path(getattr(overrides.get("settings"), "out_dir", DEFAULT_OUT_DIR))
    log_path = args.log or out_dir / "logs" / f"run-{datetime.now():%Y%m%d-%H%M%S}.log"
    datasets = list(dict.fromkeys(args.datasets))
    try:
        with stop_on_signals():
            runs = run_datasets(
                datasets,
                select=args.select,
                log_path=log_path,
                out=out,
                resources=overrides or None,
                instance=instance,
                run_config=args.config_json,
            )
    except (UsageError, InputError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        out.write(f"\ninterrupted; the event stream so far is in {_shown(log_path)}\n")
        return EXIT_INTERRUPTED
    out.write(format_summary(runs, log_path))
    if any(r.interrupted for r in runs):
        out.write(f"interrupted; the event stream so far is in {_shown(log_path)}\n")
        return EXIT_INTERRUPTED
    return EXIT_OK if all(r.success for r in runs) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
