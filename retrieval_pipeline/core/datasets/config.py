"""What a dataset is, as the registry states it: its generic settings, its kind's blocks, and the registry of all.

:class:`DatasetConfig` is one dataset's settings: the generic ones as fields (retrievers, baseline,
thresholds, statistics, ...), plus the blocks its kind's adapter declares and validates
(:func:`~retrieval_pipeline.core.datasets.base.validate_kind_blocks`). Loading the YAML, merging the
``defaults`` block and the cross-checks against the retriever specs and the metric table are
:func:`retrieval_pipeline.core.registry.load_registry`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrieval_pipeline.core.datasets.base import adapter_for, validate_kind_blocks
from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.evaluation.regression import DriftSettings
from retrieval_pipeline.core.evaluation.stats import StatisticsSettings
from retrieval_pipeline.core.evaluation.tuning import TuningSettings


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

    The library has two names: ``library`` is its *distribution* (what pip installs,
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
        return validate_kind_blocks(data, cls.model_fields) if isinstance(data, dict) else data

    def input_paths(self) -> list[Path]:
        """Every file or folder this dataset reads (its kind's inputs), the verifier's interpreter included."""
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
