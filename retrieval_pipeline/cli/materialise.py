"""The runs of ``python -m retrieval_pipeline.cli.run`` (:mod:`.run` reads the command line): the asset graph
materialised per dataset, one Dagster run each, a line per finished step.

One Dagster run per dataset partition, on the job ``dagster asset materialize`` runs (the implicit
``__ASSET_JOB`` of :func:`retrieval_pipeline.definitions.defs`, with its resources, in one process),
against the persistent instance of ``DAGSTER_HOME``: runs, materialisations and check results land in
the instance as with the CLI, so the drift check and the alert sensor read them. The full Dagster event stream
goes to the log file; the console logger of each run is set to CRITICAL (:data:`QUIET_CONSOLE`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, TextIO

import dagster as dg
import pandas as pd

from retrieval_pipeline.cli.console import DatasetRun, FailedCheck, first_line, run_notes, shown_path
from retrieval_pipeline.cli.instance import home_instance
from retrieval_pipeline.cli.progress import EventStream, Plan, logging_to
from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.assets.retrieval import retriever_step
from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory
from retrieval_pipeline.defs.mlflow_resource import mlflow_from_environment
from retrieval_pipeline.defs.resources import AlertSinkResource, LLMResource, PipelineSettings

METRICS_KEY = dg.AssetKey("retrieval_metrics")
SIGNIFICANCE_KEY = dg.AssetKey("metric_significance")
PAIRS_KEY = dg.AssetKey("retriever_pairs")
#: Run config of every run: Dagster's console logger (stderr) prints only CRITICAL; the log file gets every event.
QUIET_CONSOLE: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


class UsageError(ValueError):
    """An argument the runner cannot act on (unknown dataset, empty or invalid selection)."""


@contextlib.contextmanager
def _instance(given: dg.DagsterInstance | None, out: TextIO) -> Iterator[dg.DagsterInstance]:
    """The given instance, else ``DAGSTER_HOME``'s (as ``dagster asset materialize`` uses), else an ephemeral one."""
    if given is not None:
        yield given
        return
    if os.environ.get("DAGSTER_HOME"):
        with home_instance() as instance:  # a fresh home initialised once, under a lock (two first runs at once)
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
    add_retriever: str | None = None,
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
        add_retriever: A retriever to add instead of ``select``: :func:`add_retriever_selection`.
        log_path: The file the full Dagster event stream goes to (appended to).
        out: Where the progress lines go.
        resources: Resources replacing the project's (tests: temporary folders, the keyword encoder, another registry).
        instance: The Dagster instance; ``None`` means ``DAGSTER_HOME``'s (an ephemeral one when it is unset).
        run_config: Run config of every run (``ops``, ``resources``); the console logger's level is set here.

    Returns:
        One :class:`DatasetRun` per dataset, in order (a run that could not start has ``run_id`` ``""``).

    Raises:
        UsageError: An unknown dataset, or a selection that is invalid or empty, or a retriever to add that is
            unknown or not listed by a dataset.
    """
    with logging_to(log_path) as file_handler:
        stream = EventStream(out, file_handler)
        definitions = project_definitions(resources)
        repository = definitions.get_repository_def()
        if add_retriever:
            select = add_retriever_selection(definitions.resources["settings"].registry(), add_retriever, datasets)
        try:
            keys = dg.AssetSelection.from_coercible(select.split(",")).resolve(repository.asset_graph)
        except Exception as exc:  # Dagster raises several types for a bad selection string or unknown key
            raise UsageError(f"invalid --select {select!r}: {first_line(str(exc))}") from exc
        if not keys:
            raise UsageError(f"--select {select!r} selects no asset")
        job = repository.get_implicit_job_def_for_assets(keys)
        if job is None or job.partitions_def is None:
            raise UsageError(f"--select {select!r}: the selected assets are not all partitioned by dataset")
        try:
            job.get_subset(asset_selection=set(keys))  # what execute_in_process builds: refused here, before any run
        except Exception as exc:  # e.g. one output of a multi-asset without the others
            raise UsageError(f"--select {select!r}: {first_line(str(exc))}") from exc
        known = job.partitions_def.get_partition_keys()
        unknown = [d for d in datasets if d not in known]
        if unknown:
            raise UsageError(f"unknown dataset(s) {', '.join(unknown)}; the registry has: {', '.join(known)}")
        settings = definitions.resources["settings"]
        invalid = _invalid_datasets(settings, datasets)
        for why in invalid.values():
            out.write(f"error: {first_line(why)}: not run\n")
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
                        out.write(f"   ({unused_note(dataset, unused)})\n")
                    plan = Plan.of(definitions, sorted(used))
                    runs.append(
                        _run_one(job, config, dataset, (i, len(datasets)), used, plan, blocking, stream, dagster_instance, settings, out)
                    )
                    if runs[-1].interrupted or stop.requested():  # Ctrl-C, SIGINT or SIGTERM during the run: no further dataset
                        break
                except Exception as exc:  # e.g. the registry changed under the run: this dataset fails, the others still run
                    out.write(f"== {dataset}: FAILED: {first_line(str(exc))}\n")
                    logging.getLogger("dagster").exception(f"run of {dataset} failed")
                    runs.append(DatasetRun(dataset, "", False, 0.0, list(stream.steps), [], None, exports, error=str(exc)))
        return runs


def add_retriever_selection(registry: Any, name: str, datasets: Sequence[str]) -> str:
    """What adding retriever ``name`` to ``datasets`` materialises: the index of each retriever it needs, components
    first (``retrievers/<part>_index``), its runs, and everything downstream of ``retrieval_runs``.

    A component never built for a dataset is built here, so an entry on others (``code_lexical_ft_classes`` on
    ``code_lexical_ft`` on ``dense_minilm_ft``) is added in one command; a component already built rebuilds from
    its caches (embeddings, fine-tuned models).

    Raises:
        UsageError: ``name`` is unknown or invalid, or a dataset does not list it (it would only record "not
            evaluated"): the message says where to add it.
    """
    try:
        parts = registry.retrievers.closure([name])
    except RetrieverError as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    for dataset in datasets:
        with contextlib.suppress(InputError):  # an unknown or invalid dataset is reported where datasets are checked
            listed = registry.get(dataset).retrievers
            if name not in listed:
                raise UsageError(
                    f"dataset {dataset} does not list retriever {name}: add it to `retrievers:` of {dataset} in "
                    f"{shown_path(Path(registry.path))}, then run this again (it lists {', '.join(listed)})"
                )
    return ",".join([*(f"retrievers/{part}_index" for part in parts), f"retrievers/{name}_runs", "retrieval_runs*"])


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


#: Retrievers a dataset does not use that the progress line names; more are counted (the registry grows).
UNUSED_NAMED = 5


def unused_note(dataset: str, unused: Sequence[str]) -> str:
    """The line saying which retrievers' steps a dataset's run leaves out: named when few, else counted."""
    if len(unused) <= UNUSED_NAMED:
        return f"{dataset} does not use {', '.join(unused)}: their steps are left out"
    return f"{dataset} does not use {len(unused)} of the registry's retrievers (data/config/retrievers.yaml): their steps are left out"


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
    plan: Plan,
    blocking: set[tuple[dg.AssetKey, str]],
    stream: EventStream,
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
        out.write(f"== {dataset}: FAILED after {seconds:.1f} s: {first_line(str(exc))}\n")
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
    pairs = _asset_frame(result, PAIRS_KEY) if PAIRS_KEY in keys else None
    notes = run_notes(_materialised(result))
    out.write(f"== {dataset}: {'succeeded' if result.success else 'FAILED'} in {seconds:.1f} s (run {result.run_id[:8]})\n")
    out.write("".join(f"   {note}\n" for note in notes) + "\n")
    out.flush()
    return DatasetRun(
        dataset,
        result.run_id,
        result.success,
        seconds,
        list(stream.steps),
        failed,
        metrics,
        exports,
        significance=significance,
        pairs=pairs,
        notes=notes,
    )


def _materialised(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """``{asset key: {metadata key: plain value}}`` of every materialisation of the run."""
    found: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        found[materialization.asset_key.to_user_string()] = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
    return found


def _asset_frame(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> pd.DataFrame | None:
    """The frame asset ``key`` produced in the run (also when a blocking check failed after it was stored)."""
    try:
        value = result.asset_value(key)
    except Exception:  # not produced: the step failed before its output
        return None
    return value if isinstance(value, pd.DataFrame) else None
