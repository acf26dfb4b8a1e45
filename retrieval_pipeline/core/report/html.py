"""A self-contained HTML evaluation report per dataset: data in, one HTML string out (no Dagster here).

The report gathers what the evaluation assets produced for one dataset (:class:`~retrieval_pipeline.core.report.data.ReportData`)
and shows, in this order: a header (dataset, queries, baseline, when); the comparison table (each headline metric per
retriever as ``mean [low, high]``, marked when significantly better or worse than the baseline); every retriever against
every other (a verdict line per headline metric, then a matrix per metric of paired deltas with CIs and Holm p); bars with
confidence-interval whiskers; a histogram of the rank of the first relevant document; the fusion sweep
curve; the weekly trend of the headline metrics; the failure buckets; the worst queries with their top hits.

Each section gives a template context; the page is the jinja2 templates in ``templates/`` (``report.html`` and a
template per section), rendered with autoescape on, so every value is escaped on output (queries and documents are
untrusted); markup built here is :class:`~markupsafe.Markup`. The file stands alone: charts
(:mod:`~retrieval_pipeline.core.report.charts`) are PNG images inlined as ``data:`` URIs, the style sheet is inline,
and there is no script. A Content-Security-Policy meta tag forbids scripts and any network fetch, as a second line of
defence behind the escaping. A section without data says so in one line instead of failing.

:func:`summary_markdown` gives a compact table with one or two charts, for the Dagster UI.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timezone
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from retrieval_pipeline.core.evaluation.latency import fastest, is_latency, latency_spread, spread_text
from retrieval_pipeline.core.evaluation.metrics import (
    UnknownMetricError,
    describe_metric,
    headline_columns,
    higher_is_better,
    metric_label,
    resolve_metric,
)
from retrieval_pipeline.core.evaluation.statistics.pairwise import TIES_SPELLED_OUT, WINS_SPELLED_OUT, flip, matrix_cell, metric_verdicts
from retrieval_pipeline.core.report.charts import BAR_METRICS, _sweep_objective, chart_png
from retrieval_pipeline.core.report.data import ReportData, _list, _missing, _number, _true

#: Failure buckets in display order, with their labels (an unknown bucket is shown after these, by its name).
BUCKET_LABELS: dict[str, str] = {
    "vocabulary_mismatch": "vocabulary mismatch",
    "specificity_gap": "specificity gap",
    "distractor_overlap": "distractor overlap",
    "unexplained": "unexplained",
}

_MISSING = "–"
#: What a section gives its template: its context, or ``{"empty": message}`` when it has no data.
Context = dict[str, Any]


def _escape(value: object) -> Markup:
    """Text escaped for HTML (quotes too: the text may land in an attribute); markup passes as it is."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def _code_spans(text: str) -> Markup:
    """Escaped text with its markdown code spans (`` `make adk-env` ``) as ``<code>``; unpaired backticks stay as they are."""
    parts = text.split("`")
    if len(parts) % 2 == 0:
        return _escape(text)
    return Markup("").join(Markup("<code>%s</code>") % _escape(part) if i % 2 else _escape(part) for i, part in enumerate(parts))


def _breakable(name: str) -> Markup:
    """A retriever name with a break opportunity after each ``_`` and ``.`` (keeps 8+ long names within the page width)."""
    return _escape(name).replace("_", Markup("_<wbr>")).replace(".", Markup(".<wbr>"))


@cache
def _environment() -> Environment:
    """The templates of ``templates/``, autoescaped; each value is escaped as :func:`html.escape` does (``finalize``)."""
    environment = Environment(
        loader=PackageLoader("retrieval_pipeline.core.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
        finalize=_escape,
    )
    environment.filters["code_spans"] = _code_spans
    environment.filters["breakable"] = _breakable
    return environment


def fmt(value: object, digits: int = 3) -> str:
    """A number for a table with ``digits`` decimals; a missing value as a dash."""
    number = _number(value)
    return _MISSING if number is None else f"{number:.{digits}f}"


def _fmt_int(value: object) -> str:
    """A count or rank for a table (``94``, not ``94.000``); a missing value as a dash."""
    number = _number(value)
    return _MISSING if number is None else str(round(number))


def fmt_metric(metric: str, value: object) -> str:
    """A metric value: counts as integers (``n_queries``), the rest with 3 decimals."""
    try:
        is_count = resolve_metric(metric)[0].aggregation == "count"
    except UnknownMetricError:
        is_count = False
    return _fmt_int(value) if is_count else fmt(value)


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


def _empty(message: str) -> Context:
    return {"empty": message}


def _chart(data: ReportData, name: str, alt: str, caption: str, empty: str) -> Context:
    png = chart_png(data, name)
    return _empty(empty) if png is None else {"name": name, "alt": alt, "png": png, "caption": caption}


# --------------------------------------------------------------------------------------------------
# Sections: report data -> template context
# --------------------------------------------------------------------------------------------------


def significance_rows(data: ReportData) -> dict[tuple[str, str], Mapping[str, Any]]:
    sig = data.significance
    if not len(sig):
        return {}
    return {(str(r["retriever"]), str(r["metric"])): r for r in sig.to_dict("records")}


def _cell(metric: str, value: object, row: Mapping[str, Any] | None, best: bool) -> Context:
    """One comparison cell: the mean (bold when best), its significance mark (▲ better, ▼ worse) and its interval."""
    mean = row.get("mean") if row is not None and _number(row.get("mean")) is not None else value
    cell: Context = {"text": fmt_metric(metric, mean), "best": best, "direction": None, "ci": None, "spread": None}
    if row is None:
        return cell
    direction = row.get("direction")
    symbol = {"better": "▲", "worse": "▼"}.get(str(direction))
    if _true(row.get("significant")) and symbol is not None:
        p = row.get("p_randomisation_holm")
        held = f" (Holm-adjusted p = {fmt(p, 4)})" if _number(p) is not None else ""
        cell |= {"direction": direction, "symbol": symbol, "mark_title": f"significantly {direction} than the baseline{held}"}
    if _number(row.get("ci_low")) is not None and _number(row.get("ci_high")) is not None:
        cell["ci"] = (fmt(row["ci_low"]), fmt(row["ci_high"]))
    return cell


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


def _notes(data: ReportData) -> list[tuple[str, str]]:
    """The significance notes other than "baseline" (e.g. too few queries for a test): (retrievers, note) each."""
    sig = data.significance
    if not len(sig) or "note" not in sig.columns:
        return []
    notes = sig[sig["note"].notna() & ~sig["note"].astype(str).isin(["", "baseline"])]
    lines = notes.groupby(notes["note"].astype(str), sort=False)["retriever"].unique()
    return [(", ".join(map(str, r)), note) for note, r in lines.items()]


def comparison_section(data: ReportData) -> Context:
    """Headline metrics (rows) per retriever (columns): mean, interval and significance mark vs the baseline."""
    if not len(data.metrics):
        return _empty("No metric table for this dataset.")
    retrievers = data.retriever_order()
    table = data.metrics.assign(retriever=data.metrics["retriever"].astype(str)).set_index("retriever").reindex(retrievers)
    sig = significance_rows(data)
    spread = latency_spread(data.query_results, retrievers)
    spreads = {r["retriever"]: spread_text(r) for r in spread.to_dict("records")}
    rows = []
    for metric in headline_columns(table.columns):
        if is_latency(metric):  # crowned only beyond the spread of the per-query latencies; the spread under the first row
            crowned = fastest(spread)
            best_of = [r == crowned for r in retrievers]
        else:
            best = _best(table[metric], metric)
            best_of = [best is not None and _number(table.at[r, metric]) == best for r in retrievers]
        cells = [_cell(metric, table.at[r, metric], sig.get((r, metric)), b) for r, b in zip(retrievers, best_of)]
        if is_latency(metric) and spreads and not any(row["spread"] for row in rows):
            for r, cell in zip(retrievers, cells):
                cell["spread"] = spreads.get(r)
        rows.append({"metric": metric, "description": _describe(metric), "cells": cells, "spread": is_latency(metric) and bool(spreads)})
    legend = None if data.significance.empty else {"alpha": f"{data.alpha:g}", "confidence": f"{data.confidence:.0%}"}
    return {"retrievers": retrievers, "baseline": data.baseline, "rows": rows, "legend": legend, "notes": _notes(data)}


def _pair_cell(pair: Mapping[str, Any] | None, higher: bool) -> Context:
    """A matrix cell (row against column): ``delta [CI]``, the Holm p, and ``better``/``worse`` when significant."""
    if pair is None:
        return {"text": _MISSING, "p": "", "direction": None, "unadjusted_only": False}
    won = pair["delta"] > 0 if higher else pair["delta"] < 0
    direction = ("better" if won else "worse") if _true(pair["significant"]) else None
    text, comma, p = matrix_cell(pair).rpartition(", ")  # "delta [low, high]", "p = .." or "no test"
    return {"text": text if comma else p, "p": p if comma else "", "direction": direction, "unadjusted_only": unadjusted_only(pair)}


def unadjusted_only(pair: Mapping[str, Any]) -> bool:
    """Whether a pair's unadjusted CI excludes 0 while its Holm-corrected test is not significant (tested, no win).

    The report marks such a cell (†) so an interval never reads as a verdict the corrected test does not give.
    """
    low, high, p_holm = _number(pair.get("ci_low")), _number(pair.get("ci_high")), _number(pair.get("p_holm"))
    if low is None or high is None or p_holm is None or _true(pair.get("significant")):
        return False
    return low > 0 or high < 0


def pairs_section(data: ReportData) -> Context:
    """Every retriever against every other: the verdict line of each headline metric, then its matrix (row minus column)."""
    if not len(data.pairs):
        return _empty("No pairwise comparison for this dataset (fewer than two retrievers, or not computed).")
    retrievers = [r for r in data.retriever_order() if r in set(data.pairs["a"]) | set(data.pairs["b"])]
    verdicts = metric_verdicts(data.pairs, limit=WINS_SPELLED_OUT, fold_ties=TIES_SPELLED_OUT)
    matrices = []
    for metric in verdicts:
        seen = {}
        for pair in data.pairs[data.pairs["metric"] == metric].to_dict("records"):
            seen |= {(pair["a"], pair["b"]): pair, (pair["b"], pair["a"]): flip(pair)}
        higher = higher_is_better(metric) is not False
        rows = [(r, [None if r == c else _pair_cell(seen.get((r, c)), higher) for c in retrievers]) for r in retrievers]
        matrices.append({"metric": metric_label(metric), "description": _describe(metric), "rows": rows})
    notes = sorted({str(n) for n in data.pairs["note"] if isinstance(n, str) and n})
    legend = {"alpha": f"{data.alpha:g}", "confidence": f"{data.confidence:.0%}"}
    return {"verdicts": list(verdicts.values()), "retrievers": retrievers, "matrices": matrices, "notes": notes, "legend": legend}


def bars_section(data: ReportData) -> Context:
    caption = "Whiskers: confidence intervals of the mean." if len(data.significance) else "No intervals known: bars only."
    alt = "bar chart of hit@5, MRR and nDCG@10 per retriever"
    return _chart(data, "bars", alt, caption, f"No metric among {', '.join(BAR_METRICS)} to draw.")


def ranks_section(data: ReportData) -> Context:
    caption = "Queries per rank of the first relevant document; 'not found' = not in the retrieved depth."
    return _chart(data, "ranks", "histogram of the first relevant rank per retriever", caption, "No per-query results for this dataset.")


def sweep_section(data: ReportData) -> Context:
    objective = _sweep_objective(data)
    caption = (
        f"{objective} against the fusion parameter on the dev half (solid, where the value is chosen) and the test half "
        "(dashed, where it is reported); the star marks the chosen value, the dotted line the configured default."
    )
    return _chart(data, "sweep", "fusion sweep curves", caption, "No fusion sweep for this dataset (no hybrid tuned).")


def trend_section(data: ReportData) -> Context:
    weeks = data.trend["week"].nunique() if len(data.trend) else 0
    caption = f"Last value per ISO week over {weeks} week(s) of evaluations."
    return _chart(data, "trend", "weekly trend of the headline metrics", caption, "No past evaluations recorded for this dataset yet.")


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


def buckets_section(data: ReportData) -> Context:
    fb = data.failure_buckets
    if not len(fb):
        return _empty("No failure buckets for this dataset.")
    counts = bucket_counts(fb, data.retriever_order())
    queries = _queries(data)
    examples = []
    for bucket in counts.columns.drop("total"):
        part = _examples(fb[fb["bucket"].astype(str) == bucket], data.examples_per_bucket)
        items = [
            {"retriever": r["retriever"], "query": queries.get(str(r["query_id"]), r["query_id"]), "evidence": r["evidence"]}
            for r in part.to_dict("records")
        ]
        examples.append({"label": BUCKET_LABELS.get(bucket, bucket), "examples": items})
    return {
        "labels": [BUCKET_LABELS.get(c, c) for c in counts.columns],
        "rows": [(r, [int(v) for v in counts.loc[r]]) for r in counts.index],
        "examples": examples,
    }


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


def _doc(doc_id: str, titles: Mapping[str, str], gold: Sequence[str] = ()) -> Context:
    """A document: its id, its label (title or text snippet, see :func:`_label`; None when it has none), whether it is gold."""
    return {"id": doc_id, "title": titles.get(doc_id), "gold": doc_id in gold}


def worst_section(data: ReportData) -> Context:
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
        cards.append(
            {
                "id": qid,
                "query": queries.get(qid, qid),
                "misses": item["misses"],
                "retrievers": item["retrievers"],
                "gold": [_doc(g, titles) for g in gold],
                "rows": [
                    {
                        "retriever": r["retriever"],
                        "rank": _fmt_int(r["first_relevant_rank"]) if _number(r["first_relevant_rank"]) else "not found",
                        "hits": [_doc(str(d), titles, gold) for d in _list(r["top_hits"])[:3]],
                    }
                    for r in rows.to_dict("records")
                ],
            }
        )
    return {"k": data.k, "queries": cards}


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor, heading, context (report data -> template context) and template."""

    key: str
    title: str
    render: Callable[[ReportData], Context]
    template: str


#: The report's sections, in order.
SECTIONS: tuple[Section, ...] = (
    Section("comparison", "Comparison with the baseline", comparison_section, "comparison.html"),
    Section("pairs", "Every retriever against every other", pairs_section, "pairs.html"),
    Section("bars", "Headline metrics with confidence intervals", bars_section, "chart.html"),
    Section("ranks", "Rank of the first relevant document", ranks_section, "chart.html"),
    Section("sweep", "Fusion sweep", sweep_section, "chart.html"),
    Section("trend", "Weekly trend", trend_section, "chart.html"),
    Section("buckets", "Failure buckets", buckets_section, "buckets.html"),
    Section("worst", "Worst queries", worst_section, "worst.html"),
)


# --------------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------------


def _n_queries(data: ReportData) -> str:
    if len(data.query_results):
        return str(data.query_results["query_id"].nunique())
    if len(data.metrics) and "n_queries" in data.metrics.columns:
        return _fmt_int(pd.to_numeric(data.metrics["n_queries"], errors="coerce").max())
    return _MISSING


def build_report(data: ReportData) -> str:
    """The report as one self-contained HTML document (inline CSS and images, no script, no network).

    Args:
        data: The dataset's frames and settings (see :class:`ReportData`).

    Returns:
        The HTML text, sections in :data:`SECTIONS` order after the header.
    """
    when = data.generated_at if data.generated_at.tzinfo else data.generated_at.replace(tzinfo=timezone.utc)
    facts = {
        "queries": _n_queries(data),
        "retrievers": str(len(data.retriever_order())),
        "baseline": data.baseline or _MISSING,
        "generated": when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    sections = [{"key": s.key, "title": s.title, "template": s.template, "context": s.render(data)} for s in SECTIONS]
    page = _environment().get_template("report.html")
    return page.render(dataset=data.dataset, description=data.description, facts=facts, sections=sections) + "\n"
