"""The dataset registry: ``data/config/datasets.yaml`` read into typed settings.

Every dataset is one partition of the asset graph. Per-dataset settings override the ``defaults``
block key by key (nested mappings are merged), so a dataset names only what differs.

Trust: the registry is configuration the team writes and reviews; the files it names are
data. So a dataset *name* must be one safe folder name (``[A-Za-z0-9_.-]``, no ``..``; see
:func:`retrieval_pipeline.core.common.paths.check_name`), else the whole registry is refused, naming the file
and the name. Registry *paths* resolve against the root (``root:`` or the project root) and may leave
it (``../shared/data``) or go through symlinks: they are trusted like the rest of the config. What
those files name in turn is not: a suite's file paths must stay inside the suite's folder (or the
root the registry gives for them), symlinks included (:mod:`retrieval_pipeline.core.datasets.suite.reader`).
The file is read through :func:`~retrieval_pipeline.core.common.yaml_file.read_yaml_mapping` (size,
nesting and alias expansion bounded; the one anchor the project's registry uses stays allowed) and
validation errors are ``field: message`` lines that never echo the input.

Metric names are checked at load as well (:func:`_check_metrics`): a threshold or the drift metric must
name a metric the dataset's evaluation computes (not ``recal@5``, not ``hit_rate@500`` at depth 100) and
where higher is better (a floor on ``latency_p95_ms`` is refused). Such a dataset is invalid, with
``thresholds.<metric>: ...`` or ``drift.metric: ...``, instead of failing at ``retrieval_metrics`` with a
bare ``KeyError`` after every retriever ran.
"""

from __future__ import annotations

import copy
import difflib
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.frames import to_frame
from retrieval_pipeline.core.common.paths import PROJECT_ROOT, check_name, shown
from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.common.yaml_file import read_yaml_mapping
from retrieval_pipeline.core.datasets import CASE_JSON_FIELDS, adapter_for, all_blocks
from retrieval_pipeline.core.evaluation.metrics import aggregate, higher_is_better, per_query_metrics, validate_metric_name
from retrieval_pipeline.core.evaluation.scoring import JUDGE_COLUMNS
from retrieval_pipeline.core.registry.dataset import DatasetConfig, Registry
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.factory import RetrieverRegistry, load_retriever_specs

DEFAULT_REGISTRY_PATH = PROJECT_ROOT / "data" / "config" / "datasets.yaml"
DEFAULT_RETRIEVERS_PATH = PROJECT_ROOT / "data" / "config" / "retrievers.yaml"


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "thresholds":
            out[key] = _merge(out[key], value)
        elif key == "thresholds" and isinstance(value, dict):
            out[key] = {**out.get(key, {}), **value}
        else:
            out[key] = value
    return out


_PATH_KEYS = {"verifier": ("python", "compare_pythons")}  # the kind blocks' path keys are their adapters'


def _absolute(value: Any, root: Path) -> Any:
    """A relative path (or each relative path of a list) made absolute against ``root``; anything else unchanged."""
    if isinstance(value, list):
        return [_absolute(v, root) for v in value]
    return str(root / value) if isinstance(value, (str, Path)) and value and not Path(value).is_absolute() else value


def _resolve_paths(raw: dict[str, Any], root: Path) -> dict[str, Any]:
    """Relative paths (in the kind blocks, as their adapters declare, and the verifier) become absolute, against ``root``."""

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return str((root / value).resolve()) if value and not Path(value).is_absolute() else value

    raw = dict(raw)
    for block, keys in _PATH_KEYS.items():
        if isinstance(raw.get(block), dict):
            # made absolute, symlinks kept: a venv's bin/python links to its base interpreter, outside the venv
            raw[block] = {k: (_absolute(v, root) if k in keys else v) for k, v in raw[block].items()}
    for name, block in all_blocks().items():
        if name in raw:
            raw[name] = block.resolve_paths(raw[name], resolve)
    return raw


def load_registry(path: Path | str = DEFAULT_REGISTRY_PATH, root: Path | None = None) -> Registry:
    """Read and validate the registry; errors name the file and the dataset.

    Args:
        path: the registry YAML.
        root: folder that relative paths are resolved against. Default: the registry's own ``root:`` key
            (relative to the registry file) if it has one, else the project root.
    """
    path = Path(path)
    doc = read_yaml_mapping(path, "dataset registry")  # size, nesting and alias expansion bounded
    if not isinstance(doc.get("datasets"), dict) or not doc["datasets"]:
        raise InputError("the registry needs a non-empty 'datasets' mapping", path=str(path))
    for name in doc["datasets"]:
        _check_dataset_name(name, path)
    if root is None:
        root = (path.parent / doc["root"]).resolve() if doc.get("root") else PROJECT_ROOT
    defaults = doc.get("defaults") or {}
    retrievers = load_retriever_specs(_retrievers_file(path, doc))
    datasets: dict[str, DatasetConfig] = {}
    errors: dict[str, str] = {}
    for name, raw in doc["datasets"].items():
        try:
            if not isinstance(raw or {}, dict):
                raise ValueError(f"expected a mapping of settings, got {type(raw).__name__}")
            merged = _resolve_paths(_merge(defaults, raw or {}), root)
            config = DatasetConfig(name=name, **merged)
            _check_retrievers(config, retrievers)
            _check_metrics(config)
            datasets[name] = config
        except (ValidationError, TypeError, ValueError) as exc:
            errors[str(name)] = _short_error(exc)
    return Registry(path=path, datasets=datasets, errors=errors, retrievers=retrievers)


#: Per process: registry path -> (its files, their stamps when read, the registry).
_LOADED: dict[Path, tuple[tuple[Path, ...], tuple[tuple[int, int], ...], Registry]] = {}


def registry_at(path: Path | str = DEFAULT_REGISTRY_PATH) -> Registry:
    """The registry of ``path``, parsed once per process and shared: partitions and assets read this one copy.

    It is parsed again only when the registry file or its retrievers file changed (size or modification
    time), so a long-lived process never serves a registry older than its files.
    """
    path = Path(path).resolve()
    hit = _LOADED.get(path)
    if hit is not None and _stamps(hit[0]) == hit[1]:
        return hit[2]
    files = (path, _retrievers_file(path, read_yaml_mapping(path, "dataset registry")))
    stamps = _stamps(files)
    registry = load_registry(path)
    _LOADED[path] = (files, stamps, registry)
    return registry


def _stamps(files: tuple[Path, ...]) -> tuple[tuple[int, int], ...]:
    """(size, mtime_ns) per file; (-1, -1) for a missing one."""
    out = []
    for file in files:
        try:
            info = file.stat()
            out.append((info.st_size, info.st_mtime_ns))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


def _retrievers_file(path: Path, doc: dict[str, Any]) -> Path:
    """``retrievers_file:`` (relative to the registry), else ``retrievers.yaml`` beside it, else the project's."""
    if doc.get("retrievers_file"):
        return (path.parent / doc["retrievers_file"]).resolve()
    beside = path.parent / "retrievers.yaml"
    return beside if beside.is_file() else DEFAULT_RETRIEVERS_PATH


def _check_retrievers(config: DatasetConfig, retrievers: RetrieverRegistry) -> None:
    """Every retriever the dataset lists, and every component of those, is a valid spec."""
    try:
        retrievers.closure(config.retrievers)
    except RetrieverError as exc:
        raise ValueError(f"retrievers: {exc}") from None


class _SettingProblems(ValueError):
    """Several ``field: message`` problems of one dataset's settings, listed one by one by :func:`_short_error`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _check_metrics(config: DatasetConfig) -> None:
    """Every threshold and the drift metric name a metric the dataset's evaluation computes, in a usable direction.

    A floor (``min``) or the drift rule (a *drop* is bad) needs a metric where higher is better, so
    ``latency_p95_ms`` or ``avg_rank_when_found`` are refused. A name the metric registry does not know
    (``recal@5``), a bookkeeping column, a cut-off deeper than ``retrieval.depth`` (``hit_rate@500``), a
    registered name the evaluation does not compute for this kind (``hit_rate@20``: the metric table holds
    hit_rate@1/5/10) and a floor that is not a finite number would only fail at ``retrieval_metrics``, after
    every retriever ran, with a bare ``KeyError`` (or pass silently); here they make the dataset invalid.

    Raises:
        _SettingProblems: One ``thresholds.<metric>: ...`` / ``drift.metric: ...`` line per problem.
    """
    computed = _evaluated_metrics(config)
    depth = config.retrieval.depth
    problems = [
        f"thresholds.{shown(name)[1:-1]}: {why}"
        for name, threshold in config.thresholds.items()
        if (why := _metric_problem(name, depth, computed, "a floor (min)", config.kind) or _floor_problem(threshold.min))
    ]
    why = _metric_problem(config.drift.metric, depth, computed, "the drift rule (it warns on a drop)", config.kind)
    problems += [f"drift.metric: {why}"] if why else []
    if problems:
        raise _SettingProblems(problems)


def _metric_problem(name: str, depth: int, computed: frozenset[str] | None, use: str, kind: str) -> str | None:
    """Why ``name`` cannot be checked (unknown, bookkeeping, too deep, wrong direction, not computed), or None."""
    try:
        validate_metric_name(name, max_k=depth)
    except ValueError as exc:  # the first sentence: the registry's lists of names are too long for one line
        reason = str(exc).split(". Known metrics", 1)[0].split("; metrics are:", 1)[0]
        hint = _computed_hint(name, computed, depth)
        return (reason.split(": use ", 1)[0] if hint.startswith(" (computed") else reason) + hint
    if higher_is_better(name) is False:
        return f"lower is better for {name}, so {use} cannot watch it; name a metric where higher is better"
    if computed is not None and name not in computed:
        return f"{name} is not computed by the evaluation of a {kind!r} dataset{_computed_hint(name, computed, depth)}"
    return None


def _computed_hint(name: str, computed: frozenset[str] | None, depth: int) -> str:
    """`` (computed: hit_rate@1, hit_rate@5, hit_rate@10)`` for a metric computed at other cut-offs (up to ``depth``),
    else a close match among the computed names (`` (did you mean recall@5?)``), else nothing."""
    if computed is None or not isinstance(name, str):
        return ""
    base = name.partition("@")[0]
    same = sorted((n for n in computed if n.partition("@")[0] == base and _cutoff(n) <= depth), key=lambda n: (len(n), n))
    if same:
        return f" (computed: {', '.join(same)})"
    close = difflib.get_close_matches(name, sorted(computed), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _cutoff(name: str) -> int:
    """The cut-off of ``hit_rate@5`` (5); 0 for a name without one."""
    k = name.partition("@")[2]
    return int(k) if k.isdigit() else 0


def _floor_problem(minimum: float) -> str | None:
    """A NaN floor always passes and an infinite one always passes or always fails: refused."""
    return None if math.isfinite(minimum) else f"min must be a finite number, got {minimum}"


#: ``{kind: metric names}`` cached by :func:`_evaluated_metrics`.
_EVALUATED: dict[str, frozenset[str] | None] = {}


def _evaluated_metrics(config: DatasetConfig) -> frozenset[str] | None:
    """The metric names ``retrieval_metrics`` holds for a dataset of this kind; None when they cannot be worked out.

    They are made the way the evaluation makes them (:func:`~retrieval_pipeline.core.evaluation.scoring.per_query_results`,
    then :func:`~retrieval_pipeline.core.evaluation.scoring.metric_table`): the default per-query metrics, the kind's extra
    columns, the LLM-judge columns and the summary figures, here of a one-query run. Cached per kind.
    """
    if config.kind not in _EVALUATED:
        _EVALUATED[config.kind] = _metrics_of_a_tiny_evaluation(config)
    return _EVALUATED[config.kind]


def _metrics_of_a_tiny_evaluation(config: DatasetConfig) -> frozenset[str] | None:

    run, qrels = {"q": [("d", 1.0)]}, {"q": {"d": 1}}
    frame = per_query_metrics(run, qrels)
    try:  # the kind's extra columns (context QA), from one synthetic case and chunk
        case = Case("q", "s", config.kind, "f", 0, "a query", extra={"expected_context": "a passage"})
        columns = adapter_for(config).extra_query_columns(
            config, to_frame([case], Case, CASE_JSON_FIELDS), to_frame([Document("d", "a passage")], Document), per_query_metrics
        )
        if columns is not None:
            frame = frame.merge(columns(run, qrels), on="query_id", how="left")
    except Exception:  # a plugin kind whose columns need real input: only the metric registry's names are checked
        return None
    for column in JUDGE_COLUMNS:
        frame[column] = None
    return frozenset(aggregate(frame, [1.0]))


def _check_dataset_name(name: Any, path: Path) -> None:
    """A dataset name becomes a partition key and a folder under the out dir: one safe name, or the registry fails."""
    try:
        check_name(name, "dataset name")
    except InputError as exc:
        raise InputError(str(exc), path=str(path)) from None


def _problem(error: Any) -> str:
    """``field: message`` for one pydantic error; a validator's own ``field: message`` text is kept as it is
    (no ``settings: Value error, `` in front of ``context_qa.chunking: ...``)."""
    message = str(error["msg"]).replace("Value error, ", "")
    return f"{'.'.join(map(str, error['loc']))}: {message}" if error["loc"] else message


#: Most problems listed per dataset, and most characters per problem (a field name may come from the input).
_MAX_PROBLEMS, _MAX_PROBLEM_CHARS = 10, 400  # a problem names its file: long temporary paths must not cut the reason


def _short_error(exc: Exception) -> str:
    """One ``field: message`` line per problem (a few, each cut short); pydantic's rendering of the input is left out."""
    if isinstance(exc, ValidationError):
        problems = [_problem(e) for e in exc.errors(include_url=False, include_input=False)]
    elif isinstance(exc, _SettingProblems):
        problems = list(exc.problems)
    else:
        problems = [str(exc)]
    lines = [p if len(p) <= _MAX_PROBLEM_CHARS else p[:_MAX_PROBLEM_CHARS] + "..." for p in problems[:_MAX_PROBLEMS]]
    more = len(problems) - len(lines)
    return "; ".join(lines) + (f"; and {more} more" if more > 0 else "")
