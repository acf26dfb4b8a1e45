"""The formulas of the ranking metrics: one function per metric family, vectorised over queries.

Each family formula takes a :class:`Judged` (a ranking judged against the qrels, one row per query)
and a cut-off ``k`` (None: the ranking's full depth) and returns one value per query. The metric
registry (:mod:`retrieval_pipeline.core.metric_registry`) names the formula of each metric, and every
caller computes through it: the evaluation's per-query frame, the fusion sweep, and the public API.

Conventions (checked against trec_eval, pytrec_eval and ranx in the evaluation tests):

* **Relevance** is ``grade >= 1`` (:data:`RELEVANCE_THRESHOLD`). Grade-0 entries are judged
  non-relevant; only nDCG uses the grade itself, as the gain.
* **Ranking** is column order: rank 1 in column 0. How a run becomes that order (list order, or
  trec_eval's sort by score) is the caller's.

Notation in the docstrings: for one query, ``rel_i`` is 1 when the document at rank ``i`` (1-based) is
relevant and 0 otherwise, ``g_i`` is its grade (0 when not relevant), and ``R`` is the number of
relevant documents in the qrels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Lowest grade that counts as relevant (trec_eval's default ``-l 1``).
RELEVANCE_THRESHOLD = 1


@dataclass(frozen=True)
class Judged:
    """A ranking judged against the qrels: one row per query, rank 1 in column 0.

    Attributes:
        gains: ``(n_queries, depth)``: the grade at each rank when relevant, else 0 (also past a query's last hit).
        ideal_gains: ``(n_queries, >= deepest nDCG cut-off)``: the qrels' relevant grades, best first, then 0.
        n_relevant: ``(n_queries,)``: ``R``, the number of relevant documents in the qrels.
        first_relevant_rank: ``(n_queries,)``: 1-based rank of the first relevant document over the whole
            ranking (it may lie deeper than ``depth``), NaN when none.
    """

    gains: np.ndarray
    ideal_gains: np.ndarray
    n_relevant: np.ndarray
    first_relevant_rank: np.ndarray

    @property
    def relevant(self) -> np.ndarray:
        """Boolean relevance by rank, ``(n_queries, depth)``."""
        return self.gains > 0

    @property
    def depth(self) -> int:
        """How many ranks the arrays hold: the cut-off of a metric asked for without one."""
        return int(self.gains.shape[1])


#: A family formula: per-query values of the metric at cut-off ``k`` (None: the full depth).
Formula = Callable[[Judged, int | None], np.ndarray]


# --------------------------------------------------------------------------------------------------
# The formulas on arrays
# --------------------------------------------------------------------------------------------------


def hit_rate(relevant: np.ndarray, k: int) -> np.ndarray:
    """Whether any relevant document is in the top ``k`` (trec_eval ``success_k``, ranx ``hit_rate@k``).

    Formula::

        hit_rate@k = 1 if sum(rel_i for i in 1..k) > 0 else 0

    This is not recall. With one relevant document per query it equals ``recall@k``.

    Args:
        relevant: Boolean relevance by rank, shape ``(n_queries, depth)``.
        k: Cutoff rank.

    Returns:
        1.0 or 0.0 per query.
    """
    return relevant[:, :k].any(axis=1).astype(float)


def recall(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Fraction of the relevant documents that are in the top ``k`` (trec_eval ``recall_k``, TREC R@k).

    Formula::

        recall@k = sum(rel_i for i in 1..k) / R        (0 when R = 0)

    Args:
        relevant: Boolean relevance by rank, shape ``(n_queries, depth)``.
        n_relevant: ``R`` per query.
        k: Cutoff rank.

    Returns:
        Recall per query, in [0, 1].
    """
    retrieved = relevant[:, :k].sum(axis=1)
    return np.divide(retrieved, n_relevant, out=np.zeros(len(retrieved)), where=n_relevant > 0)


def precision(relevant: np.ndarray, k: int) -> np.ndarray:
    """Fraction of the top ``k`` that is relevant (trec_eval ``P_k``).

    Formula::

        precision@k = sum(rel_i for i in 1..k) / k

    The divisor is always ``k``, even when fewer than ``k`` documents were retrieved (as in trec_eval).

    Args:
        relevant: Boolean relevance by rank, shape ``(n_queries, depth)``.
        k: Cutoff rank.

    Returns:
        Precision per query, in [0, 1].
    """
    return relevant[:, :k].sum(axis=1) / k


def f1(precision_at_k: np.ndarray, recall_at_k: np.ndarray) -> np.ndarray:
    """Harmonic mean of precision@k and recall@k (ranx ``f1@k``).

    Formula::

        f1@k = 2 * precision@k * recall@k / (precision@k + recall@k)        (0 when both are 0)

    Args:
        precision_at_k: Precision@k per query.
        recall_at_k: Recall@k per query, same ``k``.

    Returns:
        F1 per query, in [0, 1].
    """
    total = precision_at_k + recall_at_k
    product = 2.0 * precision_at_k * recall_at_k
    return np.divide(product, total, out=np.zeros(len(total)), where=total > 0)


def reciprocal_rank(first_relevant_rank: np.ndarray) -> np.ndarray:
    """Reciprocal of the rank of the first relevant document, over the whole run (trec_eval ``recip_rank``).

    Formula::

        rr = 1 / min(i : rel_i = 1)        (0 when no relevant document was retrieved)
        mrr = mean of rr over queries

    There is no cutoff: the run's full depth counts. The mean over queries is the MRR.

    Args:
        first_relevant_rank: 1-based rank per query, NaN when not found.

    Returns:
        Reciprocal rank per query, in [0, 1].
    """
    found = ~np.isnan(first_relevant_rank)
    return np.divide(1.0, first_relevant_rank, out=np.zeros(len(found)), where=found)


def ndcg(gains: np.ndarray, ideal_gains: np.ndarray, k: int) -> np.ndarray:
    """Normalised discounted cumulative gain at ``k`` (trec_eval ``ndcg_cut_k``, ranx ``ndcg@k``).

    Formula::

        DCG@k  = sum(g_i / log2(i + 1) for i in 1..k)
        nDCG@k = DCG@k / IDCG@k        (0 when IDCG@k = 0)

    The gain is the grade itself (Järvelin & Kekäläinen, as in trec_eval), not ``2^g - 1``. IDCG@k is
    the DCG@k of the qrels' relevant grades sorted best first, so relevant documents the run never
    retrieved still lower the score. 0 when IDCG@k is 0.

    Args:
        gains: Grade by rank (0 when not relevant), shape ``(n_queries, depth)``, ``depth >= k``.
        ideal_gains: Relevant grades from the qrels sorted descending, shape ``(n_queries, >= k)``.
        k: Cutoff rank.

    Returns:
        nDCG per query, in [0, 1].
    """
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = gains[:, :k] @ discounts
    idcg = ideal_gains[:, :k] @ discounts
    return np.divide(dcg, idcg, out=np.zeros(len(dcg)), where=idcg > 0)


def average_precision(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Average precision at ``k`` (trec_eval ``map`` over the full run, ``map_cut_k``).

    Formula::

        AP@k = sum(precision@i * rel_i for i in 1..k) / R        (0 when R = 0)
    """
    hits = relevant[:, :k].astype(float)
    precision_at = np.cumsum(hits, axis=1) / np.arange(1, hits.shape[1] + 1)
    total = (precision_at * hits).sum(axis=1)
    return np.divide(total, n_relevant, out=np.zeros(len(total)), where=n_relevant > 0)


def r_precision(relevant: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """Precision at rank R, R being each query's number of relevant documents (trec_eval ``Rprec``).

    Formula::

        R-prec = sum(rel_i for i in 1..R) / R        (0 when R = 0)
    """
    within = np.arange(relevant.shape[1]) < n_relevant[:, None]
    retrieved = (relevant & within).sum(axis=1)
    return np.divide(retrieved, n_relevant, out=np.zeros(len(retrieved)), where=n_relevant > 0)


# --------------------------------------------------------------------------------------------------
# The family formulas the registry names: (judged ranking, cut-off) -> per-query values
# --------------------------------------------------------------------------------------------------


def _cut(judged: Judged, k: int | None) -> int:
    return judged.depth if k is None else k


def hit_rate_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`hit_rate` of the top ``k``."""
    return hit_rate(judged.relevant, _cut(judged, k))


def recall_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`recall` of the top ``k``."""
    return recall(judged.relevant, judged.n_relevant, _cut(judged, k))


def precision_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`precision` of the top ``k``."""
    return precision(judged.relevant, _cut(judged, k))


def f1_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`f1` of precision and recall of the top ``k``."""
    return f1(precision_at(judged, k), recall_at(judged, k))


def reciprocal_rank_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`reciprocal_rank` over the whole ranking (``k`` None), or of the top ``k`` (0 when the first relevant is deeper)."""
    first = judged.first_relevant_rank
    return reciprocal_rank(first if k is None else np.where(first <= k, first, np.nan))


def ndcg_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`ndcg` of the top ``k``."""
    return ndcg(judged.gains, judged.ideal_gains, _cut(judged, k))


def average_precision_at(judged: Judged, k: int | None) -> np.ndarray:
    """:func:`average_precision` of the top ``k``."""
    return average_precision(judged.relevant, judged.n_relevant, _cut(judged, k))


def r_precision_of(judged: Judged, k: int | None = None) -> np.ndarray:
    """:func:`r_precision` (no cut-off: each query is cut at its ``R``; the arrays must be at least ``R`` deep)."""
    return r_precision(judged.relevant, judged.n_relevant)
