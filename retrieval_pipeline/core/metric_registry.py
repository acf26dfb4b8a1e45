"""The metric registry: every metric and per-query column the pipeline produces, declared once.

Each :class:`MetricInfo` entry says what a name means (one sentence), which direction is better, how
it is aggregated over queries, whether it is a per-query metric, a summary figure of
:func:`~retrieval_pipeline.core.evaluation.metrics.aggregate` or a bookkeeping column, whether it is a
headline metric (a column of the retriever comparison table), which shorter lists show it
(:data:`View`: the console, the report's summary and charts, the fusion sweep), whether the fusion sweep
may tune on it, and its formula (:mod:`retrieval_pipeline.core.metric_formulas`) when it is computed from
a judged ranking. Names with a cut-off are patterns: ``hit_rate@{k}`` covers ``hit_rate@1``,
``hit_rate@20``, ... (``k`` is an integer >= 1).

Adding a metric is adding one entry to :data:`METRICS`. Then :func:`~retrieval_pipeline.core.evaluation.metrics.aggregate`
averages it (``kind="per_query"``), reports bold its best value in the right direction, the UI shows
its description, dataset thresholds may name it, and with a formula the public API and (flagged
``objective``) the fusion sweep compute it. A per-query column missing from the registry makes
``aggregate`` raise, so a new column cannot be dropped from the aggregates silently.

The headline columns (:data:`HEADLINE_COLUMNS`) follow the order of :data:`METRICS`, and within an
entry the order of its ``headline`` cut-offs. A view (:func:`view_columns`) lists the console's
columns first, then its others, each in that order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from retrieval_pipeline.core import metric_formulas as formulas
from retrieval_pipeline.core.metric_formulas import Formula, Judged
from retrieval_pipeline.core.metric_info import K_SUFFIX, VIEWS, Aggregation, MetricInfo, View, entry_problems

#: Cut-offs :data:`~retrieval_pipeline.core.evaluation.metrics.METRIC_DESCRIPTIONS` lists for each ``@{k}`` pattern.
DEFAULT_KS: tuple[int, ...] = (1, 5, 10)

_CUTOFF = re.compile(r"[1-9][0-9]*")
_REGISTRY_PATH = "retrieval_pipeline/core/metric_registry.py"


def _at_k(
    name: str,
    description: str,
    aggregation: Aggregation,
    headline: tuple[int, ...] = (),
    *,
    higher: bool = True,
    formula: Formula | None = None,
    objective: tuple[int, ...] = (),
    views: Mapping[View, tuple[int, ...]] | None = None,
    label: str = "",
) -> MetricInfo:
    """A per-query metric with a cut-off."""
    return MetricInfo(f"{name}{K_SUFFIX}", description, higher, aggregation, "per_query", headline, formula, objective, views or {}, label)


def _summary(
    name: str, description: str, aggregation: Aggregation, higher: bool | None, *, headline: bool = False, summary: bool = False
) -> MetricInfo:
    """A figure that only ``aggregate`` produces (``summary``: in the report's summary table)."""
    return MetricInfo(name, description, higher, aggregation, "summary", headline, views={"summary": True} if summary else {})


def _bookkeeping(name: str, description: str) -> MetricInfo:
    """A per-query column that is not a metric."""
    return MetricInfo(name, description, None, "none", "bookkeeping")


#: Every metric and column, in headline order for the headline ones.
METRICS: tuple[MetricInfo, ...] = (
    # --- ranking metrics (core.metrics.per_query_metrics), then the context-QA ones between mrr and ndcg
    _at_k(
        "hit_rate",
        "Share of queries with at least one relevant document in the top {k} (TREC Success@{k}); "
        "with one relevant document per query it equals recall@{k}.",
        "rate",
        (1, 5, 10),
        formula=formulas.hit_rate_at,
        objective=(1, 5, 10),
        views={"console": (1, 5), "summary": (1, 5), "chart": (5,), "sweep": (1, 5)},
        label="hit@{k}",
    ),
    _at_k(
        "recall",
        "Mean fraction of each query's relevant documents found in the top {k} (TREC R@{k}); "
        "with one relevant document per query it equals hit_rate@{k}.",
        "mean",
        (5, 10),
        formula=formulas.recall_at,
        objective=(1, 5, 10),
        views={"sweep": (10,)},
    ),
    _at_k(
        "precision",
        "Mean fraction of the top {k} results that are relevant, always divided by {k} (TREC P@{k}).",
        "mean",
        (5,),
        formula=formulas.precision_at,
        objective=(5,),
    ),
    _at_k(
        "f1",
        "Mean harmonic mean of precision@{k} and recall@{k} per query (0 when both are 0).",
        "mean",
        (5,),
        formula=formulas.f1_at,
        objective=(5,),
    ),
    MetricInfo(
        "mrr",
        "Mean reciprocal rank of the first relevant document over the run's full depth (0 when none is retrieved).",
        True,
        "mean",
        "per_query",
        True,
        formula=formulas.reciprocal_rank_at,
        objective=True,
        views=dict.fromkeys(VIEWS, True),
        label="MRR",
    ),
    _at_k(
        "context_coverage",
        "Mean best exact similarity of any of the top {k} chunks to the expected context "
        "(0 when nothing was retrieved); unlike hit_rate@{k} it is not cut at the threshold, so near misses show.",
        "mean",
        (5,),
    ),
    _at_k(
        "best_match_position",
        "Mean 1-based position in the top {k} of the chunk most similar to the expected context, "
        "over the queries with a relevant chunk in the top {k} (1 is best).",
        "mean_over_found",
        (5,),
        higher=False,
    ),
    _at_k(
        "ndcg",
        "Mean nDCG@{k}: graded gain (the qrels grade) discounted by log2(rank + 1), "
        "divided by the best achievable from the qrels (trec_eval ndcg_cut).",
        "mean",
        (10,),
        formula=formulas.ndcg_at,
        objective=(10,),
        views=dict.fromkeys(VIEWS, (10,)),
        label="nDCG@{k}",
    ),
    # --- summary figures of core.metrics.aggregate
    _summary(
        "not_found_rate", "Share of queries with no relevant document anywhere in the run.", "rate", False, headline=True, summary=True
    ),
    _summary(
        "avg_rank_when_found",
        "Mean rank of the first relevant document, over the queries where one was found.",
        "mean_over_found",
        False,
        headline=True,
    ),
    _summary("latency_mean_ms", "Mean search latency per query, in milliseconds.", "mean", False, headline=True),
    _summary(
        "latency_p95_ms",
        "95th percentile of search latency per query, in milliseconds (linear interpolation).",
        "p95",
        False,
        headline=True,
    ),
    _summary("not_found", "Number of queries with no relevant document anywhere in the run.", "count", False),
    _summary("n_queries", "Number of evaluated queries (every query in the qrels, retrieved or not).", "count", None),
    # --- other per-query metrics: context-QA (core.context_metrics) and the LLM judge of retrieved results
    _at_k(
        "mrr",
        "Mean reciprocal rank of the first relevant document when it is in the top {k}, else 0 (MRR cut at {k}).",
        "mean",
        formula=formulas.reciprocal_rank_at,
    ),
    _at_k(
        "hit",
        "Same as hit_rate@{k} under the name context-QA reports use: share of queries with a relevant chunk in the top {k}.",
        "rate",
        formula=formulas.hit_rate_at,
    ),
    MetricInfo(
        "judge_quality",
        "Mean LLM-judge score in [0, 1] of how well the retrieved contexts serve the question, over the judged queries.",
        True,
        "mean",
        "per_query",
    ),
    MetricInfo(
        "judge_completeness",
        "Mean LLM-judge score in [0, 1] of how much of what is needed to answer is present "
        "in the retrieved contexts, over the judged queries.",
        True,
        "mean",
        "per_query",
    ),
    MetricInfo(
        "judge_relevance",
        "Mean LLM-judge share in [0, 1] of the retrieved contexts that are on topic, over the judged queries.",
        True,
        "mean",
        "per_query",
    ),
    MetricInfo("judge_pass", "Share of judged queries whose LLM-judge quality reaches the pass mark.", True, "rate", "per_query"),
    # --- further ranking metrics of the public API (retrieval_pipeline.api)
    MetricInfo(
        "ndcg",
        "Mean nDCG over the run's full depth: graded gain discounted by log2(rank + 1), "
        "divided by the best achievable from the qrels (trec_eval ndcg).",
        True,
        "mean",
        "per_query",
        formula=formulas.ndcg_at,
    ),
    _at_k(
        "map",
        "Mean average precision in the top {k}: the precision at each relevant rank up to {k}, summed and divided "
        "by the query's number of relevant documents (trec_eval map_cut_{k}).",
        "mean",
        formula=formulas.average_precision_at,
    ),
    MetricInfo(
        "map",
        "Mean average precision over the run's full depth (trec_eval map).",
        True,
        "mean",
        "per_query",
        formula=formulas.average_precision_at,
    ),
    MetricInfo(
        "r_prec",
        "Mean precision at rank R, R being the query's number of relevant documents (trec_eval Rprec).",
        True,
        "mean",
        "per_query",
        formula=formulas.r_precision_of,
    ),
    # --- bookkeeping columns of the per-query frames
    _bookkeeping("query_id", "Identifier of the query."),
    _bookkeeping("n_relevant", "Number of relevant documents (grade >= 1) the qrels hold for the query."),
    _bookkeeping("found", "Whether any relevant document appears anywhere in the query's run."),
    _bookkeeping("first_relevant_rank", "1-based rank of the first relevant document in the run (empty when not found)."),
    _bookkeeping("retriever", "Name of the retriever that produced the row."),
    _bookkeeping("latency_ms", "Search latency of the query in milliseconds (empty past the latency sample)."),
    _bookkeeping("error", "Why the retriever failed on the query (empty when it did not); a failed query counts as not found."),
    _bookkeeping("top_hits", "Doc ids of the query's top retrieved documents, best first."),
    _bookkeeping("judge", "Name of the LLM judge that scored the row (empty when not judged)."),
    _bookkeeping("judge_error", "Why the LLM judge gave no scores for the row (empty when it did)."),
    _bookkeeping("judge_rationale", "The LLM judge's explanation of its scores."),
)


# --------------------------------------------------------------------------------------------------
# Consistency of the entries, checked once at import
# --------------------------------------------------------------------------------------------------


def _index(entries: Sequence[MetricInfo]) -> dict[str, MetricInfo]:
    """``{name or pattern: entry}``; raises ValueError on an inconsistent or duplicate entry."""
    index: dict[str, MetricInfo] = {}
    for info in entries:
        problems = entry_problems(info) + (["duplicate name"] if info.name in index else [])
        if problems:
            raise ValueError(f"metric registry entry {info.name!r}: " + "; ".join(problems))
        index[info.name] = info
    return index


_BY_NAME: dict[str, MetricInfo] = _index(METRICS)

#: The comparison-table columns, in order.
HEADLINE_COLUMNS: tuple[str, ...] = tuple(name for info in METRICS for name in info.headline_names)


# --------------------------------------------------------------------------------------------------
# Looking names up
# --------------------------------------------------------------------------------------------------


def known_metric_names() -> list[str]:
    """Every registered name or pattern (``hit_rate@{k}``, ``mrr``, ...), in registry order."""
    return [info.name for info in METRICS]


class UnknownMetricError(KeyError):
    """A name that is not in the registry; the message lists the known names and patterns."""

    def __init__(self, name: object) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        hint = _hint(self.name)
        return (
            f"unknown metric {self.name!r}{hint}. Known metrics ({{k}} is a cut-off >= 1): "
            f"{', '.join(known_metric_names())}. New metrics are one entry in METRICS in {_REGISTRY_PATH}."
        )


def _hint(name: object) -> str:
    """Why a near miss is refused (``recall`` needs a cut-off, ``mrr`` takes none, ``hit_rate@0``)."""
    if not isinstance(name, str):
        return " (metric names are strings)"
    base, at, k = name.partition("@")
    if not at and f"{base}{K_SUFFIX}" in _BY_NAME:
        return f" ({base} needs a cut-off: {base}@k, e.g. {base}@5)"
    if at and f"{base}{K_SUFFIX}" in _BY_NAME:
        return f" (the cut-off must be an integer >= 1, got {k!r})"
    if at and base in _BY_NAME:
        return f" ({base} takes no cut-off)"
    return ""


def resolve_metric(name: str) -> tuple[MetricInfo, int | None]:
    """The registry entry of a concrete name and its cut-off (``"ndcg@20"`` -> ``(ndcg@{k} entry, 20)``).

    Args:
        name: A concrete metric or column name such as ``"hit_rate@5"`` or ``"mrr"``.

    Returns:
        The entry and the cut-off (None for a name without one).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    if isinstance(name, str):
        base, at, k = name.partition("@")
        if not at and name in _BY_NAME:
            return _BY_NAME[name], None
        if at and _CUTOFF.fullmatch(k) and f"{base}{K_SUFFIX}" in _BY_NAME:
            return _BY_NAME[f"{base}{K_SUFFIX}"], int(k)
    raise UnknownMetricError(name)


def metric(name: str) -> MetricInfo:
    """The registry entry of a concrete name (``"ndcg@20"`` resolves through ``ndcg@{k}``).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    return resolve_metric(name)[0]


def describe_metric(name: str) -> str:
    """One-sentence description of a concrete name, for any cut-off (``"recall@20"``, ``"mrr"``, ...).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    info, k = resolve_metric(name)
    return info.describe(k)


def higher_is_better(name: str) -> bool | None:
    """Whether a larger value of ``name`` is better; None when no direction applies (counts, bookkeeping).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    return metric(name).higher_is_better


def is_metric_column(name: str) -> bool:
    """Whether ``name`` is a per-query metric column that ``aggregate`` averages (False for bookkeeping).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered, so an
            unregistered column is never skipped silently.
    """
    return metric(name).kind == "per_query"


def headline_columns(available: Iterable[str] | None = None) -> list[str]:
    """The comparison-table columns in headline order, keeping only those in ``available`` when given.

    Args:
        available: The columns at hand (e.g. a metric table's ``columns``); None for all of them.

    Returns:
        Headline names such as ``["hit_rate@1", "hit_rate@5", ..., "latency_p95_ms"]``.
    """
    if available is None:
        return list(HEADLINE_COLUMNS)
    present = set(available)
    return [name for name in HEADLINE_COLUMNS if name in present]


def view_columns(view: View, available: Iterable[str] | None = None) -> list[str]:
    """The names ``view`` shows: the console's columns first, then the others, each in registry order.

    Args:
        view: One of :data:`VIEWS`.
        available: The columns at hand; None for all of the view's names.

    Returns:
        Concrete names such as ``["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@10"]`` (the sweep's).

    Raises:
        ValueError: If ``view`` is not one of :data:`VIEWS`.
    """
    if view not in VIEWS:
        raise ValueError(f"unknown metric view {view!r}; the views are {list(VIEWS)}")
    names = [name for info in METRICS for name in info.view_names(view)]
    console = {name for info in METRICS for name in info.view_names("console")}
    ordered = [n for n in names if n in console] + [n for n in names if n not in console]
    present = None if available is None else set(available)
    return [name for name in ordered if present is None or name in present]


def metric_label(name: str) -> str:
    """The console's short header of a concrete name (``"hit_rate@5"`` -> ``"hit@5"``); the name when it has none.

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    info, k = resolve_metric(name)
    return info.label.format(k=k) if info.label else name


def tuning_objectives() -> list[str]:
    """The names the fusion sweep may tune on (``hit_rate@1``, ..., ``mrr``, ``ndcg@10``), in registry order."""
    return [name for info in METRICS for name in info.objective_names]


def compute_metric(name: str, judged: Judged) -> np.ndarray:
    """Per-query values of a concrete name on a judged ranking, by the entry's formula.

    Args:
        name: A registered name with a formula, e.g. ``"ndcg@20"``, ``"mrr"``, ``"map"``.
        judged: The ranking judged against the qrels (its ``gains`` at least as deep as the cut-off).

    Returns:
        One value per row of ``judged``.

    Raises:
        UnknownMetricError: If ``name`` is not registered.
        ValueError: If the entry has no formula (it is computed otherwise, or is not a per-query metric).
    """
    info, k = resolve_metric(name)
    if info.formula is None:
        with_formula = ", ".join(i.name for i in METRICS if i.formula is not None)
        raise ValueError(f"{name!r} is not computed from a ranking; these are: {with_formula}")
    return info.formula(judged, k)


def metric_descriptions(ks: Sequence[int] = DEFAULT_KS) -> dict[str, str]:
    """``{concrete name: description}`` for every entry, each ``@{k}`` pattern at the cut-offs ``ks``."""
    return {info.concrete_name(k): info.describe(k) for info in METRICS for k in (ks if info.has_cutoff else (None,))}


def metric_definitions_md(columns: Iterable[str]) -> str:
    """A markdown bullet list ``- **name**: description`` for the given concrete names, in their order.

    Raises:
        UnknownMetricError: A KeyError listing the known names, if a column is not registered.
    """
    return "\n".join(f"- **{name}**: {describe_metric(name)}" for name in columns)


def validate_metric_name(name: str, max_k: int | None = None) -> None:
    """Check a metric name from configuration (a threshold, the drift metric) before any run.

    Args:
        name: The concrete name, e.g. ``"hit_rate@5"``.
        max_k: The deepest cut-off that makes sense (the run depth); None for no limit.

    Raises:
        ValueError: If the name is not registered (the message lists the known names), is a bookkeeping
            column rather than a metric, or its cut-off exceeds ``max_k``.
    """
    try:
        info, k = resolve_metric(name)
    except UnknownMetricError as err:
        raise ValueError(str(err)) from None
    if not info.is_metric:
        metrics = ", ".join(i.name for i in METRICS if i.is_metric)
        raise ValueError(f"{name!r} is a bookkeeping column, not a metric; metrics are: {metrics}")
    if max_k is not None and k is not None and k > max_k:
        raise ValueError(f"{name!r} has cut-off {k}, deeper than the run depth {max_k}: use {info.concrete_name(max_k)} or less")
