"""Markdown for the Dagster UI: previews and the retriever comparison table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from retrieval_pipeline.core.metric_registry import higher_is_better


def md_preview(frame: pd.DataFrame, n: int = 20, max_chars: int = 120) -> str:
    """The first ``n`` rows as a markdown table, long cells cut to ``max_chars``."""
    if frame.empty:
        return "_none_"
    head = frame.head(n).copy()
    for col in head.columns:
        if head[col].dtype == object:
            head[col] = head[col].map(lambda v: v if not isinstance(v, str) or len(v) <= max_chars else v[: max_chars - 1] + "…")
    suffix = f"\n\n_{len(frame) - n} more rows_" if len(frame) > n else ""
    return head.to_markdown(index=False) + suffix


def comparison_table(metrics: Mapping[str, Mapping[str, float]], columns: Sequence[str]) -> str:
    """Retrievers side by side (rows), one column per metric, best value per column in bold.

    The better direction of each column comes from the metric registry (lower latency, not-found rate,
    rank and best-match position are better); a column with no direction (a count) has no bold value.

    Args:
        metrics: ``{retriever: {metric name: value}}``, e.g. :func:`~retrieval_pipeline.core.metrics.aggregate` per retriever.
        columns: Registered metric names, in table order (e.g. :func:`~retrieval_pipeline.core.metric_registry.headline_columns`).

    Returns:
        A markdown table with a ``retriever`` column first.

    Raises:
        KeyError: If a column is not in the metric registry (the message lists the known names).
    """
    directions = {col: higher_is_better(col) for col in columns}  # raises on an unknown column, even an empty one
    frame = pd.DataFrame({r: {c: m.get(c) for c in columns} for r, m in metrics.items()}).T
    out = frame.copy().astype(object)
    for col, higher in directions.items():
        values = frame[col].astype(float)
        if values.notna().any():
            out[col] = _cells(values, higher)
    out.index.name = "retriever"
    return out.reset_index().to_markdown(index=False)


def _cells(values: pd.Series, higher: bool | None) -> list[str]:
    """The values with 3 decimals, the best one in bold (none when the metric has no better direction)."""
    best = None if higher is None else (values.max() if higher else values.min())
    return [f"**{v:.3f}**" if v == best else f"{v:.3f}" for v in values]
