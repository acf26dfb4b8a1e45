"""Fusion parameters tuned on a seeded dev half of the queries, reported on the other half.

A hybrid retriever (``kind: hybrid``) fuses the ranked lists of its components, and its one parameter
(the min-max weight ``alpha`` of the first component, or the RRF constant ``k``) is otherwise never tuned.
Tuning it on the queries it is then scored on would flatter it, so:

1. :func:`split_queries` puts each evaluated query in a **dev** or a **test** half with a keyed hash
   of ``(seed, query_id)``: a query's half depends on nothing else (not on row order, not on which other
   queries are present), so adding queries never moves the existing ones.
2. :func:`sweep` re-fuses the components' stored runs (``retrieval_runs``) at every grid value, scores
   every setting on both halves, **chooses on dev only** (by ``TuningSettings.objective``; ties go to the
   value closest to the configured one, then the smaller) and reports the chosen and the configured
   value on **test**, next to each component alone on test.

Re-fusion reproduces the hybrid exactly: the hybrid fetched each component's top ``max(spec.depth, k)``
and fused them with :func:`~retrieval_pipeline.core.retrieval.fusion.minmax_fuse` /
:func:`~retrieval_pipeline.core.retrieval.fusion.rrf_fuse`; the same arithmetic, in the same order, runs
here vectorised over every (query, document) pair at once (parity is tested against those functions and
against the hybrid's own stored run). Metrics use the formulas of :mod:`retrieval_pipeline.core.evaluation.metrics`
on arrays built here (parity with :func:`~retrieval_pipeline.core.evaluation.metrics.per_query_metrics` is tested).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval_pipeline.core.asset_metadata import Markdown, md_preview
from retrieval_pipeline.core.evaluation.metrics import RELEVANCE_THRESHOLD, f1, hit_rate, ndcg, precision, recall, reciprocal_rank
from retrieval_pipeline.core.types import Qrels, Run

if TYPE_CHECKING:
    from retrieval_pipeline.core.retrieval.kinds.hybrid import HybridSpec

DEFAULT_ALPHAS: tuple[float, ...] = tuple(round(i / 20, 2) for i in range(21))
DEFAULT_RRF_KS: tuple[float, ...] = (1, 2, 5, 10, 20, 30, 45, 60, 80, 100, 150, 200)

#: The metrics every sweep reports (curve columns), as means of the per-query values over a half.
HEADLINE_METRICS: tuple[str, ...] = ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@10")
#: A dataset needs at least this many evaluated queries (and a non-empty half each) to be split.
MIN_QUERIES = 4
#: Deepest cut-off any metric below reads (``mrr`` reads the whole fused list).
_CUT = 10
#: Dev objectives closer than this count as tied.
_TIE_TOLERANCE = 1e-12
HALVES: tuple[str, ...] = ("dev", "test")


@dataclass(frozen=True)
class _Judged:
    """One setting's ranking judged against the qrels: one row per evaluated query (qrels order)."""

    gains: np.ndarray  # (n_queries, _CUT): grade at each rank when relevant, else 0
    ideal_gains: np.ndarray  # (n_queries, _CUT): the qrels' relevant grades, best first
    n_relevant: np.ndarray  # (n_queries,)
    first_relevant_rank: np.ndarray  # (n_queries,): 1-based over the whole list, NaN when none

    @property
    def relevant(self) -> np.ndarray:
        return self.gains > 0


#: Per-query formulas by metric name (the same functions :func:`~retrieval_pipeline.core.evaluation.metrics.per_query_metrics` uses).
METRIC_FORMULAS: dict[str, Callable[[_Judged], np.ndarray]] = {
    **{f"hit_rate@{k}": (lambda j, k=k: hit_rate(j.relevant, k)) for k in (1, 5, 10)},
    **{f"recall@{k}": (lambda j, k=k: recall(j.relevant, j.n_relevant, k)) for k in (1, 5, 10)},
    "precision@5": lambda j: precision(j.relevant, 5),
    "f1@5": lambda j: f1(precision(j.relevant, 5), recall(j.relevant, j.n_relevant, 5)),
    "mrr": lambda j: reciprocal_rank(j.first_relevant_rank),
    "ndcg@10": lambda j: ndcg(j.gains, j.ideal_gains, 10),
}


class TuningSettings(BaseModel):
    """The fusion sweep: grid, the metric chosen on, and the seeded dev/test split.

    ``datasets.yaml``: ``tuning: {objective, alphas, rrf_ks, seed, dev_share}``. ``objective`` is one of
    :data:`METRIC_FORMULAS` (higher is better for each); ``alphas`` lie in [0, 1]; ``rrf_ks`` are >= 0.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: str = "ndcg@10"
    alphas: tuple[float, ...] = Field(DEFAULT_ALPHAS, min_length=2)
    rrf_ks: tuple[float, ...] = Field(DEFAULT_RRF_KS, min_length=2)
    seed: int = 13
    dev_share: float = Field(0.5, gt=0.0, lt=1.0)

    @field_validator("objective")
    @classmethod
    def _known_objective(cls, value: str) -> str:
        if value not in METRIC_FORMULAS:
            raise ValueError(f"tuning.objective {value!r} is not one the sweep computes; choose one of {sorted(METRIC_FORMULAS)}")
        return value

    @field_validator("alphas")
    @classmethod
    def _alphas_in_unit_interval(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [a for a in value if not 0.0 <= a <= 1.0]
        if bad:
            raise ValueError(f"tuning.alphas must lie in [0, 1] (alpha is the first component's weight), got {bad}")
        return value

    @field_validator("rrf_ks")
    @classmethod
    def _ks_non_negative(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [k for k in value if k < 0]
        if bad:
            raise ValueError(f"tuning.rrf_ks must be >= 0, got {bad}")
        return value


# --------------------------------------------------------------------------------------------------
# The split
# --------------------------------------------------------------------------------------------------


def split_unit(query_id: str, seed: int) -> float:
    """A query's position in [0, 1): BLAKE2b of the query id, keyed with the seed, as a fraction of 2**64.

    Keyed hashing (not a shuffled list) is what makes the split stable: the value depends on the seed and
    this one id only, so neither the order queries arrive in nor the other queries present can change it,
    and a new seed re-draws every query independently.
    """
    key = int(seed).to_bytes(16, "big", signed=True)
    digest = hashlib.blake2b(str(query_id).encode("utf-8"), key=key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def split_queries(query_ids: Iterable[str], seed: int, dev_share: float) -> tuple[list[str], list[str]]:
    """Split query ids into a dev and a test half, seeded and stable.

    A query is in dev when :func:`split_unit` of ``(query_id, seed)`` is below ``dev_share``, so each
    query lands in dev with probability ``dev_share``, independently of the others. Halves are therefore
    only approximately ``dev_share`` of the queries (a binomial draw), which is the price of stability.

    Args:
        query_ids: The evaluated query ids (duplicates are counted once).
        seed: Any integer; a different seed gives an independent split.
        dev_share: Expected share of queries in dev, in (0, 1).

    Returns:
        ``(dev, test)``, each sorted, so the result does not depend on the input order either.

    Raises:
        ValueError: If ``dev_share`` is not in (0, 1).
    """
    if not 0.0 < dev_share < 1.0:
        raise ValueError(f"dev_share must be in (0, 1), got {dev_share}")
    unique = sorted({str(q) for q in query_ids})
    dev = [q for q in unique if split_unit(q, seed) < dev_share]
    chosen = set(dev)
    return dev, [q for q in unique if q not in chosen]


# --------------------------------------------------------------------------------------------------
# Aligned arrays: the qrels, and one hybrid's components
# --------------------------------------------------------------------------------------------------


class SkipHybrid(ValueError):
    """A hybrid that cannot be re-fused from the stored runs; the message is the reason given."""


@dataclass(frozen=True)
class Judgements:
    """The qrels as arrays, one row per evaluated query (qrels order), and as a lookup frame."""

    query_ids: list[str]
    grades: pd.DataFrame  # query_id, doc_id, grade: relevant judgements only
    ideal_gains: np.ndarray  # (n_queries, _CUT)
    n_relevant: np.ndarray  # (n_queries,)

    @classmethod
    def from_qrels(cls, qrels: Qrels) -> Judgements:
        """Relevant is ``grade >= RELEVANCE_THRESHOLD`` and the gain is the grade, as in :mod:`~retrieval_pipeline.core.evaluation.metrics`."""
        rows = [(q, d, int(g)) for q, judged in qrels.items() for d, g in judged.items() if g >= RELEVANCE_THRESHOLD]
        ideal = np.zeros((len(qrels), _CUT))
        n_relevant = np.zeros(len(qrels), dtype=np.int64)
        for row, judged in enumerate(qrels.values()):
            grades = sorted((g for g in judged.values() if g >= RELEVANCE_THRESHOLD), reverse=True)
            ideal[row, : min(len(grades), _CUT)] = grades[:_CUT]
            n_relevant[row] = len(grades)
        frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
        return cls([str(q) for q in qrels], frame, ideal, n_relevant)

    def __len__(self) -> int:
        return len(self.query_ids)

    def positions(self, query_ids: pd.Series | Sequence[str]) -> np.ndarray:
        """Row of each query id (-1 when it is not evaluated)."""
        return pd.Index(self.query_ids).get_indexer(pd.Index(query_ids))

    def grade_of(self, query_ids: pd.Series, doc_ids: pd.Series) -> np.ndarray:
        """The relevant grade of each (query, document) pair, 0 when not relevant."""
        pairs = pd.DataFrame({"query_id": query_ids.to_numpy(), "doc_id": doc_ids.to_numpy()})
        merged = pairs.merge(self.grades, on=["query_id", "doc_id"], how="left")
        return merged["grade"].fillna(0).to_numpy(dtype=float)

    def judge(self, qpos: np.ndarray, pos: np.ndarray, grade: np.ndarray) -> _Judged:
        """Judge a ranking given as rows (query row, 0-based position, grade of the document there)."""
        gains = np.zeros((len(self), _CUT))
        top = pos < _CUT
        gains[qpos[top], pos[top]] = grade[top]
        first = np.full(len(self), np.inf)
        rel = grade > 0
        np.minimum.at(first, qpos[rel], pos[rel] + 1.0)
        first[np.isinf(first)] = np.nan
        return _Judged(gains, self.ideal_gains, self.n_relevant, first)


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


@dataclass(frozen=True)
class FusionMethod:
    """How one fusion method is swept: its parameter, grid, configured value, scores, and what it cannot tune."""

    parameter: str
    grid: Callable[[TuningSettings], tuple[float, ...]]
    default: Callable[[HybridSpec], float]
    scores: Callable[[FusionTable, float], np.ndarray]
    unsupported: Callable[[HybridSpec], str | None]


def _minmax_default(spec: HybridSpec) -> float:
    weights = spec.fusion_weights()
    return float(weights[0]) / float(sum(weights))


def _minmax_unsupported(spec: HybridSpec) -> str | None:
    n = len(spec.retrievers)
    return None if n == 2 else f"minmax over {n} components: alpha weighs exactly two ([alpha, 1 - alpha])"


#: The sweep of each fusion method (``HybridSpec.method``).
FUSION_METHODS: dict[str, FusionMethod] = {
    "minmax": FusionMethod("alpha", lambda s: s.alphas, _minmax_default, minmax_scores, _minmax_unsupported),
    "rrf": FusionMethod("k", lambda s: s.rrf_ks, lambda spec: float(spec.k), rrf_scores, lambda spec: None),
}


def fused_run(table: FusionTable, method: str, value: float, depth: int, judgements: Judgements) -> Run:
    """The fused run at one setting, as ``{query_id: [(doc_id, score), ...]}`` (every evaluated query; [] when none)."""
    scores = FUSION_METHODS[method].scores(table, value)
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
    scores = FUSION_METHODS[method].scores(table, value)
    rows = table.rivals.relevant
    pos = table.rivals.positions(scores)
    keep = pos < depth
    judged = judgements.judge(table.qpos[rows][keep], pos[keep], table.grade[rows][keep])
    return pd.DataFrame({m: METRIC_FORMULAS[m](judged) for m in metrics}, index=judgements.query_ids)


def stored_metrics(runs: pd.DataFrame, retriever: str, judgements: Judgements, metrics: Sequence[str]) -> pd.DataFrame:
    """Per-query metrics of a retriever's stored run, ranked as stored (a failed query scores 0)."""
    hits = runs[(runs["retriever"] == retriever) & (runs["rank"] > 0) & runs["query_id"].isin(judgements.query_ids)]
    qpos = judgements.positions(hits["query_id"])
    pos = hits["rank"].to_numpy(dtype=np.int64) - 1
    judged = judgements.judge(qpos, pos, judgements.grade_of(hits["query_id"], hits["doc_id"]))
    return pd.DataFrame({m: METRIC_FORMULAS[m](judged) for m in metrics}, index=judgements.query_ids)


# --------------------------------------------------------------------------------------------------
# Choosing and the sweep
# --------------------------------------------------------------------------------------------------


def choose(values: Sequence[float], dev_scores: Sequence[float], default: float) -> float:
    """The value with the best dev score (higher is better); ties: closest to ``default``, then the smaller."""
    best = max(dev_scores)
    tied = [v for v, s in zip(values, dev_scores) if s >= best - _TIE_TOLERANCE]
    return min(tied, key=lambda v: (abs(v - default), v))


CHOSEN_COLUMNS = [
    "hybrid",
    "method",
    "parameter",
    "default_value",
    "chosen_value",
    "objective",
    "dev_default",
    "dev_chosen",
    "test_default",
    "test_chosen",
]


def sweep_metrics(objective: str) -> list[str]:
    """The metrics a sweep reports: the headline ones, and the objective when it is not one of them."""
    return list(HEADLINE_METRICS) + ([objective] if objective not in HEADLINE_METRICS else [])


def curve_columns(objective: str) -> list[str]:
    """The curve frame's columns, in order."""
    return ["hybrid", "method", "parameter", "value", "half", *sweep_metrics(objective), "chosen", "is_default"]


@dataclass(frozen=True)
class SweepResult:
    """The sweep of one dataset.

    Attributes:
        curve: One row per (hybrid, value, half): ``hybrid, method, parameter ("alpha" | "k"), value,
            half ("dev" | "test")``, the headline metric means (and the objective's), ``chosen``, ``is_default``.
        chosen: One row per tuned hybrid: :data:`CHOSEN_COLUMNS`, then ``test_<component>`` (the
            objective of each component alone on test), ``n_dev``, ``n_test``, ``note``.
        skipped: ``"<hybrid>: <reason>"`` for each hybrid that could not be swept.
        n_dev: Queries in the dev half.
        n_test: Queries in the test half.
        objective: The metric chosen on.
        note: Why nothing was swept (too few queries), else empty.
    """

    curve: pd.DataFrame
    chosen: pd.DataFrame
    skipped: list[str]
    n_dev: int
    n_test: int
    objective: str
    note: str = ""

    def metadata(self, digits: int = 4) -> dict[str, Any]:
        """Plain metadata values: per hybrid the default and chosen value and the dev/test objective, counts, reasons, a table."""
        meta: dict[str, Any] = {"objective": self.objective, "n_dev": self.n_dev, "n_test": self.n_test, "skipped": list(self.skipped)}
        if self.note:
            meta["note"] = self.note
        for row in self.chosen.to_dict("records"):
            h, p = row["hybrid"], row["parameter"]
            meta[f"{h}/default_{p}"] = round(float(row["default_value"]), digits)
            meta[f"{h}/chosen_{p}"] = round(float(row["chosen_value"]), digits)
            for key in ("dev_default", "dev_chosen", "test_default", "test_chosen"):
                meta[f"{h}/{key}"] = round(float(row[key]), digits)
            for key, value in row.items():
                if str(key).startswith("test_") and key not in ("test_default", "test_chosen") and pd.notna(value):
                    meta[f"{h}/{key}"] = round(float(value), digits)
        meta["chosen_table"] = Markdown(
            md_preview(self.chosen.round(digits)) if not self.chosen.empty else f"_{self.note or 'nothing swept'}_"
        )
        return meta


def _not_enough(n: int, n_dev: int, n_test: int, dataset: str, objective: str) -> SweepResult:
    note = (
        f"not enough queries: dataset {dataset} has {n} evaluated queries (dev {n_dev}, test {n_test}); "
        f"tuning needs at least {MIN_QUERIES} and a non-empty dev and test half"
    )
    return SweepResult(
        pd.DataFrame(columns=curve_columns(objective)), pd.DataFrame(columns=CHOSEN_COLUMNS), [], n_dev, n_test, objective, note
    )


@dataclass(frozen=True)
class _Context:
    """What every hybrid's sweep shares: the runs, the qrels, the halves and the settings."""

    runs: pd.DataFrame
    judgements: Judgements
    dev: np.ndarray  # (n_queries,) bool
    settings: TuningSettings
    depth: int
    metrics: list[str]
    component_cache: dict[str, pd.DataFrame]

    def means(self, per_query: pd.DataFrame) -> dict[str, dict[str, float]]:
        return {"dev": per_query[self.dev].mean().to_dict(), "test": per_query[~self.dev].mean().to_dict()}

    def component(self, name: str) -> pd.DataFrame:
        if name not in self.component_cache:
            self.component_cache[name] = stored_metrics(self.runs, name, self.judgements, self.metrics)
        return self.component_cache[name]


def _sweep_one(spec: HybridSpec, ctx: _Context) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Curve rows and the chosen row of one hybrid; raises :class:`SkipHybrid` with the reason."""
    method = FUSION_METHODS.get(spec.method)
    if method is None:
        raise SkipHybrid(f"fusion method {spec.method!r} has no sweep; known: {sorted(FUSION_METHODS)}")
    reason = method.unsupported(spec)
    if reason:
        raise SkipHybrid(reason)
    table = fusion_table(ctx.runs, spec.retrievers, ctx.judgements, max(spec.depth, ctx.depth))
    default = method.default(spec)
    grid = sorted({float(v) for v in method.grid(ctx.settings)} | {default})
    means = {v: ctx.means(setting_metrics(table, spec.method, v, ctx.depth, ctx.judgements, ctx.metrics)) for v in grid}
    objective = ctx.settings.objective
    chosen = choose(grid, [means[v]["dev"][objective] for v in grid], default)
    base = {"hybrid": spec.name, "method": spec.method, "parameter": method.parameter}
    curve = [
        {**base, "value": v, "half": h, **means[v][h], "chosen": v == chosen, "is_default": v == default} for v in grid for h in HALVES
    ]
    notes = []
    if spec.depth > ctx.depth:
        notes.append(f"components stored at depth {ctx.depth} < hybrid depth {spec.depth}: re-fusion approximates the hybrid")
    if table.failed_queries:
        notes.append(f"{table.failed_queries} queries failed in a component (no fused hits, as in the hybrid)")
    row = {
        **base,
        "default_value": default,
        "chosen_value": chosen,
        "objective": objective,
        "dev_default": means[default]["dev"][objective],
        "dev_chosen": means[chosen]["dev"][objective],
        "test_default": means[default]["test"][objective],
        "test_chosen": means[chosen]["test"][objective],
        **{f"test_{c}": ctx.means(ctx.component(c))["test"][objective] for c in spec.retrievers},
        "n_dev": int(ctx.dev.sum()),
        "n_test": int((~ctx.dev).sum()),
        "note": "; ".join(notes),
    }
    return curve, row


def sweep(
    runs: pd.DataFrame,
    qrels: Qrels,
    hybrids: Sequence[HybridSpec],
    settings: TuningSettings,
    depth: int,
    dataset: str = "dataset",
) -> SweepResult:
    """Tune each hybrid's fusion parameter on the dev half; report dev and test numbers for every value.

    Args:
        runs: The ``retrieval_runs`` frame; it must hold each hybrid's components (the hybrid's own run is not needed).
        qrels: The evaluated queries' qrels (``scoring.evaluated_qrels``): they define the queries split.
        hybrids: Hybrid specs, in report order. ``minmax``: alpha is the weight of the first component
            (weights ``[alpha, 1 - alpha]``); ``rrf``: the constant ``k``. The configured value joins the grid.
        settings: Grid, objective, seed and dev share.
        depth: Hits per fused list (the dataset's ``retrieval.depth``; MRR reads this deep).
        dataset: Named in messages.

    Returns:
        A :class:`SweepResult`; a hybrid that cannot be swept is listed in ``skipped`` with its reason, and
        a dataset with too few queries gets empty frames and a ``note``.
    """
    judgements = Judgements.from_qrels(qrels)
    dev_ids, test_ids = split_queries(judgements.query_ids, settings.seed, settings.dev_share)
    if len(judgements) < MIN_QUERIES or not dev_ids or not test_ids:
        return _not_enough(len(judgements), len(dev_ids), len(test_ids), dataset, settings.objective)
    metrics = sweep_metrics(settings.objective)
    dev = np.isin(np.asarray(judgements.query_ids, dtype=object), np.asarray(dev_ids, dtype=object))
    ctx = _Context(runs, judgements, dev, settings, depth, metrics, {})
    curve: list[dict[str, Any]] = []
    chosen: list[dict[str, Any]] = []
    skipped: list[str] = []
    for spec in hybrids:
        try:
            rows, row = _sweep_one(spec, ctx)
        except SkipHybrid as exc:
            skipped.append(f"{spec.name}: {exc}")
            continue
        curve += rows
        chosen.append(row)
    curve_frame = pd.DataFrame(curve, columns=curve_columns(settings.objective))
    chosen_frame = _chosen_frame(chosen)
    return SweepResult(curve_frame, chosen_frame, skipped, len(dev_ids), len(test_ids), settings.objective)


def _chosen_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Chosen rows with the component columns after the fixed ones, then the counts and the note."""
    components = list(dict.fromkeys(k for r in rows for k in r if k.startswith("test_") and k not in CHOSEN_COLUMNS))
    return pd.DataFrame(list(rows), columns=[*CHOSEN_COLUMNS, *components, "n_dev", "n_test", "note"])
