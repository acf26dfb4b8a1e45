"""A dataset's settings, assembled here above the stages: its kind's (datasets) plus each stage's own.

:class:`DatasetConfig` is one dataset's settings: the datasets stage's :class:`DatasetSettings` (name, kind,
the kind's validated blocks) plus each later stage's settings type, declared in that stage's package
(``retrieval/settings.py``, ``filtering/settings.py``, ``pairs/settings.py``, ``verifier/settings.py``,
``evaluation/settings.py`` and the drift, statistics and tuning settings beside their code). Loading the
YAML, merging the ``defaults`` block and the cross-checks against the retriever specs and the metric table
are :func:`retrieval_pipeline.core.registry.load.load_registry`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.datasets.base import DatasetSettings
from retrieval_pipeline.core.evaluation.checks.regression import DriftSettings
from retrieval_pipeline.core.evaluation.settings import Threshold
from retrieval_pipeline.core.evaluation.statistics.stats import StatisticsSettings
from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import TuningSettings
from retrieval_pipeline.core.filtering.settings import FilterSettings, NegativeSettings
from retrieval_pipeline.core.pairs.settings import TargetSettings
from retrieval_pipeline.core.retrieval.settings import RetrievalSettings
from retrieval_pipeline.core.verifier.settings import VerifierSettings

__all__ = ["DEFAULT_RETRIEVERS", "DatasetConfig", "Registry"]

#: The retrievers a dataset evaluates when it names none (specs in ``data/config/retrievers.yaml``).
DEFAULT_RETRIEVERS = ("bm25", "dense_minilm", "hybrid_minmax_a0.5", "hybrid_rrf_k60")


class DatasetConfig(DatasetSettings):
    """One dataset's settings: its kind's (name, kind, the kind's blocks) plus each stage's, as fields.

    A kind's blocks are read as attributes (``config.nq.csv``); a key that is neither a field nor a block of
    the dataset's kind is an error (:class:`~retrieval_pipeline.core.datasets.base.DatasetSettings`).
    """

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

    def input_paths(self) -> list[Path]:
        """Every file or folder this dataset reads (its kind's inputs), the verifier's interpreter included."""
        return super().input_paths() + ([self.verifier.python] if self.verifier.python else [])


class Registry(BaseModel):
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
