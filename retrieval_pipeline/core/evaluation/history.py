"""Evaluation history: a per-query snapshot of every evaluation, and which earlier one is the blessed baseline.

The regression gate pairs this evaluation's per-query results with an earlier evaluation's. The metric
table keeps only means, so each evaluation also writes its per-query results to
``<out_dir>/history/<dataset>/<UTC time>_<run id>.parquet`` (never overwritten) and records that path
in its materialisation. Which earlier evaluation is compared with (:func:`choose_baseline`):

1. the evaluation of run ``blessed_run_id`` when the dataset's config names one;
2. else the newest evaluation whose run carries the tag ``retrieval_pipeline/blessed=true``
   (``dagster asset materialize ... --tags '{"retrieval_pipeline/blessed": "true"}'`` or the UI's launchpad);
3. else the previous evaluation.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from retrieval_pipeline.core.common.atomic import atomic_write
from retrieval_pipeline.core.common.paths import child_path

#: The run tag that blesses an evaluation as the baseline of later ones.
BLESSED_TAG = "retrieval_pipeline/blessed"
#: The materialisation metadata key holding the snapshot's path.
SNAPSHOT_KEY = "per_query_snapshot"
#: Per-query columns a snapshot leaves out (the LLM judge's, null unless it ran; the error text).
_DROPPED = ("judge", "judge_quality", "judge_completeness", "judge_relevance", "judge_pass", "judge_error")


@dataclass(frozen=True)
class Evaluation:
    """One earlier evaluation of a dataset, as the instance recorded it."""

    run_id: str
    timestamp: float
    tags: dict[str, str]
    snapshot: str | None  # the per-query snapshot's path; None for evaluations made before snapshots existed
    values: dict[str, float] = field(default_factory=dict)  # {retriever: drift metric} (the relative rule's input)

    @property
    def blessed(self) -> bool:
        return self.tags.get(BLESSED_TAG, "").strip().lower() in {"true", "1", "yes"}

    def label(self) -> str:
        when = datetime.fromtimestamp(self.timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return f"run {self.run_id[:8]} ({when}{', blessed' if self.blessed else ''})"


@dataclass(frozen=True)
class BaselineChoice:
    """The evaluation to compare with (None when there is none) and how it was chosen."""

    evaluation: Evaluation | None
    reason: str


def choose_baseline(earlier: Sequence[Evaluation], blessed_run_id: str | None = None) -> BaselineChoice:
    """Pick the baseline among ``earlier`` evaluations (any order): configured run, newest blessed, previous.

    A configured ``blessed_run_id`` that matches no earlier evaluation is reported (evaluation None), not
    replaced by another one: comparing with something the user did not ask for would hide the mistake.
    """
    newest_first = sorted(earlier, key=lambda e: e.timestamp, reverse=True)
    if blessed_run_id:
        match = [e for e in newest_first if e.run_id == blessed_run_id or e.run_id.startswith(blessed_run_id)]
        if not match:
            return BaselineChoice(None, f"drift.blessed_run_id {blessed_run_id!r} matches no earlier evaluation of this dataset")
        return BaselineChoice(match[0], f"blessed by config: {match[0].label()}")
    blessed = [e for e in newest_first if e.blessed]
    if blessed:
        return BaselineChoice(blessed[0], f"blessed by tag {BLESSED_TAG}: {blessed[0].label()}")
    if newest_first:
        return BaselineChoice(newest_first[0], f"previous evaluation: {newest_first[0].label()}")
    return BaselineChoice(None, "first evaluation of this dataset: nothing to compare with")


def snapshot_path(out_dir: str | Path, dataset: str, run_id: str, when: datetime | None = None) -> Path:
    """``<out_dir>/history/<dataset>/<UTC %Y%m%dT%H%M%S>_<run id>.parquet``."""
    stamp = (when or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return child_path(out_dir, "history", dataset, f"{stamp}_{run_id}.parquet", what="history snapshot")


def write_snapshot(query_results: pd.DataFrame, path: Path) -> Path:
    """Write the per-query results (judge columns dropped) atomically; returns ``path``."""
    frame = query_results.drop(columns=[c for c in _DROPPED if c in query_results.columns])
    return atomic_write(path, lambda temp: frame.to_parquet(temp, index=False))


def read_snapshot(path: str | Path) -> pd.DataFrame:
    """Read a snapshot through one open handle (a concurrent writer never mixes two versions)."""
    with open(path, "rb") as fh:
        return pd.read_parquet(io.BytesIO(fh.read()))
