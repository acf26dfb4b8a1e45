"""Latency with its spread, and a fastest retriever only when it is faster beyond that spread.

Per-query latencies vary a lot from query to query (and run to run), so a lower mean or p95 alone crowns noise.
:func:`latency_spread` gives each retriever's median and its 10th and 90th percentiles over the timed queries;
:func:`fastest` names a retriever only when its whole p10-p90 range lies below every other's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Columns of :func:`latency_spread`.
SPREAD_COLUMNS: tuple[str, ...] = ("retriever", "n_timed", "median_ms", "p10_ms", "p90_ms")


def is_latency(metric: str) -> bool:
    """Whether ``metric`` is a latency figure (``latency_mean_ms``, ``latency_p95_ms``)."""
    return metric.startswith("latency_")


def latency_spread(query_results: pd.DataFrame, retrievers: Sequence[str] | None = None) -> pd.DataFrame:
    """Per retriever with timed queries: their number, the median, p10 and p90 of ``latency_ms`` (numpy's linear percentiles).

    Args:
        query_results: The per-query frame (``retriever``, ``latency_ms``: empty past the latency sample).
        retrievers: Order of the rows (default: the frame's); retrievers without a timed query are left out.
    """
    if not len(query_results) or "latency_ms" not in query_results.columns:
        return pd.DataFrame(columns=list(SPREAD_COLUMNS))
    timed = query_results.assign(latency_ms=pd.to_numeric(query_results["latency_ms"], errors="coerce")).dropna(subset=["latency_ms"])
    order = list(retrievers) if retrievers is not None else list(dict.fromkeys(query_results["retriever"].astype(str)))
    rows = []
    for name in order:
        values = timed.loc[timed["retriever"].astype(str) == name, "latency_ms"].to_numpy(dtype=float)
        if values.size:
            p10, median, p90 = np.percentile(values, [10, 50, 90])
            rows.append((name, int(values.size), float(median), float(p10), float(p90)))
    return pd.DataFrame(rows, columns=list(SPREAD_COLUMNS))


def fastest(spread: pd.DataFrame) -> str | None:
    """The retriever whose p90 is below every other retriever's p10; None with fewer than two or when the ranges overlap."""
    if len(spread) < 2:
        return None
    best = spread.loc[spread["p90_ms"].idxmin()]
    others = spread[spread["retriever"] != best["retriever"]]
    return str(best["retriever"]) if (best["p90_ms"] < others["p10_ms"]).all() else None


def spread_text(row: Mapping[str, Any]) -> str:
    """``median 3.10 ms (p10-p90 2.00-5.20, 200 timed)``."""
    return f"median {row['median_ms']:.2f} ms (p10–p90 {row['p10_ms']:.2f}–{row['p90_ms']:.2f}, {int(row['n_timed'])} timed)"
