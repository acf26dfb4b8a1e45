"""What one dataset's report shows (:class:`ReportData`, its column contract) and the weekly trend of past evaluations.

Also the small readers of cells read back from Parquet (nullable flags, list cells, finite numbers) that the charts
and the sections share.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from retrieval_pipeline.core.evaluation.metrics import UnknownMetricError, resolve_metric

#: Columns each non-empty input frame must have (an empty frame only makes its section say "no data").
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "retrieval_metrics": ("retriever",),
    "metric_significance": ("retriever", "metric", "mean", "ci_low", "ci_high", "significant", "direction"),
    "retriever_pairs": ("metric", "a", "b", "delta", "ci_low", "ci_high", "p_holm", "significant", "note"),
    "query_results": ("retriever", "query_id", "first_relevant_rank", "top_hits"),
    "fusion_sweep": ("hybrid", "method", "parameter", "value", "half", "chosen"),
    "failure_buckets": ("retriever", "query_id", "bucket", "evidence"),
    "retrieval_dataset": ("id", "query", "positive_ctxs"),
    "corpus": ("doc_id", "title"),
    "trend": ("week", "timestamp", "retriever", "metric", "value"),
}
#: Columns of :func:`trend_frame`.
TREND_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS["trend"]


class ReportInputError(ValueError):
    """An input frame breaks its column contract; the message names the dataset, the frame and the case."""


def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame()


@dataclass(frozen=True, kw_only=True)
class ReportData:
    """Everything one dataset's report shows.

    Attributes:
        dataset: The dataset (partition) name.
        description: One paragraph about the dataset (``datasets.yaml``).
        generated_at: When the report was made (shown in the header; UTC if naive).
        baseline: The retriever the others are compared with; None when unknown.
        retrievers: Display order of the retrievers (others found in the frames follow).
        metrics: ``retrieval_metrics``: one row per retriever, ``retriever`` then metric means.
        significance: ``metric_significance``: one row per (retriever, metric) with ``mean, ci_low, ci_high,
            significant, direction, note, ...``.
        pairs: ``retriever_pairs``: one row per (metric, pair of retrievers) with ``delta, ci_low, ci_high, p_holm,
            significant, note`` (:data:`~retrieval_pipeline.core.evaluation.statistics.pairwise.PAIR_COLUMNS`).
        query_results: ``query_results``: one row per (retriever, query) with ``first_relevant_rank``, ``top_hits``.
        fusion_sweep: ``fusion_sweep``: the sweep curve (``hybrid, method, parameter, value, half, <metrics>, chosen``).
        failure_buckets: ``failure_buckets``: one row per (retriever, missed query) with ``bucket`` and ``evidence``.
        retrieval_dataset: ``retrieval_dataset``: ``id, query, positive_ctxs`` (gold doc ids under ``fqn``).
        corpus: ``corpus``: ``doc_id, title`` and, optionally, ``text`` (labels of the gold and the top hits).
        trend: :func:`trend_frame` of the past evaluations: ``week, timestamp, retriever, metric, value``.
        alpha: Significance level of the tests (for the legend).
        confidence: Confidence level of the intervals (for the legend).
        objective: The metric the fusion sweep chose on (the curve's y axis).
        k: Cut-off of "missed" for the worst queries (a query is missed when no relevant doc is in the top k).
        worst_n: How many worst queries to show.
        examples_per_bucket: How many examples of each failure bucket to show.
    """

    dataset: str
    description: str = ""
    generated_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    baseline: str | None = None
    retrievers: Sequence[str] = ()
    metrics: pd.DataFrame = field(default_factory=_empty_frame)
    significance: pd.DataFrame = field(default_factory=_empty_frame)
    pairs: pd.DataFrame = field(default_factory=_empty_frame)
    query_results: pd.DataFrame = field(default_factory=_empty_frame)
    fusion_sweep: pd.DataFrame = field(default_factory=_empty_frame)
    failure_buckets: pd.DataFrame = field(default_factory=_empty_frame)
    retrieval_dataset: pd.DataFrame = field(default_factory=_empty_frame)
    corpus: pd.DataFrame = field(default_factory=_empty_frame)
    trend: pd.DataFrame = field(default_factory=_empty_frame)
    alpha: float = 0.05
    confidence: float = 0.95
    objective: str = "ndcg@10"
    k: int = 5
    worst_n: int = 8
    examples_per_bucket: int = 3

    def __post_init__(self) -> None:
        for name, frame in self.frames().items():
            if not isinstance(frame, pd.DataFrame):
                raise ReportInputError(f"dataset {self.dataset!r}: {name} must be a pandas DataFrame, got {type(frame).__name__}")
            missing = [c for c in REQUIRED_COLUMNS[name] if c not in frame.columns]
            if len(frame) and missing:
                raise ReportInputError(
                    f"dataset {self.dataset!r}: frame {name} lacks columns {missing} (it has {list(frame.columns)}); "
                    f"the report needs {list(REQUIRED_COLUMNS[name])}"
                )
        _check_unique(self.dataset, "retrieval_metrics", self.metrics, ["retriever"])
        _check_unique(self.dataset, "metric_significance", self.significance, ["retriever", "metric"])
        _check_unique(self.dataset, "retriever_pairs", self.pairs, ["metric", "a", "b"])
        _check_unique(self.dataset, "query_results", self.query_results, ["retriever", "query_id"])
        if self.k < 1:
            raise ReportInputError(f"dataset {self.dataset!r}: the cut-off k of the worst queries must be >= 1, got {self.k}")

    def frames(self) -> dict[str, pd.DataFrame]:
        """The input frames by contract name (the keys of :data:`REQUIRED_COLUMNS`)."""
        return {
            "retrieval_metrics": self.metrics,
            "metric_significance": self.significance,
            "retriever_pairs": self.pairs,
            "query_results": self.query_results,
            "fusion_sweep": self.fusion_sweep,
            "failure_buckets": self.failure_buckets,
            "retrieval_dataset": self.retrieval_dataset,
            "corpus": self.corpus,
            "trend": self.trend,
        }

    def retriever_order(self) -> list[str]:
        """The listed retrievers that have data, then any other retriever found in the metrics or results."""
        found: list[str] = []
        for frame in (self.metrics, self.query_results, self.significance):
            if len(frame) and "retriever" in frame.columns:
                found += [str(r) for r in pd.unique(frame["retriever"]) if str(r) not in found]
        return [r for r in self.retrievers if r in found] + [r for r in found if r not in self.retrievers]


def _check_unique(dataset: str, name: str, frame: pd.DataFrame, keys: list[str]) -> None:
    """Raise when ``frame`` has two rows for one key (the report would have to pick one silently)."""
    if len(frame) and all(k in frame.columns for k in keys):
        dup = frame[frame.duplicated(keys, keep=False)]
        if len(dup):
            first = dup.iloc[0][keys].tolist()
            raise ReportInputError(f"dataset {dataset!r}: frame {name} has {len(dup)} rows sharing a key {keys}, e.g. {first}")


# --------------------------------------------------------------------------------------------------
# Weekly trend from past materialisations
# --------------------------------------------------------------------------------------------------


def iso_week(timestamp: float) -> str:
    """The ISO 8601 week of a UNIX timestamp, in UTC: ``"2026-W47"``."""
    year, week, _ = datetime.fromtimestamp(timestamp, tz=timezone.utc).isocalendar()
    return f"{year}-W{week:02d}"


def _metric_name(name: object) -> bool:
    """Whether ``name`` is a registered metric name (not a bookkeeping column, not some other entry)."""
    try:
        return resolve_metric(str(name))[0].is_metric
    except UnknownMetricError:
        return False


def _number(value: object) -> float | None:
    """``value`` as a finite float, else None (booleans, text and NaN are not metric values)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _metric_values(metadata: Mapping[str, Any]) -> Iterable[tuple[str, str, float]]:
    """``(retriever, metric, value)`` from one materialisation's metadata, new or old layout.

    New: a ``metrics`` entry ``{retriever: {metric: value}}`` (a mapping or its JSON text). Old: flat
    ``"<retriever>/<metric>"`` floats. Entries that are not registered metrics or finite numbers are skipped.
    """
    nested = metadata.get("metrics")
    if isinstance(nested, str):
        nested = json.loads(nested)
    if isinstance(nested, Mapping):
        for retriever, values in nested.items():
            for metric, value in (values or {}).items():
                yield str(retriever), str(metric), value
        return
    for key, value in metadata.items():
        retriever, slash, metric = str(key).partition("/")
        if slash:
            yield retriever, metric, value


def trend_frame(history: Iterable[tuple[float, Mapping[str, Any]]]) -> pd.DataFrame:
    """The weekly trend of every metric from past ``retrieval_metrics`` materialisations.

    Args:
        history: ``(UNIX timestamp, metadata)`` per materialisation, in any order; metadata values plain
            (a ``metrics`` JSON entry ``{retriever: {metric: value}}``, or flat ``"<retriever>/<metric>"`` floats).

    Returns:
        Columns :data:`TREND_COLUMNS` (``week, timestamp, retriever, metric, value``): per ISO week (UTC), the
        last value of each (retriever, metric), sorted by week, retriever and metric.
    """
    rows = [
        (float(ts), retriever, metric, number)
        for ts, metadata in history
        for retriever, metric, value in _metric_values(metadata)
        if _metric_name(metric) and (number := _number(value)) is not None
    ]
    frame = pd.DataFrame(rows, columns=["timestamp", "retriever", "metric", "value"])
    frame.insert(0, "week", [iso_week(ts) for ts in frame["timestamp"]])
    last = frame.sort_values("timestamp", kind="stable").groupby(["week", "retriever", "metric"], sort=True).tail(1)
    return last.sort_values(["week", "retriever", "metric"]).reset_index(drop=True)[list(TREND_COLUMNS)]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def _true(value: object) -> bool:
    """Whether a nullable flag read back from Parquet (bool, numpy bool, None, NaN) is set."""
    return not _missing(value) and bool(value)


def _list(value: object) -> list:
    """A list cell read back from Parquet (numpy array, list, None) as a list."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return list(value)
