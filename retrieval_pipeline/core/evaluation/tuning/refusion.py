"""A hybrid's fusion re-run from its components' stored runs, vectorised, and its per-query metrics.

The hybrid fetched each component's top ``max(spec.depth, k)`` and fused them with
:func:`~retrieval_pipeline.core.retrieval.engines.fusion.minmax_fuse` / :func:`~retrieval_pipeline.core.retrieval.engines.fusion.rrf_fuse`;
the same arithmetic, in the same order, runs here vectorised over every (query, document) pair at once
(parity is tested against those functions and against the hybrid's own stored run), so the fusion sweep
(:mod:`retrieval_pipeline.core.evaluation.tuning.fusion_sweep`) scores a setting without re-running any retriever.

Metrics are the registry's formulas (:func:`~retrieval_pipeline.core.evaluation.metrics.registry.compute_metric`) on the
judged positions of the relevant documents (parity with
:func:`~retrieval_pipeline.core.evaluation.metrics.per_query_metrics` is tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.metrics import RELEVANCE_THRESHOLD, Judged, compute_metric, resolve_metric

#: How deep the judged arrays of :meth:`Judgements.from_qrels` go unless told (the deepest cut-off the sweep reads).
DEFAULT_CUT = 10


class SkipHybrid(ValueError):
    """A hybrid that cannot be re-fused from the stored runs; the message is the reason given."""


@dataclass(frozen=True)
class Judgements:
    """The qrels as arrays, one row per evaluated query (qrels order), and as a lookup frame."""

    query_ids: list[str]
    grades: pd.DataFrame  # query_id, doc_id, grade: relevant judgements only
    ideal_gains: np.ndarray  # (n_queries, cut)
    n_relevant: np.ndarray  # (n_queries,)

    @classmethod
    def from_qrels(cls, qrels: Qrels, cut: int = DEFAULT_CUT) -> Judgements:
        """Relevant is ``grade >= RELEVANCE_THRESHOLD`` and the gain is the grade, as in :mod:`~retrieval_pipeline.core.evaluation.metrics.families`.

        ``cut`` is how many ranks a judged ranking keeps: the deepest cut-off of the metrics asked for.
        """
        rows = [(q, d, int(g)) for q, judged in qrels.items() for d, g in judged.items() if g >= RELEVANCE_THRESHOLD]
        ideal = np.zeros((len(qrels), cut))
        n_relevant = np.zeros(len(qrels), dtype=np.int64)
        for row, judged in enumerate(qrels.values()):
            grades = sorted((g for g in judged.values() if g >= RELEVANCE_THRESHOLD), reverse=True)
            ideal[row, : min(len(grades), cut)] = grades[:cut]
            n_relevant[row] = len(grades)
        frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
        return cls([str(q) for q in qrels], frame, ideal, n_relevant)

    def __len__(self) -> int:
        return len(self.query_ids)

    @property
    def cut(self) -> int:
        """How many ranks a judged ranking keeps."""
        return int(self.ideal_gains.shape[1])

    def positions(self, query_ids: pd.Series | Sequence[str]) -> np.ndarray:
        """Row of each query id (-1 when it is not evaluated)."""
        return pd.Index(self.query_ids).get_indexer(pd.Index(query_ids))

    def grade_of(self, query_ids: pd.Series, doc_ids: pd.Series) -> np.ndarray:
        """The relevant grade of each (query, document) pair, 0 when not relevant."""
        pairs = pd.DataFrame({"query_id": query_ids.to_numpy(), "doc_id": doc_ids.to_numpy()})
        merged = pairs.merge(self.grades, on=["query_id", "doc_id"], how="left")
        return merged["grade"].fillna(0).to_numpy(dtype=float)

    def judge(self, qpos: np.ndarray, pos: np.ndarray, grade: np.ndarray) -> Judged:
        """Judge a ranking given as rows (query row, 0-based position, grade of the document there)."""
        gains = np.zeros((len(self), self.cut))
        top = pos < self.cut
        gains[qpos[top], pos[top]] = grade[top]
        first = np.full(len(self), np.inf)
        rel = grade > 0
        np.minimum.at(first, qpos[rel], pos[rel] + 1.0)
        first[np.isinf(first)] = np.nan
        return Judged(gains, self.ideal_gains, self.n_relevant, first)

    def metric_frame(self, judged: Judged, metrics: Sequence[str]) -> pd.DataFrame:
        """The registry's formulas of ``metrics`` on ``judged``: one row per evaluated query, one column per metric.

        Raises:
            ValueError: If a metric's cut-off is deeper than :attr:`cut` (its value would be cut short).
        """
        deep = [m for m in metrics if (resolve_metric(m)[1] or 0) > self.cut]
        if deep:
            raise ValueError(f"metrics {deep} read deeper than the {self.cut} ranks judged: build the Judgements with a deeper cut")
        return pd.DataFrame({m: compute_metric(m, judged) for m in metrics}, index=self.query_ids)


@dataclass(frozen=True)
class FusionTable:
    """One hybrid's components side by side: one row per (evaluated query, document any component retrieved).

    Queries a component failed on are left out: the hybrid answers them with an error (no hits) rather
    than fusing the others, so they score 0 here as well.
    """

    components: tuple[str, ...]
    query_ids: np.ndarray  # (n_rows,) object
    doc_ids: np.ndarray  # (n_rows,) object
    qpos: np.ndarray  # (n_rows,) row of the query in the Judgements
    doc_order: np.ndarray  # (n_rows,) rank of doc_id in lexicographic order (the last tie-break)
    norm: np.ndarray  # (n_components, n_rows) min-max normalised score, 0 when absent
    rank: np.ndarray  # (n_components, n_rows) 1-based rank, inf when absent
    grade: np.ndarray  # (n_rows,) relevant grade, 0 when not relevant
    failed_queries: int
    present: np.ndarray  # (n_components, n_rows) whether the component retrieved the document
    best_rank: np.ndarray  # (n_rows,) best input rank (the first tie-break)
    rivals: _Rivals


@dataclass(frozen=True)
class _Rivals:
    """Each relevant row against every row of its query, for ranking relevant documents without sorting.

    A relevant document's fused position is the number of its query's documents ranked before it: those
    with a higher fused score, or an equal score and an earlier tie-break (best input rank, then doc_id).
    The pairs and the tie-break comparison do not depend on the setting, so only scores are compared per
    setting: about (relevant documents x documents per query) comparisons instead of a sort of every row.
    """

    relevant: np.ndarray  # (n_relevant_rows,) table rows of the relevant documents
    owner: np.ndarray  # (n_pairs,) index into ``relevant``
    other: np.ndarray  # (n_pairs,) table row of a document of the same query (the relevant one included)
    tie_before: np.ndarray  # (n_pairs,) ``other`` wins a score tie against ``relevant[owner]``

    @classmethod
    def build(cls, qpos: np.ndarray, tie: np.ndarray, grade: np.ndarray) -> _Rivals:
        """Pairs for rows sorted by ``qpos``; ``tie`` orders the rows of a query by the tie-break."""
        relevant = np.flatnonzero(grade > 0)
        starts = np.searchsorted(qpos, qpos[relevant], side="left")
        sizes = np.searchsorted(qpos, qpos[relevant], side="right") - starts
        owner = np.repeat(np.arange(len(relevant)), sizes)
        other = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
        return cls(relevant, owner, other, tie[other] < tie[relevant][owner])

    def positions(self, scores: np.ndarray) -> np.ndarray:
        """0-based fused position of each relevant row under ``scores``."""
        mine, theirs = scores[self.relevant][self.owner], scores[self.other]
        before = (theirs > mine) | ((theirs == mine) & self.tie_before)
        return np.bincount(self.owner, weights=before, minlength=len(self.relevant)).astype(np.int64)


def _component_hits(runs: pd.DataFrame, components: Sequence[str], judgements: Judgements, depth: int) -> tuple[pd.DataFrame, int]:
    """The components' hits on evaluated queries no component failed on, ranks ``1..depth``; and the failed count."""
    present = set(runs["retriever"].unique())
    missing = [c for c in components if c not in present]
    if missing:
        raise SkipHybrid(f"component(s) {missing} have no runs in retrieval_runs (list them among the dataset's retrievers)")
    sub = runs[runs["retriever"].isin(components) & runs["query_id"].isin(judgements.query_ids)]
    failed = set(sub.loc[sub["error"].notna(), "query_id"]) if "error" in sub else set()
    hits = sub[(sub["rank"] > 0) & (sub["rank"] <= depth) & ~sub["query_id"].isin(failed)]
    dup = hits[hits.duplicated(["retriever", "query_id", "doc_id"])]
    if not dup.empty:
        first = dup.iloc[0]
        raise SkipHybrid(f"{first['retriever']} lists document {first['doc_id']!r} twice for query {first['query_id']!r}")
    return hits[["retriever", "query_id", "rank", "doc_id", "score"]], len(failed)


def _normalised(hits: pd.DataFrame) -> np.ndarray:
    """Min-max normalised scores per (component, query); an all-equal list gives 1.0 (as ``minmax_normalise``)."""
    scores = hits["score"].to_numpy(dtype=float)
    grouped = hits.groupby(["retriever", "query_id"], sort=False)["score"]
    low = grouped.transform("min").to_numpy(dtype=float)
    span = grouped.transform("max").to_numpy(dtype=float) - low
    return np.divide(scores - low, span, out=np.ones(len(scores)), where=span > 0)


def fusion_table(runs: pd.DataFrame, components: Sequence[str], judgements: Judgements, depth: int) -> FusionTable:
    """Align the components' stored runs for re-fusion.

    Args:
        runs: The ``retrieval_runs`` frame (retriever, query_id, rank, doc_id, score, latency_ms, error).
        components: The hybrid's retrievers, in the order its weights refer to.
        judgements: The evaluated queries and their qrels.
        depth: Hits taken from each component (the hybrid's ``max(spec.depth, k)``).

    Raises:
        SkipHybrid: A component has no runs, or lists a document twice for a query.
    """
    hits, failed = _component_hits(runs, components, judgements, depth)
    hits = hits.assign(norm=_normalised(hits), comp=hits["retriever"].map({c: i for i, c in enumerate(components)}))
    wide = hits.pivot(index=["query_id", "doc_id"], columns="comp", values=["norm", "rank"])
    wide = wide.reindex(columns=pd.MultiIndex.from_product([["norm", "rank"], range(len(components))]))
    qpos = judgements.positions(wide.index.get_level_values("query_id"))
    wide = wide.iloc[np.argsort(qpos, kind="stable")]  # rows grouped by query, in qrels order
    query_ids = wide.index.get_level_values("query_id")
    doc_ids = wide.index.get_level_values("doc_id")
    qpos = judgements.positions(query_ids)
    doc_order = pd.factorize(doc_ids, sort=True)[0].astype(np.int64)
    rank = wide["rank"].fillna(np.inf).to_numpy(dtype=float).T.copy()
    best_rank = rank.min(axis=0)
    grade = judgements.grade_of(pd.Series(query_ids), pd.Series(doc_ids))
    tie = np.empty(len(qpos), dtype=np.int64)
    tie[np.lexsort((doc_order, best_rank))] = np.arange(len(qpos))
    return FusionTable(
        components=tuple(components),
        query_ids=np.asarray(query_ids, dtype=object),
        doc_ids=np.asarray(doc_ids, dtype=object),
        qpos=qpos,
        doc_order=doc_order,
        norm=wide["norm"].fillna(0.0).to_numpy(dtype=float).T.copy(),
        rank=rank,
        grade=grade,
        failed_queries=failed,
        present=np.isfinite(rank),
        best_rank=best_rank,
        rivals=_Rivals.build(qpos, tie, grade),
    )


# --------------------------------------------------------------------------------------------------
# Fusion, vectorised: the arithmetic of minmax_fuse / rrf_fuse, in the same order
# --------------------------------------------------------------------------------------------------


def minmax_scores(table: FusionTable, alpha: float) -> np.ndarray:
    """``alpha * s1 + (1 - alpha) * s2`` over min-max normalised scores (absent: no term), as ``minmax_fuse``."""
    weights = (float(alpha), 1.0 - float(alpha))
    fused = np.zeros(table.norm.shape[1])
    for weight, norm, present in zip(weights, table.norm, table.present):
        fused = fused + np.where(present, weight * norm, 0.0)
    return fused


def rrf_scores(table: FusionTable, k: float) -> np.ndarray:
    """``sum_i 1 / (k + r_i)`` over the components that retrieved the document, as ``rrf_fuse``."""
    fused = np.zeros(table.rank.shape[1])
    for rank, present in zip(table.rank, table.present):
        fused = fused + np.where(present, 1.0 / (k + np.where(present, rank, 1.0)), 0.0)
    return fused


def fused_order(table: FusionTable, scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank each query's documents: score desc, best input rank asc, doc_id asc; cut at ``depth``.

    Returns:
        ``(rows, qpos, pos)``: table row, query row and 0-based position of each kept hit, query by query.
    """
    rows = np.lexsort((table.doc_order, table.best_rank, -scores, table.qpos))
    qpos = table.qpos[rows]
    starts = np.flatnonzero(np.r_[True, qpos[1:] != qpos[:-1]]) if len(qpos) else np.zeros(0, dtype=np.int64)
    pos = np.arange(len(qpos)) - np.repeat(starts, np.diff(np.r_[starts, len(qpos)]))
    keep = pos < depth
    return rows[keep], qpos[keep], pos[keep]


#: The fused scores of each fusion method (``HybridSpec.method``) at one parameter value.
FUSION_SCORES: dict[str, Callable[[FusionTable, float], np.ndarray]] = {"minmax": minmax_scores, "rrf": rrf_scores}


def fused_run(table: FusionTable, method: str, value: float, depth: int, judgements: Judgements) -> Run:
    """The fused run at one setting, as ``{query_id: [(doc_id, score), ...]}`` (every evaluated query; [] when none)."""
    scores = FUSION_SCORES[method](table, value)
    rows, _, _ = fused_order(table, scores, depth)
    run: Run = {q: [] for q in judgements.query_ids}
    for q, d, s in zip(table.query_ids[rows], table.doc_ids[rows], scores[rows]):
        run[q].append((d, float(s)))
    return run


def setting_metrics(
    table: FusionTable, method: str, value: float, depth: int, judgements: Judgements, metrics: Sequence[str]
) -> pd.DataFrame:
    """Per-query metrics of the fused run at one setting (one row per evaluated query, qrels order).

    Only the positions of relevant documents matter to the metrics, so they are counted (:class:`_Rivals`)
    rather than every list sorted; parity with sorting (:func:`fused_run`) is tested.
    """
    scores = FUSION_SCORES[method](table, value)
    rows = table.rivals.relevant
    pos = table.rivals.positions(scores)
    keep = pos < depth
    judged = judgements.judge(table.qpos[rows][keep], pos[keep], table.grade[rows][keep])
    return judgements.metric_frame(judged, metrics)


def stored_metrics(runs: pd.DataFrame, retriever: str, judgements: Judgements, metrics: Sequence[str]) -> pd.DataFrame:
    """Per-query metrics of a retriever's stored run, ranked as stored (a failed query scores 0)."""
    hits = runs[(runs["retriever"] == retriever) & (runs["rank"] > 0) & runs["query_id"].isin(judgements.query_ids)]
    qpos = judgements.positions(hits["query_id"])
    pos = hits["rank"].to_numpy(dtype=np.int64) - 1
    judged = judgements.judge(qpos, pos, judgements.grade_of(hits["query_id"], hits["doc_id"]))
    return judgements.metric_frame(judged, metrics)
