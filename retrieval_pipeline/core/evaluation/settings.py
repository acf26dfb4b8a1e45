"""The evaluation stage's settings in a dataset's registry entry, and what scoring reads of a dataset.

The floors (``thresholds:``) are declared here; the drift check's (``drift:``), the statistics' (``statistics:``)
and the fusion sweep's (``tuning:``) settings beside the code that uses them (:mod:`.regression`, :mod:`.stats`,
:mod:`.tuning`). The registry (:mod:`retrieval_pipeline.core.registry`) assembles them into a dataset's
settings; :class:`EvaluatedSettings` is what :func:`~retrieval_pipeline.core.evaluation.scoring.evaluate_dataset`
reads of them, so evaluation never imports the registry above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from retrieval_pipeline.core.evaluation.checks.regression import DriftSettings


class Threshold(BaseModel):
    """A floor on one metric: below ``min`` the check fails with ``severity``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: float
    severity: Literal["ERROR", "WARN"] = "WARN"


class EvaluatedSettings(Protocol):
    """What scoring reads of a dataset's settings (the registry's ``DatasetConfig`` is one)."""

    retrievers: list[str]
    thresholds: Mapping[str, Threshold]
    drift: DriftSettings

    @property
    def checked(self) -> list[str]:
        """The retrievers whose metrics the floors and the drift check look at."""
        ...

    @property
    def gated(self) -> list[str]:
        """The retrievers whose ERROR floors fail the run."""
        ...
