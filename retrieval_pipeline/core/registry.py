"""The dataset registry: ``data/config/datasets.yaml`` read into typed settings.

Every dataset is one partition of the asset graph. Per-dataset settings override the ``defaults``
block key by key (nested mappings are merged), so a dataset names only what differs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.similarity import SimilaritySettings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REGISTRY_PATH = PROJECT_ROOT / "data" / "config" / "datasets.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BM25Settings(_Strict):
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25


class DenseSettings(_Strict):
    batch_size: int = 32  # the model itself is the encoder resource's choice


class MinMaxSettings(_Strict):
    alpha: float = Field(0.5, ge=0.0, le=1.0)


class RRFSettings(_Strict):
    k: int = Field(60, ge=1)


class RetrieverSettings(_Strict):
    depth: int = Field(100, ge=1)
    latency_sample: int = Field(200, ge=0)  # queries timed one at a time; all are ranked in a batch
    bm25: BM25Settings = BM25Settings()
    dense: DenseSettings = DenseSettings()
    hybrid_minmax: MinMaxSettings = MinMaxSettings()
    hybrid_rrf: RRFSettings = RRFSettings()

    @property
    def names(self) -> list[str]:
        """Retriever names, each saying what it is."""
        return ["bm25", "dense_minilm", f"hybrid_minmax_a{self.hybrid_minmax.alpha:g}", f"hybrid_rrf_k{self.hybrid_rrf.k}"]


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
    """Where multiple-choice questions are proven: the interpreter holding the library under test."""

    python: Path | None = None  # default: this interpreter (the standard library under test)
    library: str | None = None  # distribution name whose version is reported, e.g. google-adk
    timeout_s: float = Field(20.0, gt=0)
    memory_mb: int = Field(1024, ge=64)


class Threshold(_Strict):
    min: float
    severity: Literal["ERROR", "WARN"] = "WARN"


class DriftSettings(_Strict):
    metric: str = "hit_rate@5"
    max_relative_drop: float = Field(0.10, gt=0.0, lt=1.0)


class CorpusSpec(_Strict):
    """Exactly one way to build the target corpus."""

    ranked_targets: Path | None = None
    introspect_modules: list[str] | None = None
    introspect_modules_file: Path | None = None
    introspect_package: str | None = None  # an installed package, walked into its public submodules

    @model_validator(mode="after")
    def _exactly_one(self) -> CorpusSpec:
        options = ("ranked_targets", "introspect_modules", "introspect_modules_file", "introspect_package")
        given = [n for n in options if getattr(self, n)]
        if len(given) != 1:
            raise ValueError(f"corpus needs exactly one of {', '.join(options)}; got {given or 'none'}")
        return self


class NQSource(_Strict):
    """A Natural Questions CSV (``question,long_answer,short_answer``)."""

    csv: Path
    sample_size: int | None = Field(None, ge=1)  # first N questions, for quick runs


class ChunkingSettings(_Strict):
    size: int = Field(400, ge=50)  # characters; see README for why 400/100 (the relevance ceiling)
    overlap: int = Field(100, ge=0)


class SimilaritySettingsModel(_Strict):
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    autojunk: bool = False
    normalise: bool = True

    def settings(self) -> SimilaritySettings:
        """The settings object the similarity functions take."""
        return SimilaritySettings(threshold=self.threshold, autojunk=self.autojunk, normalise=self.normalise)


class ContextQASource(_Strict):
    """QA pairs with an expected context and no chunk ids; relevance by text similarity."""

    qa: Path
    documents: list[Path] | None = None  # markdown files ...
    pydoc_topics: list[str] | None = None  # ... or topics of CPython's language reference (pydoc_data); ["*"]: all
    chunking: ChunkingSettings = ChunkingSettings()
    similarity: SimilaritySettingsModel = SimilaritySettingsModel()

    @model_validator(mode="after")
    def _one_document_source(self) -> ContextQASource:
        if bool(self.documents) == bool(self.pydoc_topics):
            raise ValueError("context_qa needs exactly one of documents, pydoc_topics")
        return self


class BeirSource(_Strict):
    """A BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv."""

    path: Path
    split: str = "test"


_KIND_BLOCKS = {"suite": ("suites", "corpus"), "nq": ("nq",), "context_qa": ("context_qa",), "beir": ("beir",)}


class DatasetConfig(_Strict):
    name: str
    description: str = ""
    kind: Literal["suite", "nq", "context_qa", "beir"] = "suite"
    suites: list[Path] = Field(default_factory=list)
    corpus: CorpusSpec | None = None
    nq: NQSource | None = None
    context_qa: ContextQASource | None = None
    beir: BeirSource | None = None
    retrievers: RetrieverSettings = RetrieverSettings()
    negatives: NegativeSettings = NegativeSettings()
    filter: FilterSettings = FilterSettings()
    targets: TargetSettings = TargetSettings()
    verifier: VerifierSettings = VerifierSettings()
    thresholds: dict[str, Threshold] = Field(default_factory=dict)
    drift: DriftSettings = DriftSettings()
    checked_retrievers: list[str] | None = None

    @model_validator(mode="after")
    def _blocks_match_kind(self) -> DatasetConfig:
        wanted = set(_KIND_BLOCKS[self.kind])
        missing = [b for b in wanted if not getattr(self, b)]
        extra = [b for blocks in _KIND_BLOCKS.values() for b in blocks if b not in wanted and getattr(self, b)]
        if missing or extra:
            raise ValueError(f"kind {self.kind!r} needs {sorted(wanted)}" + (f"; missing {missing}" if missing else "")
                             + (f"; not allowed: {extra}" if extra else ""))
        return self

    def input_paths(self) -> list[Path]:
        """Every file or folder this dataset reads, the verifier's interpreter included."""
        return self._data_paths() + ([self.verifier.python] if self.verifier.python else [])

    def _data_paths(self) -> list[Path]:
        if self.kind == "nq":
            return [self.nq.csv]
        if self.kind == "context_qa":
            return [self.context_qa.qa, *(self.context_qa.documents or [])]
        if self.kind == "beir":
            return [self.beir.path]
        paths = list(self.suites)
        paths += [p for p in (self.corpus.ranked_targets, self.corpus.introspect_modules_file) if p]
        return paths

    def missing_inputs(self) -> list[Path]:
        return [p for p in self.input_paths() if not p.exists()]

    def corpus_modules(self) -> list[str]:
        """Module names to introspect (the inline list, the one-per-line file, or a package's submodules)."""
        if self.corpus.introspect_package:
            from retrieval_pipeline.core.sources.api_index import package_modules

            return package_modules(self.corpus.introspect_package)
        if self.corpus.introspect_modules:
            return list(self.corpus.introspect_modules)
        assert self.corpus.introspect_modules_file is not None
        lines = self.corpus.introspect_modules_file.read_text(encoding="utf-8").splitlines()
        return [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]


class Registry(_Strict):
    path: Path
    datasets: dict[str, DatasetConfig]

    @property
    def names(self) -> list[str]:
        return list(self.datasets)

    def get(self, name: str) -> DatasetConfig:
        try:
            return self.datasets[name]
        except KeyError:
            raise InputError(f"unknown dataset {name!r}; known: {', '.join(self.datasets)}", path=str(self.path)) from None


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


_PATH_KEYS = {"corpus": ("ranked_targets", "introspect_modules_file"), "nq": ("csv",), "verifier": ("python",),
              "context_qa": ("qa", "documents"), "beir": ("path",)}


def _resolve_paths(raw: dict[str, Any], root: Path) -> dict[str, Any]:
    """Relative paths (in ``suites`` and the kind blocks) become absolute, against ``root``."""

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return str((root / value).resolve()) if value and not Path(value).is_absolute() else value

    raw = dict(raw)
    raw["suites"] = resolve(raw.get("suites", []))
    for block, keys in _PATH_KEYS.items():
        if isinstance(raw.get(block), dict):
            raw[block] = {k: (resolve(v) if k in keys else v) for k, v in raw[block].items()}
    return raw


def load_registry(path: Path | str = DEFAULT_REGISTRY_PATH, root: Path | None = None) -> Registry:
    """Read and validate the registry; errors name the file and the dataset.

    Args:
        path: the registry YAML.
        root: folder that relative paths are resolved against. Default: the registry's own ``root:`` key
            (relative to the registry file) if it has one, else the project root.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the dataset registry: {exc}", path=str(path)) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("datasets"), dict) or not doc["datasets"]:
        raise InputError("the registry needs a non-empty 'datasets' mapping", path=str(path))
    if root is None:
        root = (path.parent / doc["root"]).resolve() if doc.get("root") else PROJECT_ROOT
    defaults = doc.get("defaults") or {}
    datasets: dict[str, DatasetConfig] = {}
    for name, raw in doc["datasets"].items():
        try:
            merged = _resolve_paths(_merge(defaults, raw or {}), root)
            datasets[name] = DatasetConfig(name=name, **merged)
        except (ValidationError, TypeError) as exc:
            raise InputError(f"invalid settings: {exc}", path=str(path), case_id=f"dataset {name}") from exc
    return Registry(path=path, datasets=datasets)
