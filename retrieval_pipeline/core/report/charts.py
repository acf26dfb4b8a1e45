"""The report's charts: matplotlib figures drawn from :class:`~retrieval_pipeline.core.report.data.ReportData`, as PNGs.

Charts are drawn on matplotlib's Agg canvas (no pyplot, so no GUI backend and no global figure state) and given as
base64 PNG text. Drawing is most of the report's time (about 0.4 s a chart). Inside
:func:`~retrieval_pipeline.core.common.cache.result_cache.using_result_cache`, a chart's PNG is stored under the content key of what
it draws (:data:`CHART_INPUTS`, the retriever order, the resolution, this module's source and matplotlib's version:
:func:`chart_key`), so an unchanged re-run reuses every chart.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import math
from collections.abc import Callable, Sequence
from functools import cache
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from retrieval_pipeline.core.common.cache.result_cache import active_result_cache, content_key
from retrieval_pipeline.core.evaluation.metrics import view_columns
from retrieval_pipeline.core.report.data import ReportData, _metric_name, _true

if TYPE_CHECKING:  # matplotlib is imported where a chart is drawn: every Dagster process loads this module, few draw
    from matplotlib.figure import Figure

#: Metrics of the bar chart (those present in the metric table are drawn): the registry's ``chart`` view.
BAR_METRICS: tuple[str, ...] = tuple(view_columns("chart"))
#: Metrics of the weekly trend chart (those present are shown): the registry's ``chart`` view.
TREND_METRICS: tuple[str, ...] = tuple(view_columns("chart"))
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

_DPI = 100


def _colours(retrievers: Sequence[str]) -> dict[str, str]:
    """One stable colour per retriever (matplotlib's tab10, in display order)."""
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    return {r: palette[i % len(palette)] for i, r in enumerate(retrievers)}


def chart_png_base64(figure: Figure, dpi: int = _DPI) -> str:
    """A matplotlib figure as base64 PNG text (for ``data:image/png;base64,...``), drawn on the Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    # the constrained layout (:func:`_figure`) already fits every label inside the figure; bbox_inches="tight"
    # would draw it a second time only to trim a few pixels of margin (about a fifth of a chart's time)
    figure.savefig(buffer, format="png", dpi=dpi, facecolor="white")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float, height: float, ncols: int = 1) -> tuple[Figure, list]:
    from matplotlib.figure import Figure  # noqa: PLC0415

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
            ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")  # matplotlib wraps it in a FuncFormatter
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
    """This module's source (the chart-drawing code) and matplotlib's version: any change to how charts are drawn gives new keys."""
    with open(__file__, "rb") as source:
        return f"{hashlib.sha256(source.read()).hexdigest()}/matplotlib-{version('matplotlib')}"


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
