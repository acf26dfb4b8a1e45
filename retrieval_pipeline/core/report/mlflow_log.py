"""Log one evaluation to MLflow: a parent run for the dataset, a child run per retriever.

MLflow is optional (the ``mlflow`` extra: ``pip install 'retrieval_pipeline[mlflow]'``): it is imported
only when something is logged, so the pipeline runs without it. Nothing here touches MLflow's global
state (``mlflow.set_tracking_uri``, the active run, the default ``./mlruns``): every call goes through an
``MlflowClient`` bound to the tracking URI it is given, and a new experiment's artifact root is chosen
beside the store, so nothing is ever written relative to the current directory.

One **parent run** per (dataset, materialisation), named ``<dataset> week <step>``: the dataset-level
params, the tags (dataset, week, time, Dagster run) and the report files as artifacts. One **child run**
per retriever (tag ``mlflow.parentRunId``), named by the retriever: its spec's settings as params, and
per metric its mean under the metric's name plus ``<metric>_ci_low`` / ``<metric>_ci_high``, so MLflow's
run comparison sets the retrievers side by side, metric by metric. Every metric is logged at one
**step: the evaluation week**, ``ISO year * 100 + ISO week`` of ``evaluated_at`` in UTC (2026-11-19 is in
ISO week 47 of 2026: step ``202647``). The step grows with time and reads as a date, so MLflow's charts
of a metric against its step show the weekly evaluations in order, one point a week.

Params hold settings as the registry states them: a secret is named there by its environment variable
(``api_key_env``), never by its value, so no secret reaches a run.
"""

from __future__ import annotations

import contextlib
import json
import math
import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.errors import InputError

INSTALL_HINT = "pip install 'retrieval_pipeline[mlflow]'"

# MLflow's own limits (mlflow.utils.validation, 3.x); a test checks these copies against the library
MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000

# portable subset of what MLflow accepts in a key (it also allows spaces, and colons except on Windows)
_DISALLOWED = re.compile(r"[^A-Za-z0-9_.\-]")
_NAME_REPLACEMENTS = {"@": "_at_", "%": "_pct_", "+": "_plus_"}
_TRUNCATION_NOTE = "... [truncated by retrieval_pipeline: {n} of {total} characters dropped]"

TAG_DATASET = "dataset"
TAG_DAGSTER_RUN_ID = "dagster_run_id"
TAG_EVALUATION_WEEK = "evaluation_week"
TAG_EVALUATED_AT = "evaluated_at"
TAG_TRUNCATED_PARAMS = "truncated_params"
TAG_RETRIEVER = "retriever"
#: MLflow's own tag that nests a run under another (what ``mlflow.start_run(nested=True)`` sets).
TAG_PARENT_RUN_ID = "mlflow.parentRunId"

CI_LOW_SUFFIX = "_ci_low"
CI_HIGH_SUFFIX = "_ci_high"


class MLflowLogError(RuntimeError):
    """MLflow could not be reached or refused the evaluation; the message names the tracking URI."""


class MLflowNotInstalledError(MLflowLogError, ImportError):
    """MLflow logging is enabled but the ``mlflow`` extra is not installed."""


@dataclass(frozen=True)
class RetrieverResult:
    """One retriever of an evaluation, logged as a child run named by the retriever.

    Attributes:
        settings: Its spec's settings, possibly nested: the child run's params (empty: none known).
        means: ``{metric: mean}``, logged under the metric's name; NaN and None are skipped.
        intervals: ``{metric: (ci_low, ci_high)}``, logged as ``<metric>_ci_low`` and ``<metric>_ci_high``.
    """

    settings: Mapping[str, Any]
    means: Mapping[str, Any]
    intervals: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class LoggedRun:
    """What was logged: where to find the runs, and what was left out or shortened on the way.

    Attributes:
        run_id: The parent run (one per dataset and materialisation).
        experiment_id: Its experiment (its children's too).
        step: The evaluation week every metric was logged at (:func:`evaluation_week`, e.g. ``202647``).
        child_run_ids: ``{retriever: run id}`` of the child runs, in the order logged.
        n_metrics: Metrics logged, over all children (means and interval bounds).
        n_skipped_nan: Values left out because they were NaN or None.
        truncated_params: Param keys whose values were cut to MLflow's 6000 characters (also a tag of their
            run); a child's keys as ``<retriever>/<key>``.
        artifacts: Names of the files and folders logged at the parent's artifact root.
        artifact_uri: Where the parent's artifacts live.
    """

    run_id: str
    experiment_id: str
    step: int
    child_run_ids: Mapping[str, str]
    n_metrics: int
    n_skipped_nan: int
    truncated_params: tuple[str, ...]
    artifacts: tuple[str, ...]
    artifact_uri: str


def evaluation_week(evaluated_at: datetime) -> int:
    """``ISO year * 100 + ISO week`` of ``evaluated_at`` in UTC (a naive datetime is taken as UTC).

    The ISO year, not the calendar year: 2027-01-01 is in week 53 of 2026 (``202653``) and 2024-12-30 in
    week 1 of 2025 (``202501``), so the step never goes back at New Year.
    """
    iso = _as_utc(evaluated_at).isocalendar()
    return iso.year * 100 + iso.week


def sanitise_name(name: str) -> str:
    """An MLflow key, or one component of it: ``hit_rate@5`` -> ``hit_rate_at_5``; any other unsafe character -> ``_``.

    Keeps ASCII letters, digits, ``_``, ``.`` and ``-`` (valid in MLflow on every OS); a slash becomes ``_``,
    so that a key is one component and never a path. A name made only of dots (``.`` or ``..``, which
    MLflow refuses as a path) becomes underscores.
    """
    text = "".join(_NAME_REPLACEMENTS.get(ch, ch) for ch in str(name))
    text = _DISALLOWED.sub("_", text)
    return "_" * len(text) if text and set(text) == {"."} else text


def metric_values(dataset: str, retriever: str, result: RetrieverResult) -> tuple[dict[str, float], int]:
    """A child run's metrics, ``{key: value}``, and how many NaN/None values were skipped.

    Each mean is logged under its metric's sanitised name (``hit_rate@5`` -> ``hit_rate_at_5``), each
    interval as ``<metric>_ci_low`` and ``<metric>_ci_high`` (``hit_rate_at_5_ci_low``).

    Raises:
        InputError: a value that is not a number, an empty or over-long key, or two names that become the
            same key (``a b`` and ``a_b``; a mean named ``mrr_ci_low`` beside the interval of ``mrr``): the
            message names the dataset, the retriever and the names.
    """
    named = [(str(metric), str(metric), value) for metric, value in result.means.items()]
    for metric, (low, high) in result.intervals.items():
        named += [(f"{metric} ci_low", f"{metric}{CI_LOW_SUFFIX}", low), (f"{metric} ci_high", f"{metric}{CI_HIGH_SUFFIX}", high)]
    values: dict[str, float] = {}
    origin: dict[str, str] = {}
    skipped = 0
    for label, name, value in named:
        where = f"{retriever}/{label}"
        if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
            skipped += 1
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InputError(f"dataset {dataset}: metric {where} is {value!r}, not a number", case_id=where)
        key = _checked_key(dataset, sanitise_name(name), where, origin)
        values[key] = float(value)
    return values, skipped


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mappings flattened with dotted keys (``{"bm25": {"k1": 1.2}}`` -> ``{"bm25.k1": "1.2"}``), values stringified.

    Strings stay as they are, lists/tuples/sets become JSON (sets sorted, so a run's params do not depend
    on hashing order), anything else ``str()``. Keys are sanitised like metric names, per component.
    """
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{sanitise_name(key)}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, f"{name}."))
        else:
            flat[name] = _param_text(value)
    return flat


def limit_length(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters, ending in a note of how many were dropped; and whether it was cut."""
    if len(text) <= limit:
        return text, False
    widest = _TRUNCATION_NOTE.format(n=len(text), total=len(text))  # the count has at most this many digits
    keep = limit - len(widest)
    return text[:keep] + _TRUNCATION_NOTE.format(n=len(text) - keep, total=len(text)), True


def log_evaluation(
    tracking_uri: str,
    experiment: str,
    dataset: str,
    evaluated_at: datetime,
    params: Mapping[str, Any],
    retrievers: Mapping[str, RetrieverResult],
    artifacts: Sequence[Path],
    run_name: str | None = None,
    tags: Mapping[str, Any] | None = None,
    *,
    dagster_run_id: str | None = None,
    artifact_location: str | None = None,
) -> LoggedRun:
    """Log one evaluation of ``dataset`` as a finished parent run in ``experiment`` with a child run per retriever.

    Args:
        tracking_uri: The MLflow store, e.g. ``sqlite:////abs/path/mlflow.db`` or ``http://host:5000``; required
            (an empty URI would fall back to MLflow's default in the current directory, so it is refused).
        experiment: Experiment name; created when missing, with its artifacts beside a SQLite store.
        dataset: The dataset (partition) evaluated; tagged ``dataset`` on every run.
        evaluated_at: When the evaluation ran; gives the step (:func:`evaluation_week`) and metric timestamps.
        params: The dataset-level settings of the evaluation, possibly nested: the parent's params.
            Every run's params are logged flat and stringified, values longer than MLflow's 6000
            characters truncated with a note (and listed in the run's ``truncated_params`` tag).
        retrievers: ``{retriever: RetrieverResult}``: one child run each, in this order, named by the
            retriever and tagged ``retriever``; its settings are its params, its means and intervals its
            metrics (:func:`metric_values`).
        artifacts: Report files (or folders) to attach at the parent's artifact root; names must differ.
        run_name: The parent's name; defaults to ``<dataset> week <step>``.
        tags: Extra tags of every run (stringified, values over 8000 characters truncated).
        dagster_run_id: Tagged ``dagster_run_id`` on every run when given, to go from MLflow back to Dagster.
        artifact_location: Artifact root for a new experiment; by default ``<store folder>/mlartifacts`` for
            SQLite and the store itself for ``file:``; required for other databases (else MLflow uses ``./mlruns``).

    Returns:
        The parent's run id, the experiment id, the step, the children's run ids, the number of metrics
        logged and of NaN skipped, truncated params, artifact names and the parent's artifact URI.

    Raises:
        InputError: bad metrics, an over-long param key, an empty retriever name or a missing artifact
            (checked before any run is created).
        MLflowNotInstalledError: ``mlflow`` is not importable.
        MLflowLogError: the store cannot be opened or refused a write; names the tracking URI. A run
            created before the failure is marked FAILED (the parent, and the child being logged).
    """
    step = evaluation_week(evaluated_at)
    children = {name: _child(dataset, name, result) for name, result in retrievers.items()}
    files = _artifact_files(dataset, artifacts)
    param_values, truncated = _limited_params(params)
    run_tags = _run_tags(dataset, evaluated_at, step, tags, dagster_run_id, truncated)
    client = _client(tracking_uri)
    experiment_id = _experiment_id(client, tracking_uri, experiment, artifact_location)
    with _naming(tracking_uri, f"dataset {dataset}: could not create a run in experiment {experiment!r}"):
        run = client.create_run(experiment_id, tags=run_tags, run_name=run_name or f"{dataset} week {step}")
    run_id = run.info.run_id
    millis = _millis(evaluated_at)
    child_run_ids: dict[str, str] = {}
    try:
        _log_params_and_metrics(client, run_id, param_values, {}, step, millis)
        for name, child in children.items():
            own = {TAG_RETRIEVER: name, TAG_PARENT_RUN_ID: run_id}
            child_tags = _run_tags(dataset, evaluated_at, step, tags, dagster_run_id, child.truncated, own)
            child_run_ids[name] = _log_child(client, experiment_id, name, child, child_tags, step, millis)
        for path in files:
            _log_artifact(client, run_id, path)
    except Exception as exc:
        with contextlib.suppress(Exception):  # the store may be what failed; the original error matters more
            client.set_terminated(run_id, "FAILED")
        raise MLflowLogError(f"MLflow tracking URI {tracking_uri!r}, dataset {dataset}, run {run_id}: {exc}") from exc
    client.set_terminated(run_id, "FINISHED")
    return LoggedRun(
        run_id=run_id,
        experiment_id=experiment_id,
        step=step,
        child_run_ids=child_run_ids,
        n_metrics=sum(len(c.values) for c in children.values()),
        n_skipped_nan=sum(c.skipped for c in children.values()),
        truncated_params=(*truncated, *(f"{name}/{key}" for name, c in children.items() for key in c.truncated)),
        artifacts=tuple(p.name for p in files),
        artifact_uri=run.info.artifact_uri,
    )


def default_artifact_location(tracking_uri: str) -> str | None:
    """Where a new experiment keeps its artifacts when none is configured, so that it is never ``./mlruns``.

    ``sqlite:///<path>``: ``<folder of the database>/mlartifacts`` (an absolute path; a relative database
    path is resolved against the current directory, as SQLite itself does). ``file:`` stores, servers
    (``http``, ``https``) and Databricks choose their own location: None. Other databases: an error, since
    MLflow would default to ``./mlruns`` in whatever directory the pipeline runs from.
    """
    scheme = tracking_uri.split(":", 1)[0].lower() if ":" in tracking_uri else ""
    if scheme == "sqlite":
        database = tracking_uri.removeprefix("sqlite:///").split("?", 1)[0]
        if not database or database == ":memory:":
            raise MLflowLogError(f"MLflow tracking URI {tracking_uri!r}: an in-memory SQLite store keeps nothing; give a file path")
        return (Path(database).resolve().parent / "mlartifacts").as_uri()
    if scheme in {"file", "http", "https", "databricks", "databricks-uc", "uc"} or (scheme == "" and tracking_uri):
        return None
    raise MLflowLogError(
        f"MLflow tracking URI {tracking_uri!r}: set artifact_location for a new experiment in this store "
        "(MLflow would otherwise write artifacts under ./mlruns in the current directory)"
    )


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _millis(moment: datetime) -> int:
    return int(_as_utc(moment).timestamp() * 1000)


def _checked_key(dataset: str, key: str, where: str, origin: dict[str, str]) -> str:
    """``key`` if it is usable and new; ``origin`` maps keys already taken to the names they came from."""
    if not key.strip("_"):
        raise InputError(f"dataset {dataset}: metric {where!r} has an empty name", case_id=where)
    if len(key) > MAX_KEY_LENGTH:
        raise InputError(f"dataset {dataset}: metric key {key!r} is longer than MLflow's {MAX_KEY_LENGTH} characters", case_id=where)
    if key in origin:
        raise InputError(f"dataset {dataset}: metrics {origin[key]!r} and {where!r} both become MLflow key {key!r}", case_id=where)
    origin[key] = where
    return key


def _param_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (set, frozenset)):
        return json.dumps(sorted(value, key=str), default=str)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value), default=str)
    return str(value)


def _limited_params(params: Mapping[str, Any], owner: str = "") -> tuple[dict[str, str], list[str]]:
    """Flat params with values cut to MLflow's limit, and the keys that were cut; over-long keys are refused."""
    limited: dict[str, str] = {}
    truncated: list[str] = []
    for key, text in flatten_params(params).items():
        if len(key) > MAX_KEY_LENGTH:
            raise InputError(f"{owner}param key {key!r} is longer than MLflow's {MAX_KEY_LENGTH} characters", case_id=key)
        limited[key], cut = limit_length(text, MAX_PARAM_VALUE_LENGTH)
        if cut:
            truncated.append(key)
    return limited, truncated


@dataclass(frozen=True)
class _Child:
    """A retriever's child run, checked and ready to log."""

    params: dict[str, str]
    truncated: list[str]
    values: dict[str, float]
    skipped: int


def _child(dataset: str, retriever: str, result: RetrieverResult) -> _Child:
    """The retriever's params and metrics as MLflow takes them; an empty name or a bad value is an error."""
    if not str(retriever).strip():
        raise InputError(f"dataset {dataset}: a retriever has an empty name", case_id=str(retriever))
    params, truncated = _limited_params(result.settings, f"dataset {dataset}, retriever {retriever}: ")
    values, skipped = metric_values(dataset, retriever, result)
    return _Child(params, truncated, values, skipped)


def _run_tags(
    dataset: str,
    evaluated_at: datetime,
    step: int,
    tags: Mapping[str, Any] | None,
    dagster_run_id: str | None,
    truncated: list[str],
    more: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The user's tags, then the ones this module owns (dataset, week, time, Dagster run, truncated params, ``more``)."""
    own: dict[str, Any] = {TAG_DATASET: dataset, TAG_EVALUATION_WEEK: step, TAG_EVALUATED_AT: _as_utc(evaluated_at).isoformat()}
    if dagster_run_id:
        own[TAG_DAGSTER_RUN_ID] = dagster_run_id
    if truncated:
        own[TAG_TRUNCATED_PARAMS] = ",".join(truncated)
    merged = {**{sanitise_name(k): v for k, v in (tags or {}).items()}, **own, **(more or {})}
    return {k: limit_length(_param_text(v), MAX_TAG_VALUE_LENGTH)[0] for k, v in merged.items()}


def _artifact_files(dataset: str, artifacts: Sequence[Path]) -> list[Path]:
    """The artifacts as paths, each existing, with distinct names (they all land at the run's artifact root)."""
    files = [Path(p) for p in artifacts]
    seen: dict[str, Path] = {}
    for path in files:
        if not path.exists():
            raise InputError(f"dataset {dataset}: artifact to log to MLflow does not exist", path=str(path))
        if path.name in seen:
            raise InputError(f"dataset {dataset}: artifacts {seen[path.name]} and {path} share the name {path.name!r}", path=str(path))
        seen[path.name] = path
    return files


def _client(tracking_uri: str) -> Any:
    """An ``MlflowClient`` bound to ``tracking_uri`` (never MLflow's default store), imported only now."""
    if not tracking_uri or not tracking_uri.strip():
        raise MLflowLogError("MLflow tracking URI is empty: set MLFLOW_TRACKING_URI (e.g. sqlite:////abs/path/mlflow.db) or disable MLflow")
    try:
        from mlflow import MlflowClient
    except ImportError as exc:
        raise MLflowNotInstalledError(
            f"MLflow logging is enabled (tracking URI {tracking_uri!r}) but mlflow is not installed: {INSTALL_HINT}"
        ) from exc
    with _naming(tracking_uri, "cannot open the store"):
        return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def _experiment_id(client: Any, tracking_uri: str, name: str, artifact_location: str | None) -> str:
    """The id of experiment ``name``, created (race-safe) when missing; a deleted one is an error, not reused."""
    with _naming(tracking_uri, f"cannot read experiment {name!r}"):
        found = client.get_experiment_by_name(name)
    if found is None:
        location = artifact_location or default_artifact_location(tracking_uri)
        try:
            return client.create_experiment(name, artifact_location=location)
        except Exception as exc:  # created meanwhile by a concurrent materialisation: use that one
            found = client.get_experiment_by_name(name)
            if found is None:
                raise MLflowLogError(f"MLflow tracking URI {tracking_uri!r}: cannot create experiment {name!r}: {exc}") from exc
    if found.lifecycle_stage != "active":
        raise MLflowLogError(
            f"MLflow tracking URI {tracking_uri!r}: experiment {name!r} is {found.lifecycle_stage}; restore it or choose another name"
        )
    return found.experiment_id


def _log_params_and_metrics(
    client: Any, run_id: str, params: Mapping[str, str], values: Mapping[str, float], step: int, millis: int
) -> None:
    """Params and metrics in batches within MLflow's per-request limits, synchronously."""
    from mlflow.entities import Metric, Param

    param_list = [Param(k, v) for k, v in params.items()]
    for start in range(0, len(param_list), MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, params=param_list[start : start + MAX_PARAMS_TAGS_PER_BATCH], synchronous=True)
    metric_list = [Metric(k, v, millis, step) for k, v in values.items()]
    for start in range(0, len(metric_list), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metric_list[start : start + MAX_METRICS_PER_BATCH], synchronous=True)


def _log_child(client: Any, experiment_id: str, retriever: str, child: _Child, tags: Mapping[str, str], step: int, millis: int) -> str:
    """One retriever's child run, finished; its id. A failure marks it FAILED and names the retriever and run."""
    run_id = client.create_run(experiment_id, tags=dict(tags), run_name=retriever).info.run_id
    try:
        _log_params_and_metrics(client, run_id, child.params, child.values, step, millis)
    except Exception as exc:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, "FAILED")
        raise RuntimeError(f"retriever {retriever}, run {run_id}: {exc}") from exc
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _log_artifact(client: Any, run_id: str, path: Path) -> None:
    """A file at the artifact root; a folder as ``<folder name>/...``."""
    if path.is_dir():
        client.log_artifacts(run_id, str(path), artifact_path=path.name)
    else:
        client.log_artifact(run_id, str(path))


@contextlib.contextmanager
def _naming(tracking_uri: str, doing: str) -> Iterator[None]:
    """Re-raise any failure inside as :class:`MLflowLogError` naming the tracking URI and what was being done."""
    try:
        yield
    except MLflowLogError:
        raise
    except Exception as exc:
        raise MLflowLogError(f"MLflow tracking URI {tracking_uri!r}: {doing}: {exc}") from exc
