"""A self-contained HTML evaluation report per dataset: data in, one HTML string out (no Dagster here).

The report gathers what the evaluation assets produced for one dataset (:class:`ReportData`) and shows, in
this order: a header (dataset, queries, baseline, when); the comparison table (each headline metric per
retriever as ``mean [low, high]``, marked when significantly better or worse than the baseline); bars with
confidence-interval whiskers; a histogram of the rank of the first relevant document; the fusion sweep
curve; the weekly trend of the headline metrics; the failure buckets; the worst queries with their top hits.

The file stands alone: charts are PNG images inlined as ``data:`` URIs (matplotlib's Agg canvas, no
pyplot, so no GUI backend and no global figure state), the style sheet is inline, and there is no script.
A Content-Security-Policy meta tag forbids scripts and any network fetch, as a second line of defence
behind :func:`html.escape`, which every piece of text passes through (queries and documents are untrusted).
A section without data says so in one line instead of failing.

:func:`chart_png_base64` and :func:`chart_pngs` give the same charts as base64 PNGs, and
:func:`summary_markdown` a compact table with one or two charts, for the Dagster UI.

Drawing the charts is most of the report's time (about 0.4 s a chart with matplotlib). Inside
:func:`~retrieval_pipeline.core.result_cache.using_result_cache`, a chart's PNG is stored under the content
key of what it draws (:data:`CHART_INPUTS`, the retriever order, the resolution, this module's source and
matplotlib's version: :func:`chart_key`), so an unchanged re-run reuses every chart and only writes text.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import html
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from retrieval_pipeline.core.metric_registry import (
    UnknownMetricError,
    describe_metric,
    headline_columns,
    higher_is_better,
    resolve_metric,
)
from retrieval_pipeline.core.result_cache import active_result_cache, content_key

#: Metrics of the bar chart (those present in the metric table are drawn).
BAR_METRICS: tuple[str, ...] = ("hit_rate@5", "mrr", "ndcg@10")
#: Metrics of the weekly trend chart and of the compact Dagster table (those present are shown).
TREND_METRICS: tuple[str, ...] = ("hit_rate@5", "mrr", "ndcg@10")
SUMMARY_METRICS: tuple[str, ...] = ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "not_found_rate")
#: Rank histogram bins: (label, lowest rank, highest rank); a last "not found" bin holds NaN ranks.
RANK_BINS: tuple[tuple[str, float, float], ...] = (
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4-5", 4, 5),
    ("6-10", 6, 10),
    ("11-20", 11, 20),
    ("21-50", 21, 50),
    ("51+", 51, math.inf),
)
NOT_FOUND_BIN = "not found"
#: Failure buckets in display order, with their labels (an unknown bucket is shown after these, by its name).
BUCKET_LABELS: dict[str, str] = {
    "vocabulary_mismatch": "vocabulary mismatch",
    "specificity_gap": "specificity gap",
    "distractor_overlap": "distractor overlap",
    "unexplained": "unexplained",
}
#: Columns each non-empty input frame must have (an empty frame only makes its section say "no data").
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "retrieval_metrics": ("retriever",),
    "metric_significance": ("retriever", "metric", "mean", "ci_low", "ci_high", "significant", "direction"),
    "query_results": ("retriever", "query_id", "first_relevant_rank", "top_hits"),
    "fusion_sweep": ("hybrid", "method", "parameter", "value", "half", "chosen"),
    "failure_buckets": ("retriever", "query_id", "bucket", "evidence"),
    "retrieval_dataset": ("id", "query", "positive_ctxs"),
    "corpus": ("doc_id", "title"),
    "trend": ("week", "timestamp", "retriever", "metric", "value"),
}
#: Columns of :func:`trend_frame`.
TREND_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS["trend"]

_DPI = 100
_SUMMARY_DPI = 60
_MISSING = "–"


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
        _check_unique(self.dataset, "query_results", self.query_results, ["retriever", "query_id"])
        if self.k < 1:
            raise ReportInputError(f"dataset {self.dataset!r}: the cut-off k of the worst queries must be >= 1, got {self.k}")

    def frames(self) -> dict[str, pd.DataFrame]:
        """The input frames by contract name (the keys of :data:`REQUIRED_COLUMNS`)."""
        return {
            "retrieval_metrics": self.metrics,
            "metric_significance": self.significance,
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


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def _e(value: object) -> str:
    """Text escaped for HTML (quotes too: the text may land in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _code_spans(text: str) -> str:
    """Escaped text with its markdown code spans (`` `make adk-env` ``) as ``<code>``; unpaired backticks stay as they are."""
    parts = text.split("`")
    if len(parts) % 2 == 0:
        return _e(text)
    return "".join(f"<code>{_e(part)}</code>" if i % 2 else _e(part) for i, part in enumerate(parts))


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def _fmt(value: object, digits: int = 3) -> str:
    """A number for a table with ``digits`` decimals; a missing value as a dash."""
    number = _number(value)
    return _MISSING if number is None else f"{number:.{digits}f}"


def _fmt_int(value: object) -> str:
    """A count or rank for a table (``94``, not ``94.000``); a missing value as a dash."""
    number = _number(value)
    return _MISSING if number is None else str(round(number))


def _fmt_metric(metric: str, value: object) -> str:
    """A metric value: counts as integers (``n_queries``), the rest with 3 decimals."""
    try:
        is_count = resolve_metric(metric)[0].aggregation == "count"
    except UnknownMetricError:
        is_count = False
    return _fmt_int(value) if is_count else _fmt(value)


def _true(value: object) -> bool:
    """Whether a nullable flag read back from Parquet (bool, numpy bool, None, NaN) is set."""
    return not _missing(value) and bool(value)


def _empty(message: str) -> str:
    return f'<p class="empty">{_e(message)}</p>'


def _list(value: object) -> list:
    """A list cell read back from Parquet (numpy array, list, None) as a list."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return list(value)


def _colours(retrievers: Sequence[str]) -> dict[str, str]:
    """One stable colour per retriever (matplotlib's tab10, in display order)."""
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    return {r: palette[i % len(palette)] for i, r in enumerate(retrievers)}


_SNIPPET_CHARS = 90


def _label(doc_id: str, title: object, text: object) -> str:
    """What to show after a doc id: its title when it says more than the id (``shutil.copy2`` titled ``copy2`` does
    not), else for an opaque id (no dot: a chunk id such as ``nq_000004``) the start of its text; else nothing."""
    title = "" if _missing(title) else " ".join(str(title).split())
    if title and title != doc_id and not doc_id.endswith(f".{title}"):
        return title
    if "." in doc_id or _missing(text):
        return ""
    snippet = " ".join(str(text).split())
    return snippet if len(snippet) <= _SNIPPET_CHARS else snippet[: _SNIPPET_CHARS - 1] + "…"


def _titles(corpus: pd.DataFrame) -> dict[str, str]:
    """``{doc id: label}`` (see :func:`_label`) for the documents that have one."""
    if not len(corpus):
        return {}
    texts = corpus["text"] if "text" in corpus.columns else pd.Series(None, index=corpus.index)
    labels = {str(d): _label(str(d), t, x) for d, t, x in zip(corpus["doc_id"], corpus["title"], texts)}
    return {d: label for d, label in labels.items() if label}


def _gold(retrieval_dataset: pd.DataFrame) -> dict[str, list[str]]:
    """``{query id: gold doc ids}`` from the dataset's ``positive_ctxs``."""
    if not len(retrieval_dataset):
        return {}
    return {
        str(qid): [str(c["fqn"]) for c in _list(ctxs) if isinstance(c, Mapping) and c.get("fqn") is not None]
        for qid, ctxs in zip(retrieval_dataset["id"], retrieval_dataset["positive_ctxs"])
    }


def _queries(data: ReportData) -> dict[str, str]:
    """``{query id: query text}`` from the dataset, completed by the failure buckets' ``query`` column."""
    out: dict[str, str] = {}
    fb = data.failure_buckets
    if len(fb) and "query" in fb.columns:
        out.update(zip(fb["query_id"].astype(str), fb["query"].astype(str)))
    if len(data.retrieval_dataset):
        out.update(zip(data.retrieval_dataset["id"].astype(str), data.retrieval_dataset["query"].astype(str)))
    return out


# --------------------------------------------------------------------------------------------------
# Charts
# --------------------------------------------------------------------------------------------------


def chart_png_base64(figure: Figure, dpi: int = _DPI) -> str:
    """A matplotlib figure as base64 PNG text (for ``data:image/png;base64,...``), drawn on the Agg canvas."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float, height: float, ncols: int = 1) -> tuple[Figure, list]:
    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(1, ncols, squeeze=False)[0].tolist()
    for ax in axes:
        ax.grid(axis="y", color="#e5e7eb", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, axes


def _bar_estimates(data: ReportData) -> pd.DataFrame:
    """``retriever, metric, mean, low, high`` of :data:`BAR_METRICS`: means from the metric table, intervals when known."""
    metrics = [m for m in BAR_METRICS if m in data.metrics.columns]
    if not len(data.metrics) or not metrics:
        return pd.DataFrame(columns=["retriever", "metric", "mean", "low", "high"])
    long = data.metrics.melt(id_vars="retriever", value_vars=metrics, var_name="metric", value_name="mean")
    long["retriever"] = long["retriever"].astype(str)
    sig = data.significance
    if len(sig):
        ci = sig[["retriever", "metric", "ci_low", "ci_high"]].rename(columns={"ci_low": "low", "ci_high": "high"})
        long = long.merge(ci.astype({"retriever": str}), on=["retriever", "metric"], how="left")
    else:
        long["low"] = long["high"] = np.nan
    return long.astype({"mean": float, "low": float, "high": float})


def bars_figure(data: ReportData) -> Figure | None:
    """Grouped bars: per retriever, :data:`BAR_METRICS` with their confidence intervals as whiskers (None without data)."""
    est = _bar_estimates(data)
    if est.empty or est["mean"].isna().all():
        return None
    retrievers = [r for r in data.retriever_order() if r in set(est["retriever"])]
    metrics = list(dict.fromkeys(est["metric"]))
    figure, (ax,) = _figure(10, 4.2)
    width = 0.8 / len(metrics)
    x = np.arange(len(retrievers))
    table = est.set_index(["retriever", "metric"])
    for i, metric in enumerate(metrics):
        rows = table.xs(metric, level="metric").reindex(retrievers)
        low = (rows["mean"] - rows["low"]).clip(lower=0).fillna(0)
        high = (rows["high"] - rows["mean"]).clip(lower=0).fillna(0)
        ax.bar(x + (i - (len(metrics) - 1) / 2) * width, rows["mean"].fillna(0), width, label=metric, color=f"C{i}", alpha=0.85)
        ax.errorbar(x + (i - (len(metrics) - 1) / 2) * width, rows["mean"], yerr=[low, high], fmt="none", ecolor="#111827", capsize=3, lw=1)
    _category_ticks(ax, x, retrievers)
    ax.set_ylim(0, max(1.0, float(est[["mean", "high"]].max().max()) * 1.05))
    ax.set_ylabel("mean over queries")
    figure.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncols=len(metrics), frameon=False)
    return figure


def _category_ticks(ax, positions: np.ndarray, labels: Sequence[str], chars_per_row: int = 90) -> None:
    """Category labels, level when they fit the width, else slanted with their ends at the ticks (no overlap)."""
    fits = len(labels) * max(len(label) for label in labels) <= chars_per_row
    if fits:
        ax.set_xticks(positions, labels)
    else:
        ax.set_xticks(positions, labels, rotation=30, ha="right", rotation_mode="anchor")


def rank_histogram(query_results: pd.DataFrame, order: Sequence[str] | None = None) -> pd.DataFrame:
    """Per retriever (rows) the number of queries whose first relevant document is at each rank bin (columns).

    Bins are :data:`RANK_BINS` (inclusive integer ranges), then ``"not found"`` for a NaN rank.
    """
    labels = [label for label, _, _ in RANK_BINS]
    edges = [RANK_BINS[0][1] - 0.5] + [high + 0.5 for _, _, high in RANK_BINS]
    ranks = pd.to_numeric(query_results["first_relevant_rank"], errors="coerce")
    binned = pd.cut(ranks, edges, labels=labels).astype(object).where(ranks.notna(), NOT_FOUND_BIN)
    counts = pd.crosstab(query_results["retriever"].astype(str), binned).reindex(columns=[*labels, NOT_FOUND_BIN], fill_value=0)
    counts = counts.reindex(list(order) if order else counts.index, fill_value=0)
    counts.columns.name = "rank"
    return counts.astype(int)


def rank_figure(data: ReportData) -> Figure | None:
    """Grouped bars: how many queries have their first relevant document at each rank bin, per retriever."""
    if not len(data.query_results):
        return None
    counts = rank_histogram(
        data.query_results, [r for r in data.retriever_order() if r in set(data.query_results["retriever"].astype(str))]
    )
    figure, (ax,) = _figure(10, 4.0)
    colours = _colours(list(counts.index))
    width = 0.8 / len(counts)
    x = np.arange(len(counts.columns))
    for i, (retriever, row) in enumerate(counts.iterrows()):
        ax.bar(x + (i - (len(counts) - 1) / 2) * width, row.to_numpy(), width, label=retriever, color=colours[retriever])
    ax.set_xticks(x, list(counts.columns))
    ax.set_xlabel("rank of the first relevant document")
    ax.set_ylabel("queries")
    figure.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncols=min(len(counts), 5), frameon=False)
    return figure


def _sweep_objective(data: ReportData) -> str | None:
    """The sweep's y column: the configured objective if the curve has it, else its first metric column."""
    columns = list(data.fusion_sweep.columns)
    if data.objective in columns:
        return data.objective
    return next((c for c in columns if _metric_name(c)), None)


def sweep_figure(data: ReportData) -> Figure | None:
    """Per hybrid, the objective against alpha (min-max) or k (RRF) on the dev and test halves; the chosen value starred."""
    sweep, objective = data.fusion_sweep, _sweep_objective(data)
    if not len(sweep) or objective is None:
        return None
    hybrids = list(dict.fromkeys(sweep["hybrid"].astype(str)))
    figure, axes = _figure(min(5.0 * len(hybrids), 15), 3.6, ncols=len(hybrids))
    for ax, hybrid in zip(axes, hybrids):
        curve = sweep[sweep["hybrid"].astype(str) == hybrid].sort_values("value")
        for half, style in (("dev", "-"), ("test", "--")):
            part = curve[curve["half"] == half]
            ax.plot(part["value"], part[objective], style, marker="o", ms=3, label=half)
        flagged = curve[curve["chosen"].map(_true)]
        chosen = flagged[flagged["half"] == "dev"] if (flagged["half"] == "dev").any() else flagged.head(1)
        if len(chosen):
            ax.plot(chosen["value"], chosen[objective], "*", ms=14, color="#dc2626", label=f"chosen = {chosen['value'].iloc[0]:g}")
        if "is_default" in curve.columns:
            for value in curve.loc[curve["is_default"].map(_true), "value"].unique():
                ax.axvline(value, color="#9ca3af", ls=":", lw=1)
        parameter = str(curve["parameter"].iloc[0])
        if parameter == "k" and (curve["value"] > 0).all():
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_title(f"{hybrid} ({curve['method'].iloc[0]})", fontsize="medium")
        ax.set_xlabel(parameter)
        ax.set_ylabel(objective)
        ax.legend(frameon=False, fontsize="small")
    return figure


def trend_figure(data: ReportData) -> Figure | None:
    """Per headline metric, its weekly value per retriever (dotted grey lines mark no data in between)."""
    trend = data.trend
    metrics = [m for m in TREND_METRICS if len(trend) and m in set(trend["metric"])]
    if not metrics:
        return None
    weeks = sorted(trend["week"].unique())
    retrievers = [r for r in data.retriever_order() if r in set(trend["retriever"])] or sorted(trend["retriever"].unique())
    colours = _colours(retrievers)
    figure, axes = _figure(min(4.2 * len(metrics), 14), 3.4, ncols=len(metrics))
    for ax, metric in zip(axes, metrics):
        part = trend[trend["metric"] == metric]
        for retriever in retrievers:
            series = part[part["retriever"] == retriever].set_index("week")["value"].reindex(weeks)
            ax.plot(range(len(weeks)), series.to_numpy(), marker="o", ms=4, color=colours[retriever], label=retriever)
        ax.set_xticks(range(len(weeks)), weeks, rotation=30 if len(weeks) > 3 else 0, ha="right" if len(weeks) > 3 else "center")
        ax.set_xlim(-0.5, len(weeks) - 0.5)
        ax.set_title(metric, fontsize="medium")
    figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=min(len(retrievers), 5), frameon=False)
    return figure


#: The charts by name: a function of the report data giving a figure, or None when there is nothing to draw.
CHARTS: dict[str, Callable[[ReportData], Figure | None]] = {
    "bars": bars_figure,
    "ranks": rank_figure,
    "sweep": sweep_figure,
    "trend": trend_figure,
}


#: The :class:`ReportData` fields each chart draws from, with the columns it reads of a frame (None: all of the field),
#: besides :meth:`ReportData.retriever_order` (part of every chart's key). A chart is drawn from a copy of the data
#: holding only these columns, so it cannot read another; ``test_html_report`` changes everything else and checks
#: the PNG stays the same. Columns a re-run changes without changing the drawing (latencies, when in the week a
#: trend point was measured) are left out, so an unchanged re-run reuses every chart.
CHART_INPUTS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "bars": {"metrics": ("retriever", *BAR_METRICS), "significance": ("retriever", "metric", "ci_low", "ci_high")},
    "ranks": {"query_results": ("retriever", "first_relevant_rank")},
    "sweep": {"fusion_sweep": None, "objective": None},
    "trend": {"trend": ("week", "metric", "retriever", "value")},
}
#: The result cache's namespace of rendered charts.
CHART_NAMESPACE = "report_chart_png"


@cache
def _drawing_version() -> str:
    """This module's source and matplotlib's version: any change to how charts are drawn gives new keys."""
    with open(__file__, "rb") as source:
        return f"{hashlib.sha256(source.read()).hexdigest()}/matplotlib-{matplotlib.__version__}"


def _drawn(value: Any, columns: tuple[str, ...] | None) -> Any:
    """The part of one report field a chart reads: a frame's drawn ``columns`` (those it has), else the value."""
    if columns is None or not isinstance(value, pd.DataFrame):
        return value
    return value[[c for c in columns if c in value.columns]]


def _drawn_data(data: ReportData, name: str) -> ReportData:
    """``data`` with each frame chart ``name`` draws cut to the columns it reads (see :data:`CHART_INPUTS`).

    A shallow copy with the fields set directly: the cut frames lack columns the whole report needs, so they
    would not pass :class:`ReportData`'s checks, which the data already passed.
    """
    drawn = copy.copy(data)
    for field_name, columns in CHART_INPUTS[name].items():
        object.__setattr__(drawn, field_name, _drawn(getattr(data, field_name), columns))
    return drawn


def _field_digest(value: Any) -> Any:
    """A JSON-able digest of one report field: a frame's columns, dtypes and values; other values as they are."""
    if not isinstance(value, pd.DataFrame):
        return value
    text = value.to_json(orient="split", double_precision=15, default_handler=str, date_format="iso")
    return {"dtypes": [str(t) for t in value.dtypes], "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def chart_key(data: ReportData, name: str, dpi: int = _DPI) -> str:
    """The content key of one chart's PNG: what it draws (:data:`CHART_INPUTS`), the retriever order and the resolution."""
    return _key_of_drawn(_drawn_data(data, name), name, dpi)


def _key_of_drawn(drawn: ReportData, name: str, dpi: int) -> str:
    inputs = {f: _field_digest(getattr(drawn, f)) for f in CHART_INPUTS[name]}
    return content_key(_drawing_version(), name, dpi, drawn.retriever_order(), inputs)


def _render_png(drawn: ReportData, name: str, dpi: int) -> str | None:
    """The chart drawn from ``drawn`` (already cut by :func:`_drawn_data`)."""
    figure = CHARTS[name](drawn)
    return None if figure is None else chart_png_base64(figure, dpi)


def chart_png(data: ReportData, name: str, dpi: int = _DPI) -> str | None:
    """One chart as base64 PNG, or None when it has no data; reused from the active result cache when unchanged."""
    drawn = _drawn_data(data, name)
    store = active_result_cache()
    if store is None:
        return _render_png(drawn, name, dpi)
    png, _ = store.get_or_compute(
        CHART_NAMESPACE,
        _key_of_drawn(drawn, name, dpi),
        lambda: _render_png(drawn, name, dpi),
        encode=lambda value: {"png": value},
        decode=_stored_png,
    )
    return png


def _stored_png(stored: Any) -> str | None:
    """A cached chart entry back to its PNG text (None: the chart had no data); anything else is corrupt."""
    png = stored["png"]
    if png is not None and not isinstance(png, str):
        raise TypeError(f"a chart entry holds {type(png).__name__}, not base64 text")
    return png


def chart_pngs(data: ReportData, names: Sequence[str] = tuple(CHARTS), dpi: int = _DPI) -> dict[str, str]:
    """``{chart name: base64 PNG}`` of the named :data:`CHARTS` that have data (reusable as Dagster metadata images)."""
    unknown = [n for n in names if n not in CHARTS]
    if unknown:
        raise ValueError(f"unknown chart(s) {unknown}: known charts are {list(CHARTS)}")
    pngs = {name: chart_png(data, name, dpi) for name in names}
    return {name: png for name, png in pngs.items() if png is not None}


def _chart_html(data: ReportData, name: str, alt: str, caption: str) -> str | None:
    src = chart_png(data, name)
    if src is None:
        return None
    return (
        f'<figure class="chart"><img class="chart" data-chart="{_e(name)}" alt="{_e(alt)}" '
        f'src="data:image/png;base64,{src}"><figcaption>{caption}</figcaption></figure>'
    )


# --------------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------------


def _significance_rows(data: ReportData) -> dict[tuple[str, str], Mapping[str, Any]]:
    sig = data.significance
    if not len(sig):
        return {}
    return {(str(r["retriever"]), str(r["metric"])): r for r in sig.to_dict("records")}


def _mark(row: Mapping[str, Any] | None) -> str:
    """The significance mark of a cell: ▲ better, ▼ worse, nothing otherwise."""
    if row is None or not _true(row.get("significant")):
        return ""
    direction = row.get("direction")
    symbol = {"better": "▲", "worse": "▼"}.get(str(direction))
    if symbol is None:
        return ""
    p = row.get("p_randomisation_holm")
    title = f"significantly {direction} than the baseline" + (f" (Holm-adjusted p = {_fmt(p, 4)})" if _number(p) is not None else "")
    return f' <span class="sig {_e(direction)}" title="{_e(title)}">{symbol}</span>'


def _cell(metric: str, value: object, row: Mapping[str, Any] | None, best: bool) -> str:
    """One comparison cell: the mean (bold when best) with its significance mark, then its interval below."""
    mean = row.get("mean") if row is not None and _number(row.get("mean")) is not None else value
    text = _fmt_metric(metric, mean)
    text = f"<strong>{text}</strong>" if best else text
    mark = _mark(row)
    if row is not None and _number(row.get("ci_low")) is not None and _number(row.get("ci_high")) is not None:
        mark += f'<span class="ci">[{_fmt(row["ci_low"])}, {_fmt(row["ci_high"])}]</span>'
    shade = f' class="{_e(row.get("direction"))}"' if row is not None and _mark(row) else ""
    return f"<td{shade}>{text}{mark}</td>"


def _best(values: pd.Series, metric: str) -> float | None:
    """The best value of a row of the comparison (None when the metric has no better direction or no value)."""
    try:
        higher = higher_is_better(metric)
    except UnknownMetricError:
        return None
    numbers = pd.to_numeric(values, errors="coerce").dropna()
    if higher is None or numbers.empty or numbers.nunique() == 1:
        return None
    return float(numbers.max() if higher else numbers.min())


def _describe(metric: str) -> str:
    try:
        return describe_metric(metric)
    except UnknownMetricError:
        return metric


def _legend(data: ReportData) -> str:
    confidence = f"{data.confidence:.0%}"
    baseline = f"<code>{_e(data.baseline)}</code>" if data.baseline else "the baseline"
    return (
        '<p class="legend"><span class="sig better">▲</span> / <span class="sig worse">▼</span>: significantly better / worse than '
        f"{baseline} by a paired two-sided Fisher randomisation test on the per-query values, p-values Holm-corrected across the "
        f"retrievers compared with the baseline (per metric), at α = {data.alpha:g}. Brackets: {confidence} paired percentile "
        "bootstrap confidence intervals over queries. Bold: the best value of the row. Metrics without an interval "
        "(latency, ranks) are shown as measured.</p>"
    )


def _notes(data: ReportData) -> str:
    """The significance notes other than "baseline" (e.g. too few queries for a test), one line each."""
    sig = data.significance
    if not len(sig) or "note" not in sig.columns:
        return ""
    notes = sig[sig["note"].notna() & ~sig["note"].astype(str).isin(["", "baseline"])]
    lines = notes.groupby(notes["note"].astype(str), sort=False)["retriever"].unique()
    items = "".join(f"<li><code>{_e(', '.join(map(str, r)))}</code>: {_e(note)}</li>" for note, r in lines.items())
    return f'<ul class="notes">{items}</ul>' if items else ""


def comparison_section(data: ReportData) -> str:
    """Headline metrics (rows) per retriever (columns): mean, interval and significance mark vs the baseline."""
    if not len(data.metrics):
        return _empty("No metric table for this dataset.")
    retrievers = data.retriever_order()
    table = data.metrics.assign(retriever=data.metrics["retriever"].astype(str)).set_index("retriever").reindex(retrievers)
    sig = _significance_rows(data)
    # a break opportunity after each "_" and "." keeps 8+ long retriever names within the page width
    head = "".join(
        f"<th>{_e(r).replace('_', '_<wbr>').replace('.', '.<wbr>')}{'<br><small>baseline</small>' if r == data.baseline else ''}</th>"
        for r in retrievers
    )
    body = []
    for metric in headline_columns(table.columns):
        best = _best(table[metric], metric)
        cells = "".join(
            _cell(metric, table.at[r, metric], sig.get((r, metric)), best is not None and _number(table.at[r, metric]) == best)
            for r in retrievers
        )
        body.append(f'<tr><th scope="row" title="{_e(_describe(metric))}">{_e(metric)}</th>{cells}</tr>')
    if not data.significance.empty:
        legend = _legend(data)
    else:
        legend = _empty("No significance results for this dataset: means only, no intervals or tests.")
    return (
        f'<div class="scroll"><table class="comparison"><thead><tr><th>metric</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{legend}{_notes(data)}"
    )


def bars_section(data: ReportData) -> str:
    caption = "Whiskers: confidence intervals of the mean." if len(data.significance) else "No intervals known: bars only."
    return _chart_html(data, "bars", "bar chart of hit@5, MRR and nDCG@10 per retriever", _e(caption)) or _empty(
        f"No metric among {', '.join(BAR_METRICS)} to draw."
    )


def ranks_section(data: ReportData) -> str:
    caption = "Queries per rank of the first relevant document; 'not found' = not in the retrieved depth."
    return _chart_html(data, "ranks", "histogram of the first relevant rank per retriever", _e(caption)) or _empty(
        "No per-query results for this dataset."
    )


def sweep_section(data: ReportData) -> str:
    objective = _sweep_objective(data)
    caption = (
        f"{objective} against the fusion parameter on the dev half (solid, where the value is chosen) and the test half "
        "(dashed, where it is reported); the star marks the chosen value, the dotted line the configured default."
    )
    return _chart_html(data, "sweep", "fusion sweep curves", _e(caption)) or _empty("No fusion sweep for this dataset (no hybrid tuned).")


def trend_section(data: ReportData) -> str:
    weeks = data.trend["week"].nunique() if len(data.trend) else 0
    caption = f"Last value per ISO week over {weeks} week(s) of evaluations."
    return _chart_html(data, "trend", "weekly trend of the headline metrics", _e(caption)) or _empty(
        "No past evaluations recorded for this dataset yet."
    )


def bucket_counts(failure_buckets: pd.DataFrame, order: Sequence[str] = ()) -> pd.DataFrame:
    """Misses per retriever (rows) and bucket (columns, :data:`BUCKET_LABELS` order first), with a ``total`` column."""
    counts = pd.crosstab(failure_buckets["retriever"].astype(str), failure_buckets["bucket"].astype(str))
    columns = [b for b in BUCKET_LABELS if b in counts.columns] + sorted(c for c in counts.columns if c not in BUCKET_LABELS)
    rows = [r for r in order if r in counts.index] + [r for r in counts.index if r not in order]
    counts = counts.reindex(index=rows, columns=columns, fill_value=0)
    counts["total"] = counts.sum(axis=1)
    return counts


def _examples(misses: pd.DataFrame, n: int) -> pd.DataFrame:
    """Up to ``n`` misses of distinct queries, taking the retrievers in turn (not all examples from the first one)."""
    distinct = misses.drop_duplicates("query_id")
    turn = distinct.groupby(distinct["retriever"].astype(str), sort=False).cumcount()
    return distinct.assign(_turn=turn.to_numpy()).sort_values("_turn", kind="stable").head(n)


def buckets_section(data: ReportData) -> str:
    fb = data.failure_buckets
    if not len(fb):
        return _empty("No failure buckets for this dataset.")
    counts = bucket_counts(fb, data.retriever_order())
    head = "".join(f"<th>{_e(BUCKET_LABELS.get(c, c))}</th>" for c in counts.columns)
    rows = "".join(f"<tr><th scope='row'>{_e(r)}</th>{''.join(f'<td>{int(v)}</td>' for v in counts.loc[r])}</tr>" for r in counts.index)
    queries = _queries(data)
    examples = []
    for bucket in counts.columns.drop("total"):
        part = _examples(fb[fb["bucket"].astype(str) == bucket], data.examples_per_bucket)
        items = "".join(
            f"<li><code>{_e(r['retriever'])}</code> missed <q>{_e(queries.get(str(r['query_id']), r['query_id']))}</q>: "
            f"{_e(r['evidence'])}</li>"
            for r in part.to_dict("records")
        )
        examples.append(f"<h3>{_e(BUCKET_LABELS.get(bucket, bucket))}</h3><ul class='examples'>{items}</ul>")
    return (
        f"<div class='scroll'><table><thead><tr><th>retriever</th>{head}</tr></thead><tbody>{rows}</tbody></table></div>{''.join(examples)}"
    )


def _misses(query_results: pd.DataFrame, k: int) -> pd.Series:
    """Whether each row missed at ``k``: no relevant document in the top k (from ``hit_rate@k`` when present, else the rank)."""
    column = f"hit_rate@{k}"
    if column in query_results.columns:
        return pd.to_numeric(query_results[column], errors="coerce").fillna(0) <= 0
    ranks = pd.to_numeric(query_results["first_relevant_rank"], errors="coerce")
    return ~(ranks <= k)


def worst_queries(query_results: pd.DataFrame, k: int = 5, n: int = 8) -> pd.DataFrame:
    """The queries most retrievers miss at ``k``: ``query_id, misses, retrievers, median_rank``.

    Ordered by misses (most first), then median first relevant rank (not found counts as worst), then id;
    queries no retriever misses are left out.
    """
    frame = query_results.assign(
        missed=_misses(query_results, k),
        rank=pd.to_numeric(query_results["first_relevant_rank"], errors="coerce").fillna(np.inf),
    )
    per_query = frame.groupby(frame["query_id"].astype(str)).agg(
        misses=("missed", "sum"), retrievers=("retriever", "nunique"), median_rank=("rank", "median")
    )
    per_query = per_query[per_query["misses"] > 0].reset_index()
    per_query = per_query.sort_values(["misses", "median_rank", "query_id"], ascending=[False, False, True], kind="stable")
    return per_query.head(n).reset_index(drop=True).astype({"misses": int, "retrievers": int})


def _title_html(doc_id: str, titles: Mapping[str, str]) -> str:
    """A document's label (title or text snippet, see :func:`_label`) after its id; nothing when it has none."""
    title = titles.get(doc_id)
    return f' <span class="title">{_e(title)}</span>' if title else ""


def _hit(doc_id: str, titles: Mapping[str, str], gold: set[str]) -> str:
    mark = '<span class="gold" title="relevant">✓</span> ' if doc_id in gold else ""
    return f"<li>{mark}<code>{_e(doc_id)}</code>{_title_html(doc_id, titles)}</li>"


def worst_section(data: ReportData) -> str:
    qr = data.query_results
    if not len(qr):
        return _empty("No per-query results for this dataset.")
    worst = worst_queries(qr, data.k, data.worst_n)
    if worst.empty:
        return _empty(f"Every retriever finds a relevant document in the top {data.k} for every query.")
    queries, gold_of, titles = _queries(data), _gold(data.retrieval_dataset), _titles(data.corpus)
    by_query = {str(q): part for q, part in qr.groupby(qr["query_id"].astype(str))}
    order = {r: i for i, r in enumerate(data.retriever_order())}
    cards = []
    for item in worst.to_dict("records"):
        qid = item["query_id"]
        gold = gold_of.get(qid, [])
        rows = by_query[qid].assign(_o=lambda f: f["retriever"].astype(str).map(order)).sort_values("_o")
        body = "".join(
            f"<tr><th scope='row'>{_e(r['retriever'])}</th><td>{_fmt_int(r['first_relevant_rank']) if _number(r['first_relevant_rank']) else 'not found'}</td>"
            f"<td><ol class='hits'>{''.join(_hit(str(d), titles, set(gold)) for d in _list(r['top_hits'])[:3])}</ol></td></tr>"
            for r in rows.to_dict("records")
        )
        gold_html = ", ".join(f"<code>{_e(g)}</code>{_title_html(g, titles)}" for g in gold)
        cards.append(
            f"<article class='query'><h3><q>{_e(queries.get(qid, qid))}</q></h3>"
            f"<p class='meta'><code>{_e(qid)}</code> · missed at {data.k} by {item['misses']} of {item['retrievers']} retrievers"
            f" · gold: {gold_html or 'unknown'}</p>"
            f"<div class='scroll'><table><thead><tr><th>retriever</th><th>gold rank</th><th>top 3 hits</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div></article>"
        )
    return "".join(cards)


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor, heading and renderer (report data -> HTML body)."""

    key: str
    title: str
    render: Callable[[ReportData], str]


#: The report's sections, in order.
SECTIONS: tuple[Section, ...] = (
    Section("comparison", "Comparison with the baseline", comparison_section),
    Section("bars", "Headline metrics with confidence intervals", bars_section),
    Section("ranks", "Rank of the first relevant document", ranks_section),
    Section("sweep", "Fusion sweep", sweep_section),
    Section("trend", "Weekly trend", trend_section),
    Section("buckets", "Failure buckets", buckets_section),
    Section("worst", "Worst queries", worst_section),
)


# --------------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------------

_CSS = """
:root { color-scheme: light; --fg: #111827; --muted: #6b7280; --line: #e5e7eb; --band: #f9fafb; --accent: #1d4ed8; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg);
  background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 28px 64px; }
header h1 { margin: 0 0 4px; font-size: 26px; }
header p { margin: 4px 0; }
.facts { display: flex; flex-wrap: wrap; gap: 8px 28px; padding: 10px 14px; background: var(--band); border: 1px solid var(--line);
  border-radius: 8px; margin: 12px 0; }
.facts div span { display: block; font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
nav { margin: 8px 0 4px; font-size: 14px; display: flex; flex-wrap: wrap; row-gap: 4px; }
nav a { color: var(--accent); text-decoration: none; margin-right: 14px; white-space: nowrap; }
section { margin-top: 36px; }
h2 { font-size: 20px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 6px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th:first-child, td:first-child { text-align: left; }
thead th { background: var(--band); font-weight: 600; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fcfcfd; }
table.comparison td { white-space: nowrap; }
.ci { display: block; font-size: 12px; color: var(--muted); }
.sig { font-size: 12px; }
.sig.better { color: #15803d; }
.sig.worse { color: #b91c1c; }
td.better { background: #f0fdf4; }
td.worse { background: #fef2f2; }
.legend, .empty, figcaption, .meta { color: var(--muted); font-size: 13px; }
.empty { font-style: italic; }
.notes { font-size: 13px; color: var(--muted); }
figure.chart { margin: 8px 0; }
img.chart { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; word-break: break-all; }
q { quotes: "“" "”"; }
article.query { border: 1px solid var(--line); border-radius: 8px; padding: 4px 14px 10px; margin: 14px 0; }
article.query h3 { font-weight: 600; }
article.query td:last-child, article.query th:last-child { text-align: left; }
ol.hits { margin: 0; padding-left: 20px; }
.title { color: var(--muted); }
.gold { color: #15803d; font-weight: 700; }
ul.examples li { margin-bottom: 4px; }
footer { margin-top: 48px; color: var(--muted); font-size: 12px; }
"""

#: No script at all, no fetch from anywhere: images only from inline ``data:`` URIs, styles only inline.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _n_queries(data: ReportData) -> str:
    if len(data.query_results):
        return str(data.query_results["query_id"].nunique())
    if len(data.metrics) and "n_queries" in data.metrics.columns:
        return _fmt_int(pd.to_numeric(data.metrics["n_queries"], errors="coerce").max())
    return _MISSING


def _header(data: ReportData) -> str:
    when = data.generated_at if data.generated_at.tzinfo else data.generated_at.replace(tzinfo=timezone.utc)
    facts = {
        "queries": _n_queries(data),
        "retrievers": str(len(data.retriever_order())),
        "baseline": data.baseline or _MISSING,
        "generated": when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    facts_html = "".join(f"<div><span>{_e(k)}</span>{_e(v)}</div>" for k, v in facts.items())
    nav = "".join(f'<a href="#{s.key}">{_e(s.title)}</a>' for s in SECTIONS)
    description = f"<p>{_code_spans(data.description)}</p>" if data.description else ""
    return (
        f"<header><h1>Retrieval evaluation: {_e(data.dataset)}</h1>{description}"
        f'<div class="facts">{facts_html}</div><nav>{nav}</nav></header>'
    )


def build_report(data: ReportData) -> str:
    """The report as one self-contained HTML document (inline CSS and images, no script, no network).

    Args:
        data: The dataset's frames and settings (see :class:`ReportData`).

    Returns:
        The HTML text, sections in :data:`SECTIONS` order after the header.
    """
    sections = "".join(f'<section id="{s.key}"><h2>{_e(s.title)}</h2>{s.render(data)}</section>' for s in SECTIONS)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Retrieval evaluation: {_e(data.dataset)}</title><style>{_CSS}</style></head>"
        f"<body><main>{_header(data)}{sections}"
        "<footer>Made by retrieval_pipeline.core.report.html; a self-contained file: no script, no network.</footer>"
        "</main></body></html>\n"
    )


# --------------------------------------------------------------------------------------------------
# For the Dagster UI
# --------------------------------------------------------------------------------------------------


def summary_table_markdown(data: ReportData, metrics: Sequence[str] = SUMMARY_METRICS) -> str:
    """A compact markdown table: retrievers (rows) by a few headline metrics, ``mean [low, high]`` and ▲/▼ marks."""
    columns = [m for m in metrics if m in data.metrics.columns]
    if not len(data.metrics) or not columns:
        return "_no metric table_"
    sig = _significance_rows(data)
    table = data.metrics.assign(retriever=data.metrics["retriever"].astype(str)).set_index("retriever")
    lines = ["| retriever | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for r in data.retriever_order():
        if r not in table.index:
            continue
        cells = []
        for m in columns:
            row = sig.get((r, m))
            text = _fmt_metric(m, row["mean"] if row is not None and _number(row.get("mean")) is not None else table.at[r, m])
            if row is not None and _number(row.get("ci_low")) is not None and _number(row.get("ci_high")) is not None:
                text += f" [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"
            mark = (
                {"better": " ▲", "worse": " ▼"}.get(str(row.get("direction"))) if row is not None and _true(row.get("significant")) else ""
            )
            cells.append(text + (mark or ""))
        name = r.replace("|", "\\|") + (" (baseline)" if r == data.baseline else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_markdown(data: ReportData, charts: Sequence[str] = ("bars", "ranks"), max_bytes: int = 300_000, dpi: int = _SUMMARY_DPI) -> str:
    """The compact comparison table and up to ``charts`` as inline base64 PNG images, kept under ``max_bytes``.

    Charts that would push the text past ``max_bytes`` are left out (the table always stays), with a line saying so.
    """
    table = summary_table_markdown(data)
    legend = f"\n\n▲/▼: significantly better/worse than the baseline (Holm-corrected randomisation test, α = {data.alpha:g})."
    out = f"**{data.dataset}**\n\n{table}{legend if len(data.significance) else ''}"
    for name, png in chart_pngs(data, charts, dpi).items():
        image = f"\n\n![{name}](data:image/png;base64,{png})"
        if len((out + image).encode()) > max_bytes:
            out += f"\n\n_chart {name} left out: over the {max_bytes // 1000} KB metadata budget_"
            continue
        out += image
    return out


def headline_metadata(data: ReportData, digits: int = 4) -> dict[str, dict[str, float]]:
    """``{retriever: {headline metric: value rounded to digits}}`` of the finite values, for JSON metadata."""
    if not len(data.metrics):
        return {}
    columns = headline_columns(data.metrics.columns)
    out: dict[str, dict[str, float]] = {}
    for row in data.metrics.to_dict("records"):
        values = {m: round(v, digits) for m in columns if (v := _number(row[m])) is not None}
        out[str(row["retriever"])] = values
    return out
