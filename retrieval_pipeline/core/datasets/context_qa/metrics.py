"""Per-query metrics for context-QA evaluation: ranking metrics plus how well the top k cover the context.

Relevance comes from similarity qrels (:func:`retrieval_pipeline.core.datasets.context_qa.similarity.qrels_from_similarity`);
the ranking metrics are the evaluation's, passed in as ``ranking`` (:class:`~retrieval_pipeline.core.datasets.base.RankingMetrics`,
:func:`retrieval_pipeline.core.evaluation.metrics.per_query_metrics`; same conventions: run order is the ranking, every qrels
query counts, a missing query scores 0). Context coverage and the best match
position use exact similarities (:func:`~retrieval_pipeline.core.datasets.context_qa.similarity.similarity_of`) of the
retrieved chunks to the expected context, computed on demand for the top ``max(ks)`` hits only.

Columns, for each ``k`` in ``ks`` (notation: ``rel_i`` is 1 when the hit at rank ``i`` is relevant,
``sim_i`` its similarity to the expected context, ``n_k = min(k, number of hits)``):

* ``hit_rate@k``: ``1 if sum(rel_i, i <= k) > 0 else 0`` (:func:`metrics.hit_rate`); the hit rate, which
  is also the recall of "the context was found" when one chunk is enough.
* ``context_coverage@k``: ``max(sim_i, i <= n_k)``, the best exact similarity of any of the top ``k``
  chunks to the expected context; 0.0 when nothing was retrieved. Unlike ``hit_rate@k`` it is not
  cut at the threshold, so near misses show.
* ``precision@k``: ``sum(rel_i, i <= k) / k`` (:func:`metrics.precision`).
* ``mrr@k``: ``1 / r`` where ``r`` is the rank of the first relevant hit, if ``r <= k``, else 0
  (trec_eval's ``recip_rank`` on ranks cut at ``k``).
* ``best_match_position@k``: ``argmax(sim_i, i <= n_k)`` as a 1-based position (the first on ties):
  where in the top ``k`` the chunk that best matches the context sits. NaN when the top ``k`` holds no
  relevant chunk (no hit), because then there is no match to place.

Plus ``hit@1``, ``hit@3``, ``hit@5`` (``hit_rate@1/3/5`` under the names context-QA reports use),
``ndcg@10`` (:func:`metrics.ndcg`, grade as gain), ``mrr`` (no cutoff), ``n_relevant``, ``found`` and
``first_relevant_rank`` (as in :func:`metrics.per_query_metrics`, so :func:`metrics.aggregate` works
on the frame). The similarity settings are recorded in ``frame.attrs["similarity_settings"]``.

Every column's description, better direction and aggregation are in
:mod:`retrieval_pipeline.core.evaluation.metrics.registry` (``best_match_position@k`` is lower-is-better and averaged
over the queries with a hit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from retrieval_pipeline.core.common.types import Document, Qrels, Run
from retrieval_pipeline.core.datasets.base import RankingMetrics
from retrieval_pipeline.core.datasets.context_qa.similarity import SimilaritySettings, similarity_of

#: The default similarity settings (threshold 0.5, autojunk off, normalised).
DEFAULT_SIMILARITY = SimilaritySettings()

#: The fixed ``hit@k`` columns (aliases of ``hit_rate@k``).
HIT_KS = (1, 3, 5)
NDCG_K = 10


def _similarities(
    run: Run,
    query_ids: Sequence[str],
    expected: Mapping[str, str],
    chunks_by_id: Mapping[str, Document],
    settings: SimilaritySettings,
    depth: int,
) -> np.ndarray:
    """Exact similarity of each query's top ``depth`` hits to its expected context; NaN past the last hit."""
    table = np.full((len(query_ids), depth), np.nan)
    for row, query_id in enumerate(query_ids):
        if query_id not in expected:
            raise ValueError(f"no expected context for query {query_id!r}")
        for position, (doc_id, _score) in enumerate((run.get(query_id) or [])[:depth]):
            if doc_id not in chunks_by_id:
                raise ValueError(f"run for query {query_id!r} retrieved {doc_id!r}, which is not in chunks_by_id")
            table[row, position] = similarity_of(expected[query_id], chunks_by_id[doc_id], settings)
    return table


def _coverage(similarities: np.ndarray, k: int) -> np.ndarray:
    """``max(sim_i, i <= k)`` per query, 0.0 when nothing was retrieved."""
    top = similarities[:, :k]
    return np.where(np.isnan(top), 0.0, top).max(axis=1)


def _best_position(similarities: np.ndarray, k: int, hit: np.ndarray) -> np.ndarray:
    """1-based ``argmax(sim_i, i <= k)`` per query (first on ties), NaN where ``hit`` is 0."""
    top = np.where(np.isnan(similarities[:, :k]), -np.inf, similarities[:, :k])
    return np.where(hit > 0, top.argmax(axis=1) + 1.0, np.nan)


def _reciprocal_rank_at(first_rank: np.ndarray, k: int) -> np.ndarray:
    """``1 / r`` where ``r`` is the first relevant rank, if ``r <= k``, else 0 (NaN ranks: nothing found)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(first_rank <= k, 1.0 / first_rank, 0.0)


def context_qa_metrics(
    run: Run,
    qrels: Qrels,
    expected: Mapping[str, str],
    chunks_by_id: Mapping[str, Document],
    settings: SimilaritySettings = DEFAULT_SIMILARITY,
    ks: Sequence[int] = (1, 5, 10),
    *,
    ranking: RankingMetrics,
) -> pd.DataFrame:
    """Score every qrels query: ranking metrics at each ``k`` plus context coverage and best match position.

    See the module docstring for every column's formula.

    Args:
        run: ``{query_id: [(doc_id, score), ...]}``, best first.
        qrels: Similarity qrels ``{query_id: {doc_id: grade}}``; every query in it is scored.
        expected: ``{query_id: expected_context}`` for every qrels query.
        chunks_by_id: The corpus chunks by doc id; every retrieved doc id must be in it.
        settings: The similarity settings the qrels were made with (used for exact similarities and
            recorded in ``attrs["similarity_settings"]``).
        ks: Cutoffs ("max hits") for the ``@k`` columns.
        ranking: The evaluation's per-query ranking metrics (hit rate, precision, nDCG, MRR, first relevant rank).

    Returns:
        One row per qrels query, in qrels order.

    Raises:
        ValueError: If ``qrels`` is empty, a cutoff is not a positive integer, a query has no expected
            context, or a retrieved doc id is not in ``chunks_by_id``.
    """
    if not ks:
        raise ValueError("ks is empty: give at least one cutoff")
    all_ks = sorted({*ks, *HIT_KS})
    base = ranking(run, qrels, ks=all_ks, ndcg_k=NDCG_K, precision_ks=ks)
    query_ids = base["query_id"].tolist()
    similarities = _similarities(run, query_ids, expected, chunks_by_id, settings, max(ks))
    first_rank = base["first_relevant_rank"].to_numpy(dtype=float)
    columns: dict[str, object] = {"query_id": query_ids, "n_relevant": base["n_relevant"]}
    for k in ks:
        hit = base[f"hit_rate@{k}"].to_numpy()
        columns[f"hit_rate@{k}"] = hit
        columns[f"context_coverage@{k}"] = _coverage(similarities, k)
        columns[f"precision@{k}"] = base[f"precision@{k}"]
        columns[f"mrr@{k}"] = _reciprocal_rank_at(first_rank, k)
        columns[f"best_match_position@{k}"] = _best_position(similarities, k, hit)
    columns |= {f"hit@{k}": base[f"hit_rate@{k}"] for k in HIT_KS}
    columns |= {f"ndcg@{NDCG_K}": base[f"ndcg@{NDCG_K}"], "mrr": base["mrr"]}
    columns |= {"found": base["found"], "first_relevant_rank": first_rank}
    frame = pd.DataFrame(columns)
    frame.attrs["similarity_settings"] = settings.as_dict()
    return frame
