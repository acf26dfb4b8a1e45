"""MLflow as an optional resource: off unless a tracking URI is configured (``MLFLOW_TRACKING_URI``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg

from retrieval_pipeline.core.report.mlflow_log import LoggedRun, RetrieverResult, log_evaluation

DEFAULT_EXPERIMENT = "retrieval_pipeline"


class MLflowResource(dg.ConfigurableResource):
    """Where evaluations are logged in MLflow, if anywhere.

    ``tracking_uri``: None (the default) disables logging; otherwise an MLflow store such as
    ``sqlite:////abs/path/mlflow.db`` or ``http://host:5000``, typically ``dg.EnvVar("MLFLOW_TRACKING_URI")``.
    ``experiment``: the MLflow experiment, created on first use. ``artifact_location``: the artifact root of
    a new experiment (by default beside a SQLite store; needed for other databases). MLflow itself is the
    optional ``mlflow`` extra, imported only when something is logged.
    """

    tracking_uri: str | None = None
    experiment: str = DEFAULT_EXPERIMENT
    artifact_location: str | None = None

    @property
    def enabled(self) -> bool:
        """True when a (non-blank) tracking URI is configured."""
        return bool(self.tracking_uri and self.tracking_uri.strip())

    def log(
        self,
        dataset: str,
        evaluated_at: datetime,
        params: Mapping[str, Any],
        retrievers: Mapping[str, RetrieverResult],
        artifacts: Sequence[Path] = (),
        *,
        run_name: str | None = None,
        tags: Mapping[str, Any] | None = None,
        dagster_run_id: str | None = None,
    ) -> LoggedRun | None:
        """Log one evaluation as a parent run with a child run per retriever (see :func:`~retrieval_pipeline.core.report.mlflow_log.log_evaluation`).

        Returns None, touching nothing and importing nothing, when disabled.

        Raises:
            MLflowNotInstalledError: enabled but ``mlflow`` is missing (``pip install 'retrieval_pipeline[mlflow]'``).
            MLflowLogError: the store cannot be opened or refused a run; the message names the tracking URI.
        """
        if not self.enabled:
            return None
        return log_evaluation(
            str(self.tracking_uri),
            self.experiment,
            dataset,
            evaluated_at,
            params,
            retrievers,
            artifacts,
            run_name=run_name,
            tags=tags,
            dagster_run_id=dagster_run_id,
            artifact_location=self.artifact_location,
        )


def mlflow_from_environment() -> MLflowResource:
    """``MLFLOW_TRACKING_URI`` (read through ``dg.EnvVar`` when set, else disabled) and ``MLFLOW_EXPERIMENT_NAME``."""
    uri = dg.EnvVar("MLFLOW_TRACKING_URI") if os.environ.get("MLFLOW_TRACKING_URI", "").strip() else None
    return MLflowResource(tracking_uri=uri, experiment=os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT)
