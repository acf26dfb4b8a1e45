"""What the Dagster UI shows of a report: a compact Markdown table with small inline charts, and the headline means."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_pipeline.core.evaluation.metrics import headline_columns, view_columns
from retrieval_pipeline.core.report.charts import chart_pngs
from retrieval_pipeline.core.report.data import ReportData, _number, _true
from retrieval_pipeline.core.report.html import fmt, fmt_metric, significance_rows

#: The metrics of the compact table (the registry's ``summary`` view).
SUMMARY_METRICS: tuple[str, ...] = tuple(view_columns("summary"))
#: Resolution of the inline charts (small: Dagster keeps metadata in its database).
SUMMARY_DPI = 60


def summary_table_markdown(data: ReportData, metrics: Sequence[str] = SUMMARY_METRICS) -> str:
    """A compact markdown table: retrievers (rows) by a few headline metrics, ``mean [low, high]`` and ▲/▼ marks."""
    columns = [m for m in metrics if m in data.metrics.columns]
    if not len(data.metrics) or not columns:
        return "_no metric table_"
    sig = significance_rows(data)
    table = data.metrics.assign(retriever=data.metrics["retriever"].astype(str)).set_index("retriever")
    lines = ["| retriever | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for r in data.retriever_order():
        if r not in table.index:
            continue
        cells = []
        for m in columns:
            row = sig.get((r, m))
            text = fmt_metric(m, row["mean"] if row is not None and _number(row.get("mean")) is not None else table.at[r, m])
            if row is not None and _number(row.get("ci_low")) is not None and _number(row.get("ci_high")) is not None:
                text += f" [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]"
            mark = (
                {"better": " ▲", "worse": " ▼"}.get(str(row.get("direction"))) if row is not None and _true(row.get("significant")) else ""
            )
            cells.append(text + (mark or ""))
        name = r.replace("|", "\\|") + (" (baseline)" if r == data.baseline else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_markdown(data: ReportData, charts: Sequence[str] = ("bars", "ranks"), max_bytes: int = 300_000, dpi: int = SUMMARY_DPI) -> str:
    """The compact comparison table and up to ``charts`` as inline base64 PNG images, kept under ``max_bytes``.

    Charts that would push the text past ``max_bytes`` are left out (the table always stays), with a line saying so.
    """
    table = summary_table_markdown(data)
    legend = (
        f"\n\n▲/▼: significantly better/worse than the baseline (randomisation test, Holm-corrected over every pair of"
        f" retrievers, α = {data.alpha:g}); brackets: {data.confidence:.0%} CIs of the mean, unadjusted."
    )
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
