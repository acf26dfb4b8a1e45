"""The dataset registry: ``data/config/datasets.yaml`` read into typed settings.

Every dataset is one partition of the asset graph. Per-dataset settings override the ``defaults``
block key by key (nested mappings are merged), so a dataset names only what differs.

Trust (issue 12): the registry is configuration the team writes and reviews; the files it names are
data. So a dataset *name* must be one safe folder name (``[A-Za-z0-9_.-]``, no ``..``; see
:func:`retrieval_pipeline.core.paths.check_name`), else the whole registry is refused, naming the file
and the name. Registry *paths* resolve against the root (``root:`` or the project root) and may leave
it (``../shared/data``) or go through symlinks: they are trusted like the rest of the config. What
those files name in turn is not: a suite's file paths must stay inside the suite's folder (or the
root the registry gives for them), symlinks included (:mod:`retrieval_pipeline.core.sources.suites`).
The file is read through :func:`~retrieval_pipeline.core.sources.yaml_file.read_yaml_mapping` (size,
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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.fusion_tuning import TuningSettings
from retrieval_pipeline.core.metric_registry import higher_is_better, validate_metric_name
from retrieval_pipeline.core.paths import check_name, shown
from retrieval_pipeline.core.regression import DriftSettings
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.factory import RetrieverRegistry, load_retriever_specs
from retrieval_pipeline.core.sources.yaml_file import read_yaml_mapping
from retrieval_pipeline.core.stats import StatisticsSettings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REGISTRY_PATH = PROJECT_ROOT / "data" / "config" / "datasets.yaml"
DEFAULT_RETRIEVERS_PATH = PROJECT_ROOT / "data" / "config" / "retrievers.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The retrievers a dataset evaluates when it names none (specs in ``data/config/retrievers.yaml``).
DEFAULT_RETRIEVERS = ("bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60")


class RetrievalSettings(_Strict):
    """How runs are made; which retrievers run is the dataset's ``retrievers`` list."""

    depth: int = Field(100, ge=1)  # hits retrieved per query (MRR, found and avg rank use this depth)
    latency_sample: int = Field(200, ge=0)  # queries timed one at a time; all are ranked in a batch


class NegativeSettings(_Strict):
    per_query_siblings: int = Field(3, ge=0)
    per_query_bm25: int = Field(3, ge=0)


class FilterSettings(_Strict):
    # auto: an LLM when an endpoint is configured, else the deterministic offline_lexical judge
    judge: Literal["auto", "llm", "offline_lexical", "none"] = "auto"
    random_contexts: int = Field(3, ge=0)
    min_description_tokens: int = Field(2, ge=0)
    max_random_coverage: float = Field(0.5, ge=0.0, le=1.0)
    seed: int = 13


class TargetSettings(_Strict):
    # fix_error primary subject: auto = LLM reconciled with AST when an endpoint is configured, else AST
    inferer: Literal["auto", "llm", "ast"] = "auto"


class VerifierSettings(_Strict):
    """Where multiple-choice questions are proven: the interpreter holding the library under test.

    The library has two names (issue 12): ``library`` is its *distribution* (what pip installs,
    ``google-adk``; its version is reported), ``import_name`` the *module* the verifier probes
    (``google.adk``). Without ``import_name`` it is derived from the distribution's RECORD (else
    top_level.txt) inside the target environment. A setting that names nothing installed or importable
    there stops the verifier with an error naming the setting; it never yields verdicts.
    """

    python: Path | None = None  # default: this interpreter (the standard library under test)
    library: str | None = Field(None, min_length=1)  # distribution name whose version is reported, e.g. google-adk
    import_name: str | None = Field(None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")  # module probed, e.g. google.adk
    timeout_s: float = Field(20.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    # who proves what the offline prover leaves open: `llm` asks the configured LLM endpoint (RETRIEVAL_LLM_*)
    # for a pytest check per option, run in the same sandbox; without an endpoint it stays offline, with a warning
    prover: Literal["offline", "llm"] = "offline"
    # other environments of the same library (e.g. .venvs/adk120/bin/python): every proposed fix must be Valid
    # there too, and a question Unverifiable here but Valid there gets its stale distractor replaced
    compare_pythons: list[Path] = Field(default_factory=list)


class Threshold(_Strict):
    min: float
    severity: Literal["ERROR", "WARN"] = "WARN"


class DatasetConfig(_Strict):
    """One dataset's settings: the generic ones as fields, plus its kind's blocks.

    A kind's blocks (``suites`` and ``corpus``; ``nq``; ``context_qa``; ``beir``; ...) are declared and
    validated by the kind's adapter (:mod:`retrieval_pipeline.core.datasets`) and read as attributes
    (``config.nq.csv``); a key that is neither a field nor a block of the dataset's kind is an error.
    """

    model_config = ConfigDict(extra="allow", frozen=True)  # the extras are the kind's validated blocks

    name: str
    description: str = ""
    kind: str = "suite"  # a registered adapter's kind
    retrievers: list[str] = Field(default_factory=lambda: list(DEFAULT_RETRIEVERS), min_length=1)
    baseline: str | None = None  # the retriever others are compared with; default: the first listed
    production: str | None = None  # the retriever the dataset's application uses (gated by default)
    # the retrievers whose ERROR floors fail the run; the others' floors are reported as WARN.
    # Default: the baseline and the production retriever
    gate: list[str] | None = None
    retrieval: RetrievalSettings = RetrievalSettings()
    negatives: NegativeSettings = NegativeSettings()
    filter: FilterSettings = FilterSettings()
    targets: TargetSettings = TargetSettings()
    verifier: VerifierSettings = VerifierSettings()
    thresholds: dict[str, Threshold] = Field(default_factory=dict)
    drift: DriftSettings = DriftSettings()
    statistics: StatisticsSettings = StatisticsSettings()
    tuning: TuningSettings = TuningSettings()
    checked_retrievers: list[str] | None = None
    weekly: bool = True  # false: the weekly schedule leaves it out (evaluated on demand only, e.g. the scale benchmark's corpus)

    @model_validator(mode="after")
    def _retrievers_consistent(self) -> DatasetConfig:
        if len(set(self.retrievers)) != len(self.retrievers):
            raise ValueError(f"retrievers: a name is listed twice: {self.retrievers}")
        if self.baseline is not None and self.baseline not in self.retrievers:
            raise ValueError(f"baseline: {self.baseline!r} is not one of the dataset's retrievers {self.retrievers}")
        unknown = [r for r in self.checked_retrievers or [] if r not in self.retrievers]
        if unknown:
            raise ValueError(f"checked_retrievers: {unknown} are not among the dataset's retrievers {self.retrievers}")
        if self.production is not None and self.production not in self.retrievers:
            raise ValueError(f"production: {self.production!r} is not one of the dataset's retrievers {self.retrievers}")
        unknown = [r for r in self.gate or [] if r not in self.retrievers]
        if unknown:
            raise ValueError(f"gate: {unknown} are not among the dataset's retrievers {self.retrievers}")
        return self

    @property
    def baseline_retriever(self) -> str:
        """The retriever the others are compared with: ``baseline``, else the first listed."""
        return self.baseline or self.retrievers[0]

    @property
    def gated(self) -> list[str]:
        """The retrievers whose ERROR floors fail the run: ``gate``, else the baseline and the production retriever."""
        if self.gate is not None:
            return list(self.gate)
        return list(dict.fromkeys([self.baseline_retriever, *([self.production] if self.production else [])]))

    @property
    def checked(self) -> list[str]:
        """The retrievers whose metrics the threshold and drift checks look at (default: all listed)."""
        return list(self.checked_retrievers or self.retrievers)

    @model_validator(mode="before")
    @classmethod
    def _kind_blocks(cls, data: Any) -> Any:
        """The kind's adapter validates its blocks; other kinds' blocks and unknown keys are errors."""
        from retrieval_pipeline.core.datasets import validate_kind_blocks

        return validate_kind_blocks(data, cls.model_fields) if isinstance(data, dict) else data

    def input_paths(self) -> list[Path]:
        """Every file or folder this dataset reads (its kind's inputs), the verifier's interpreter included."""
        from retrieval_pipeline.core.datasets import adapter_for

        return adapter_for(self).input_paths(self) + ([self.verifier.python] if self.verifier.python else [])

    def missing_inputs(self) -> list[Path]:
        return [p for p in self.input_paths() if not p.exists()]


class Registry(_Strict):
    """Every dataset of the registry file; a dataset whose settings are invalid keeps its error.

    One bad dataset does not stop the others: it is listed in ``errors``, its name is still a
    partition, and :meth:`get` raises its error, so only its own runs fail.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    path: Path
    datasets: dict[str, DatasetConfig]
    errors: dict[str, str] = Field(default_factory=dict)
    retrievers: Any = None  # the RetrieverRegistry the datasets' retriever names refer to

    @property
    def names(self) -> list[str]:
        """Every dataset name in the file, valid or not."""
        return list(self.datasets) + [n for n in self.errors if n not in self.datasets]

    def get(self, name: str) -> DatasetConfig:
        if name in self.datasets:
            return self.datasets[name]
        if name in self.errors:
            raise InputError(f"dataset {name!r} is invalid: {self.errors[name]}", path=str(self.path))
        raise InputError(f"unknown dataset {name!r}; known: {', '.join(self.names)}", path=str(self.path))


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
    from retrieval_pipeline.core.datasets import all_blocks

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

    They are made the way the evaluation makes them (:func:`~retrieval_pipeline.core.scoring.per_query_results`,
    then :func:`~retrieval_pipeline.core.scoring.metric_table`): the default per-query metrics, the kind's extra
    columns, the LLM-judge columns and the summary figures, here of a one-query run. Cached per kind.
    """
    if config.kind not in _EVALUATED:
        _EVALUATED[config.kind] = _metrics_of_a_tiny_evaluation(config)
    return _EVALUATED[config.kind]


def _metrics_of_a_tiny_evaluation(config: DatasetConfig) -> frozenset[str] | None:
    from retrieval_pipeline.core.datasets import CASE_JSON_FIELDS, adapter_for
    from retrieval_pipeline.core.frames import to_frame
    from retrieval_pipeline.core.metrics import aggregate, per_query_metrics
    from retrieval_pipeline.core.scoring import JUDGE_COLUMNS
    from retrieval_pipeline.core.types import Case, Document

    run, qrels = {"q": [("d", 1.0)]}, {"q": {"d": 1}}
    frame = per_query_metrics(run, qrels)
    try:  # the kind's extra columns (context QA), from one synthetic case and chunk
        case = Case("q", "s", config.kind, "f", 0, "a query", extra={"expected_context": "a passage"})
        columns = adapter_for(config).extra_query_columns(
            config, to_frame([case], Case, CASE_JSON_FIELDS), to_frame([Document("d", "a passage")], Document)
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
_MAX_PROBLEMS, _MAX_PROBLEM_CHARS = 10, 200


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
