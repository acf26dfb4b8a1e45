"""The production code location: the project's definitions with the executor that the deployment picks.

``retrieval_pipeline.definitions`` runs every step of a run in one process, so torch and the model load
once per run. That suits ``make run``. A deployment loads this file instead. In Dagster 1.13 the
executor is part of the code, not of ``dagster.yaml``: ``Definitions(executor=...)`` sets it for every
job, and ``define_asset_job(executor_def=...)`` for one job. Its settings are run config under
``execution: config:``, which you can give at launch or fix in a job's ``config=``. Here it is chosen from
the code location's environment:

- ``RETRIEVAL_PIPELINE_EXECUTOR``: ``multiprocess`` (default: one process per step, on the run's host or
  pod), ``in_process``, or ``k8s`` (one Kubernetes Job per step, from ``dagster-k8s``: ``data/out`` and
  ``data/cache`` must then be ReadWriteMany volumes, because steps hand over Parquet files);
- ``RETRIEVAL_PIPELINE_MAX_CONCURRENT``: how many steps of one run may run at once (default 2). A run
  can override it with ``execution: {config: {max_concurrent: N}}``.

Within one run, at most one step whose op carries the tag ``retrieval_pipeline/heavy: embedding`` runs
at a time (the executor's op-tag limit). Across runs, the instance's run queue applies the same limit
to run tags (``deploy/dagster.yaml``).

Load it with ``dagster api grpc -f deploy/code_location.py`` (the image's command), or with
``deploy/workspace.yaml`` for ``dagster-webserver`` and ``dagster-daemon``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import dagster as dg

from retrieval_pipeline import definitions as project  # a module: a second @dg.definitions in scope is refused

EXECUTOR_ENV = "RETRIEVAL_PIPELINE_EXECUTOR"
MAX_CONCURRENT_ENV = "RETRIEVAL_PIPELINE_MAX_CONCURRENT"
DEFAULT_EXECUTOR = "multiprocess"
DEFAULT_MAX_CONCURRENT = 2
#: The tag of embedding-heavy work: on runs for the run queue's limit, and on ops for the executor's limit.
HEAVY_TAG_KEY = "retrieval_pipeline/heavy"
HEAVY_TAG_VALUE = "embedding"
#: At most one embedding-heavy step at a time within a run, whatever ``max_concurrent`` is.
STEP_TAG_LIMITS: tuple[dict[str, object], ...] = ({"key": HEAVY_TAG_KEY, "value": HEAVY_TAG_VALUE, "limit": 1},)


@dataclass(frozen=True)
class ExecutorChoice:
    """Which executor runs the steps of a run, and how many steps it runs at once by default."""

    name: str
    max_concurrent: int


def _step_limited(base: dg.ExecutorDefinition, name: str, max_concurrent: int) -> dg.ExecutorDefinition:
    """``base`` with the heavy-step limit fixed, and ``max_concurrent`` a default that run config can override."""

    def config_fn(config: Mapping[str, object]) -> dict[str, object]:
        return {"max_concurrent": config["max_concurrent"], "tag_concurrency_limits": [dict(limit) for limit in STEP_TAG_LIMITS]}

    return base.configured(config_fn, name=name, config_schema={"max_concurrent": dg.Field(int, default_value=max_concurrent)})


def _in_process(_max_concurrent: int) -> dg.ExecutorDefinition:
    return dg.in_process_executor


def _multiprocess(max_concurrent: int) -> dg.ExecutorDefinition:
    return _step_limited(dg.multiprocess_executor, "multiprocess", max_concurrent)


def _k8s(max_concurrent: int) -> dg.ExecutorDefinition:
    from dagster_k8s import k8s_job_executor  # the `deploy` extra; only the Kubernetes deployment needs it

    return _step_limited(k8s_job_executor, "k8s", max_concurrent)


#: The executors a deployment can name in ``RETRIEVAL_PIPELINE_EXECUTOR``.
EXECUTORS: dict[str, Callable[[int], dg.ExecutorDefinition]] = {
    "in_process": _in_process,
    "multiprocess": _multiprocess,
    "k8s": _k8s,
}


def executor_from_environment(environ: Mapping[str, str]) -> ExecutorChoice:
    """The executor named by ``RETRIEVAL_PIPELINE_EXECUTOR`` and ``RETRIEVAL_PIPELINE_MAX_CONCURRENT``.

    Raises:
        ValueError: an unknown executor, or a step count that is not a positive integer (the message
            names the variable and its value).
    """
    name = environ.get(EXECUTOR_ENV, DEFAULT_EXECUTOR)
    if name not in EXECUTORS:
        raise ValueError(f"{EXECUTOR_ENV}={name!r} is not an executor; expected one of {', '.join(sorted(EXECUTORS))}")
    raw = environ.get(MAX_CONCURRENT_ENV, str(DEFAULT_MAX_CONCURRENT))
    try:
        max_concurrent = int(raw)
    except ValueError:
        max_concurrent = 0
    if max_concurrent < 1:
        raise ValueError(f"{MAX_CONCURRENT_ENV}={raw!r} must be a positive integer (steps run at once in one run)")
    return ExecutorChoice(name=name, max_concurrent=max_concurrent)


def with_executor(base: dg.Definitions, executor: dg.ExecutorDefinition) -> dg.Definitions:
    """``base`` with its default executor replaced.

    ``Definitions.merge`` refuses two executors, so this builds the definitions again from ``base``'s fields.
    """
    return dg.Definitions(
        assets=base.assets,
        schedules=base.schedules,
        sensors=base.sensors,
        jobs=base.jobs,
        resources=base.resources,
        executor=executor,
        loggers=base.loggers,
        asset_checks=base.asset_checks,
        metadata=base.metadata,
        component_tree=base.component_tree,
    )


def production_definitions(base: dg.Definitions, choice: ExecutorChoice) -> dg.Definitions:
    """The project's definitions, run by the chosen executor."""
    return with_executor(base, EXECUTORS[choice.name](choice.max_concurrent))


@dg.definitions
def defs() -> dg.Definitions:
    """What ``dagster api grpc -f deploy/code_location.py`` serves."""
    return production_definitions(project.defs(), executor_from_environment(os.environ))
