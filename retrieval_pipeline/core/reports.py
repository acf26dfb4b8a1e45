"""Markdown for the Dagster UI: previews and the retriever comparison table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd


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
    """Retrievers side by side (rows), one column per metric, best value per column in bold."""
    frame = pd.DataFrame({r: {c: m.get(c) for c in columns} for r, m in metrics.items()}).T
    lower_is_better = {c for c in columns if c.startswith(("latency", "not_found", "avg_rank"))}
    out = frame.copy().astype(object)
    for col in columns:
        values = frame[col].astype(float)
        if values.notna().any():
            best = values.min() if col in lower_is_better else values.max()
            out[col] = [f"**{v:.3f}**" if v == best else f"{v:.3f}" for v in values]
    out.index.name = "retriever"
    return out.reset_index().to_markdown(index=False)
