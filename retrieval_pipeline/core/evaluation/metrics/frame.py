"""Retrieval metrics from a run and qrels: one row per query, then the means.

Conventions (each checked against a reference library in ``test_metrics.py``):

* **Relevance** is ``grade >= 1``. Grade-0 entries are judged non-relevant; only nDCG uses the grade
  itself, as the gain. This matches trec_eval's default relevance level and ranx.
* **Ranking** is the run's list order; scores are ignored. The run is already sorted best first and
  ties have already been broken by the retriever. trec_eval, pytrec_eval and ranx re-sort by score
  instead (trec_eval breaks ties by doc id, descending), so the two agree only when no scores tie.
  The parity tests therefore use runs with strictly decreasing scores.
* **Which queries count**: every query in the qrels, and only those. A query missing from the run, or
  with an empty hit list, scores 0 on every metric and counts as not found. This is the ir_measures
  convention (and ranx's with ``make_comparable=True``). pytrec_eval leaves such queries out of its
  output, which would raise the mean. Run queries that are not in the qrels are ignored.
* A query whose qrels hold no relevant document (only grade 0) scores 0 everywhere, as it does in
  pytrec_eval; its ``n_relevant`` is 0, so it is easy to spot.

The formulas are the registry's (:func:`~retrieval_pipeline.core.evaluation.metrics.registry.compute_metric`,
each written out beside its entry in :mod:`~retrieval_pipeline.core.evaluation.metrics.families`); this
module judges the run against the qrels, computes every column through them, and aggregates. The columns
are the entries with a ``frame`` (in registry order), each at the cut-offs of the argument it names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.metrics.judging import judge
from retrieval_pipeline.core.evaluation.metrics.registry import METRICS, compute_metric, is_metric_column, metric_descriptions


def _check_cutoffs(cutoffs: Sequence[int]) -> None:
    bad = [k for k in cutoffs if not isinstance(k, (int, np.integer)) or k < 1]
    if bad:
        raise ValueError(f"metric cutoffs must be integers >= 1, got {bad}")


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def per_query_metrics(
    run: Run,
    qrels: Qrels,
    ks: Sequence[int] = (1, 5, 10),
    ndcg_k: int = 10,
    f1_k: int = 5,
    precision_ks: Sequence[int] = (5,),
) -> pd.DataFrame:
    """Score every query in the qrels against the run.

    See the module docstring for the conventions (relevance ``grade >= 1``, run order as the ranking,
    missing queries score 0). Each metric's formula is in :mod:`~retrieval_pipeline.core.evaluation.metrics.families`.

    Args:
        run: ``{query_id: [(doc_id, score), ...]}``, best first. Doc ids must be unique per query.
        qrels: ``{query_id: {doc_id: grade}}``; must not be empty.
        ks: Cutoffs for ``hit_rate@k`` and ``recall@k``.
        ndcg_k: Cutoff for ``ndcg@k``.
        f1_k: Cutoff for ``f1@k`` (the harmonic mean of precision@k and recall@k).
        precision_ks: Cutoffs for ``precision@k``.

    Returns:
        One row per qrels query, in qrels order, with columns ``query_id``, ``n_relevant``,
        ``hit_rate@k`` and ``recall@k`` for each k in ``ks``, ``precision@k`` for each k in
        ``precision_ks``, ``f1@{f1_k}``, ``mrr``, ``ndcg@{ndcg_k}``, ``found`` (any relevant document
        anywhere in the run) and ``first_relevant_rank`` (1-based, NaN when not found).

    Raises:
        ValueError: If ``qrels`` is empty, a cutoff is not a positive integer, or a query's run lists
            a doc id twice.
    """
    if not qrels:
        raise ValueError("qrels is empty: there are no queries to evaluate (need {query_id: {doc_id: grade}})")
    _check_cutoffs([*ks, *precision_ks, ndcg_k, f1_k])
    judged = judge(run, qrels, max([*ks, *precision_ks, ndcg_k, f1_k]), ndcg_k)
    cutoffs = {"ks": ks, "precision_ks": precision_ks, "f1_k": (f1_k,), "ndcg_k": (ndcg_k,), "plain": (None,)}
    names = [info.concrete_name(k) for info in METRICS if info.frame for k in cutoffs[info.frame]]
    columns: dict[str, object] = {"query_id": list(qrels), "n_relevant": judged.n_relevant}
    columns |= {name: compute_metric(name, judged) for name in names}
    columns["found"] = ~np.isnan(judged.first_relevant_rank)
    columns["first_relevant_rank"] = judged.first_relevant_rank
    return pd.DataFrame(columns)


def aggregate(per_query: pd.DataFrame, latencies_ms: Sequence[float] | None = None) -> dict[str, float]:
    """Means over queries of a :func:`per_query_metrics` frame, plus not-found and latency figures.

    Which columns are averaged comes from :mod:`~retrieval_pipeline.core.evaluation.metrics.registry`: every
    ``per_query`` metric column (``hit_rate@k``, ``recall@k``, ``precision@k``, ``f1@k``, ``mrr``,
    ``ndcg@k``, the context-QA and LLM-judge columns) is averaged over the queries where it is not NaN;
    bookkeeping columns (``query_id``, ``found``, ``retriever``, ...) are not. Further keys:
    ``not_found`` (count of queries with no relevant document anywhere in the run); ``not_found_rate``
    (``not_found / n_queries``); ``avg_rank_when_found`` (mean ``first_relevant_rank`` over found
    queries, NaN if none was found); ``n_queries``. With latencies: ``latency_mean_ms`` and
    ``latency_p95_ms`` (``numpy.percentile(latencies, 95)``, linear interpolation between the closest ranks).

    Args:
        per_query: Output of :func:`per_query_metrics` (or a frame with the same bookkeeping columns and
            any registered metric columns).
        latencies_ms: Optional per-query search latencies in milliseconds.

    Returns:
        ``{metric_name: value}`` as plain Python numbers.

    Raises:
        ValueError: If ``per_query`` has no rows, or ``latencies_ms`` is given but empty.
        KeyError: If a column is not in the metric registry (the message lists the known names).
    """
    if per_query.empty:
        raise ValueError("per_query has no rows: nothing to aggregate")
    metric_columns = [c for c in per_query.columns if is_metric_column(c)]
    result: dict[str, float] = {c: float(per_query[c].astype(float).mean()) for c in metric_columns}
    found = per_query["found"].astype(bool)
    result["not_found"] = int((~found).sum())
    result["not_found_rate"] = float((~found).mean())
    ranks = per_query.loc[found, "first_relevant_rank"]
    result["avg_rank_when_found"] = float(ranks.mean()) if len(ranks) else float("nan")
    result["n_queries"] = len(per_query)
    if latencies_ms is not None:
        result |= _latency_summary(latencies_ms)
    return result


def _latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """Mean and 95th percentile (numpy's default linear interpolation) of latencies in ms."""
    values = np.asarray(latencies_ms, dtype=float)
    if values.size == 0:
        raise ValueError("latencies_ms is empty; pass None when latencies were not measured")
    return {"latency_mean_ms": float(values.mean()), "latency_p95_ms": float(np.percentile(values, 95))}


# --------------------------------------------------------------------------------------------------
# Descriptions: the registry's, at the default cut-offs
# --------------------------------------------------------------------------------------------------

#: One sentence per metric name at the default cut-offs (use :func:`describe_metric` for others).
METRIC_DESCRIPTIONS: dict[str, str] = metric_descriptions()
