"""Markdown for the Dagster UI: previews, the retriever comparison table, the table of CIs and significance, and the
matrices of every retriever against every other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.evaluation.latency import fastest, is_latency, spread_text
from retrieval_pipeline.core.evaluation.metrics import higher_is_better, metric_label
from retrieval_pipeline.core.evaluation.statistics.pairwise import TIES_SPELLED_OUT, WINS_SPELLED_OUT, flip, matrix_cell, metric_verdicts


def comparison_table(metrics: Mapping[str, Mapping[str, float]], columns: Sequence[str], latency: pd.DataFrame | None = None) -> str:
    """Retrievers side by side (rows), one column per metric, best value per column in bold.

    The better direction of each column comes from the metric registry (lower latency, not-found rate,
    rank and best-match position are better); a column with no direction (a count) has no bold value.
    Given the latency spread, the latency columns bold only the retriever faster beyond it
    (:func:`~retrieval_pipeline.core.evaluation.latency.fastest`), and a last column shows each spread.

    Args:
        metrics: ``{retriever: {metric name: value}}``, e.g. :func:`~retrieval_pipeline.core.evaluation.metrics.aggregate` per retriever.
        columns: Registered metric names, in table order (e.g. :func:`~retrieval_pipeline.core.evaluation.metrics.registry.headline_columns`).
        latency: :func:`~retrieval_pipeline.core.evaluation.latency.latency_spread` of the same retrievers.

    Returns:
        A markdown table with a ``retriever`` column first.

    Raises:
        KeyError: If a column is not in the metric registry (the message lists the known names).
    """
    directions = {col: higher_is_better(col) for col in columns}  # raises on an unknown column, even an empty one
    frame = pd.DataFrame({r: {c: m.get(c) for c in columns} for r, m in metrics.items()}).T
    out = frame.copy().astype(object)
    crowned = fastest(latency) if latency is not None else None
    for col, higher in directions.items():
        values = frame[col].astype(float)
        if values.notna().any():
            out[col] = _crowned_cells(values, crowned) if latency is not None and is_latency(col) else _cells(values, higher)
    if latency is not None and len(latency):
        spreads = {r["retriever"]: spread_text(r) for r in latency.to_dict("records")}
        out["latency spread"] = [spreads.get(str(r), "–") for r in out.index]
    out.index.name = "retriever"
    return out.reset_index().to_markdown(index=False)


def _crowned_cells(values: pd.Series, crowned: str | None) -> list[str]:
    """The values with 3 decimals, the ``crowned`` retriever's in bold (a latency column: none within the spread)."""
    return [f"**{v:.3f}**" if name == crowned else f"{v:.3f}" for name, v in values.items()]


def _cells(values: pd.Series, higher: bool | None) -> list[str]:
    """The values with 3 decimals, the best one in bold (none when the metric has no better direction)."""
    best = None if higher is None else (values.max() if higher else values.min())
    return [f"**{v:.3f}**" if v == best else f"{v:.3f}" for v in values]


#: Marks of a retriever's metric against the baseline: significantly better, significantly worse.
SIGNIFICANCE_MARKS = {"better": "▲", "worse": "▼"}


def significance_cell(row: Mapping) -> str:
    """``"0.436 [0.340, 0.532] ▲"``: the mean, its CI, and a mark when significantly better/worse than the baseline."""
    text = f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    mark = SIGNIFICANCE_MARKS.get(row.get("direction") or "", "") if row.get("significant") else ""
    return f"{text} {mark}".rstrip()


def significance_md(table: pd.DataFrame, settings: Any) -> str:
    """The significance table as one compact markdown table: retrievers x metrics, then the legend."""
    if table.empty:
        return "_no queries evaluated_"
    metrics = list(dict.fromkeys(table["metric"]))
    cells = {(r["retriever"], r["metric"]): significance_cell(r) for r in table.to_dict("records")}
    retrievers = list(dict.fromkeys(table["retriever"]))
    notes = {r["retriever"]: r["note"] for r in table.to_dict("records") if r.get("note")}
    frame = pd.DataFrame(
        [[r, *(cells.get((r, m), "") for m in metrics), notes.get(r, "")] for r in retrievers], columns=["retriever", *metrics, "note"]
    )
    legend = (
        f"\n\nmean [{settings.confidence:.0%} CI: paired percentile bootstrap over queries, {settings.n_bootstrap} resamples, seed {settings.seed}]; "
        f"{SIGNIFICANCE_MARKS['better']} / {SIGNIFICANCE_MARKS['worse']}: significantly better / worse than the baseline "
        f"(Fisher randomisation test, {settings.n_permutations} permutations, Holm-corrected across retrievers per metric, "
        f"alpha {settings.alpha:g})."
    )
    return frame.to_markdown(index=False) + legend


def significance_metadata(table: pd.DataFrame, settings: Any) -> dict[str, Any]:
    """Metadata of the ``metric_significance`` asset: the compact table and the counts behind it."""
    tested = table[table["p_randomisation"].notna()] if not table.empty else table
    return {
        "comparison": Markdown(significance_md(table, settings)),
        "queries": int(table["n_queries"].max()) if not table.empty else 0,
        "comparisons_tested": len(tested),
        "significant": int(tested["significant"].fillna(False).astype(bool).sum()) if not tested.empty else 0,
    }


def pairs_md(pairs: pd.DataFrame, retrievers: Sequence[str], settings: Any) -> str:
    """The verdict line of each metric, then one matrix per metric: row against column, ``delta [CI], p`` (Holm).

    Significant cells are bold; the legend names the test, the correction and the settings.
    """
    if pairs.empty:
        return "_fewer than two retrievers: nothing to compare_"
    verdicts = metric_verdicts(pairs, limit=WINS_SPELLED_OUT, fold_ties=TIES_SPELLED_OUT)
    parts = ["\n".join(f"- {line}" for line in verdicts.values())]
    for name in verdicts:
        cells = {}
        for pair in pairs[pairs["metric"] == name].to_dict("records"):
            for seen in (pair, flip(pair)):
                text = matrix_cell(seen)
                cells[seen["a"], seen["b"]] = f"**{text}**" if seen["significant"] else text
        rows = [[r, *("–" if r == c else cells.get((r, c), "") for c in retrievers)] for r in retrievers]
        table = pd.DataFrame(rows, columns=[f"{metric_label(name)}: row − column", *retrievers])
        parts.append(table.to_markdown(index=False))
    parts.append(
        f"Cells: mean per-query difference, row minus column, [{settings.confidence:.0%} paired percentile bootstrap CI, "
        f"{settings.n_bootstrap} resamples], Holm-corrected p of Fisher's randomisation test ({settings.n_permutations} "
        f"sign flips) over the pairs of each metric; bold: significant at alpha {settings.alpha:g}; "
        f"fewer than {settings.min_queries_for_test} queries: no test."
    )
    return "\n\n".join(parts)


def pairs_metadata(pairs: pd.DataFrame, retrievers: Sequence[str], settings: Any) -> dict[str, Any]:
    """Metadata of the ``retriever_pairs`` asset: the verdicts and matrices, and the counts behind them."""
    tested = pairs[pairs["p"].notna()]
    return {
        "comparison": Markdown(pairs_md(pairs, retrievers, settings)),
        "pairs": len(pairs),
        "pairs_tested": len(tested),
        "significant": int(tested["significant"].astype(bool).sum()),
    }
