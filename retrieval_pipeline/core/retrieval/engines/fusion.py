"""Hybrid retrieval: fuse the ranked lists of several retrievers into one.

Two fusions, both pure functions over ranked lists (``[(doc_id, score), ...]`` best first):

* :func:`minmax_fuse`: convex combination of min-max normalised scores (Bruch, Gai & Ingber, TOIS 2023
  found this beats RRF once the weight is tuned). For run :math:`i` with scores :math:`s_i`:

  .. math::  \\hat s_i(d) = \\frac{s_i(d) - \\min s_i}{\\max s_i - \\min s_i}, \\qquad
             F(d) = \\sum_i w_i \\, \\hat s_i(d),

  where a document absent from run :math:`i` contributes 0, and a run whose scores are all equal
  (including a run of one document) normalises to :math:`\\hat s_i(d) = 1` for each of its documents:
  with no spread, every retrieved document counts as that run's best.

* :func:`rrf_fuse`: Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009), with 1-based
  ranks :math:`r_i(d)` (a document's position in run :math:`i`) and :math:`k = 60` by default:

  .. math::  \\mathrm{RRF}(d) = \\sum_i \\frac{1}{k + r_i(d)},

  where a document absent from run :math:`i` contributes 0.

Ties in the fused score are broken by the best (smallest) rank the document had in any input, then
by ``doc_id`` ascending, so the output is deterministic.

Conventions versus ranx 0.3.21 (``ranx.fuse``), checked in ``test_fusion.py``:

* Scores agree to 1e-9 whenever every run has a score spread of at least 1e-9.
* All-equal run: ranx divides by :math:`\\max(\\max - \\min, 10^{-9})`, so every document gets
  :math:`\\hat s = 0`; here it gets 1 (the run still votes for what it retrieved).
* Missing documents: both count 0 from that run (ranx ``wsum`` uses ``res.get(doc_id, 0.0)``).
* Ranks for RRF: here the position in the given list (the retriever's own deterministic order);
  ranx re-sorts each run by score and orders equal scores arbitrarily, so RRF differs only when an
  input run has tied scores. ``ranx.fuse(method="rrf")`` also min-max normalises first by default,
  which does not change ranks unless a run is all-equal.
* Output order: ranx leaves equal fused scores in arbitrary order; here the tie-break above applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from retrieval_pipeline.core.common.types import Hit
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult, Retriever

FusionMethod = Literal["minmax", "rrf"]
METHODS: tuple[str, ...] = ("minmax", "rrf")


def minmax_normalise(run: Sequence[Hit]) -> dict[str, float]:
    """Min-max normalise one run's scores to [0, 1]; an all-equal run maps every doc to 1.0.

    .. math::  \\hat s(d) = \\frac{s(d) - \\min s}{\\max s - \\min s}
               \\quad (\\max s > \\min s), \\qquad \\hat s(d) = 1 \\quad (\\max s = \\min s).

    Args:
        run: ``(doc_id, score)`` pairs.

    Returns:
        ``{doc_id: normalised score}``.
    """
    _check_unique(run)
    if not run:
        return {}
    scores = [float(s) for _, s in run]
    low, high = min(scores), max(scores)
    if high == low:
        return {doc: 1.0 for doc, _ in run}
    span = high - low
    return {doc: (float(s) - low) / span for doc, s in run}


def minmax_fuse(runs: Sequence[Sequence[Hit]], weights: Sequence[float]) -> list[Hit]:
    """Weighted sum of min-max normalised scores: :math:`F(d) = \\sum_i w_i \\hat s_i(d)`.

    A document missing from run :math:`i` gets :math:`\\hat s_i(d) = 0`; an all-equal run gives 1.0
    to each of its documents (see :func:`minmax_normalise`).

    Args:
        runs: Ranked lists, best first (one query's results from each retriever).
        weights: One weight per run.

    Returns:
        Every document of every run, by fused score descending (ties: best input rank, then doc_id).

    Raises:
        ValueError: If the number of weights differs from the number of runs.
    """
    if len(weights) != len(runs):
        raise ValueError(f"{len(runs)} runs but {len(weights)} weights")
    fused: dict[str, float] = {}
    for run, weight in zip(runs, weights):
        for doc, norm in minmax_normalise(run).items():
            fused[doc] = fused.get(doc, 0.0) + float(weight) * norm
    return _ordered(fused, runs)


def rrf_fuse(runs: Sequence[Sequence[Hit]], k: float = 60) -> list[Hit]:
    """Reciprocal Rank Fusion: :math:`\\mathrm{RRF}(d) = \\sum_i 1 / (k + r_i(d))`, ranks 1-based.

    Ranks are positions in the given lists (scores are not re-sorted); a document missing from a run
    contributes 0 from it.

    Args:
        runs: Ranked lists, best first.
        k: The RRF constant (60 in Cormack et al. 2009, "near-optimal, but not critical").

    Returns:
        Every document of every run, by RRF score descending (ties: best input rank, then doc_id).

    Raises:
        ValueError: If ``k`` is negative.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    fused: dict[str, float] = {}
    for run in runs:
        _check_unique(run)
        for rank, (doc, _) in enumerate(run, start=1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return _ordered(fused, runs)


def best_ranks(runs: Sequence[Sequence[Hit]]) -> dict[str, int]:
    """Each document's best (smallest) 1-based rank over the runs."""
    best: dict[str, int] = {}
    for run in runs:
        for rank, (doc, _) in enumerate(run, start=1):
            if rank < best.get(doc, rank + 1):
                best[doc] = rank
    return best


def _ordered(fused: dict[str, float], runs: Sequence[Sequence[Hit]]) -> list[Hit]:
    """Sort fused scores: score desc, then best input rank asc, then doc_id asc."""
    best = best_ranks(runs)
    order = sorted(fused, key=lambda doc: (-fused[doc], best[doc], doc))
    return [(doc, fused[doc]) for doc in order]


def _check_unique(run: Sequence[Hit]) -> None:
    """A ranked list names each document once."""
    docs = [doc for doc, _ in run]
    if len(set(docs)) != len(docs):
        raise ValueError(f"a ranked list repeats documents: {sorted({d for d in docs if docs.count(d) > 1})[:10]}")


def hybrid_name(method: str, alpha: float = 0.5, rrf_k: float = 60) -> str:
    """The conventional name of a hybrid: ``hybrid_minmax_a0.5`` or ``hybrid_rrf_k60``.

    Args:
        method: ``"minmax"`` or ``"rrf"``.
        alpha: Weight of the first retriever (minmax only).
        rrf_k: RRF constant (rrf only).

    Returns:
        The name; numbers use the shortest form (``%g``): 0.5 -> ``0.5``, 1.0 -> ``1``, 60 -> ``60``.
    """
    _check_method(method)
    if method == "minmax":
        return f"hybrid_minmax_a{alpha:g}"
    return f"hybrid_rrf_k{rrf_k:g}"


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}; expected one of {METHODS}")


class HybridRetriever:
    """Runs several retrievers and fuses their lists per query.

    Each retriever returns its top ``max(depth, k)``; the fused list is cut at ``k``.

    * ``"minmax"``: any number of retrievers, one weight each (:func:`minmax_fuse`). With two
      retrievers and no weights, ``alpha`` gives :math:`[\\alpha, 1 - \\alpha]`, so
      :math:`F(d) = \\alpha \\hat s_1(d) + (1 - \\alpha) \\hat s_2(d)`.
    * ``"rrf"``: any number of retrievers, :func:`rrf_fuse` with ``rrf_k``.

    A query that any input retriever could not answer (a :class:`QueryError`) is not fused from
    the others: it gets a :class:`QueryError` naming the failed input, so the failure stays visible.

    Args:
        name: Name in runs and reports; ``None`` means :func:`hybrid_name`.
        retrievers: The retrievers to fuse (e.g. BM25 first, dense second).
        method: ``"minmax"`` or ``"rrf"``.
        alpha: Weight of the first of two retrievers for minmax, in [0, 1] (when ``weights`` is not given).
        rrf_k: RRF constant.
        depth: Hits taken from each retriever before fusing.
        weights: Minmax weights, one per retriever (overrides ``alpha``).
    """

    def __init__(
        self,
        name: str | None,
        retrievers: Sequence[Retriever],
        method: FusionMethod = "minmax",
        alpha: float = 0.5,
        rrf_k: float = 60,
        depth: int = 100,
        weights: Sequence[float] | None = None,
    ) -> None:
        _check_method(method)
        _check_hybrid(retrievers, method, alpha, rrf_k, depth, weights)
        self.name = name or hybrid_name(method, alpha, rrf_k)
        self.retrievers = list(retrievers)
        self.method: FusionMethod = method
        self.alpha = float(alpha)
        self.rrf_k = rrf_k
        self.depth = depth
        self._weights = [float(w) for w in weights] if weights is not None else None

    @property
    def weights(self) -> list[float]:
        """The minmax weights: as given, else :math:`[\\alpha, 1 - \\alpha]`."""
        return list(self._weights) if self._weights is not None else [self.alpha, 1.0 - self.alpha]

    def fuse(self, runs: Sequence[Sequence[Hit]]) -> list[Hit]:
        """Fuse one query's lists with this retriever's method and parameters."""
        if self.method == "minmax":
            return minmax_fuse(runs, self.weights)
        return rrf_fuse(runs, self.rrf_k)

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        """Top-``k`` fused hits per query.

        Args:
            queries: Query texts.
            k: Hits per query.

        Returns:
            One fused list per query, best first (or a :class:`QueryError` when an input failed on it).
        """
        if not queries:
            return []
        if k <= 0:
            return [[] for _ in queries]
        depth = max(self.depth, k)
        per_retriever = [r.search(queries, depth) for r in self.retrievers]
        return [self._fuse_query([runs[q] for runs in per_retriever], k) for q in range(len(queries))]

    def _fuse_query(self, answers: Sequence[QueryResult], k: int) -> QueryResult:
        failed = [(r.name, a) for r, a in zip(self.retrievers, answers) if isinstance(a, QueryError)]
        if failed:
            return QueryError("; ".join(f"input {name} failed: {err.message}" for name, err in failed))
        return self.fuse(answers)[:k]  # type: ignore[arg-type]

    def params(self) -> dict[str, object]:
        """The settings that define this hybrid (for reports and ``params.json`` of callers)."""
        return {
            "kind": "hybrid",
            "name": self.name,
            "method": self.method,
            "weights": self.weights if self.method == "minmax" else None,
            "rrf_k": self.rrf_k if self.method == "rrf" else None,
            "depth": self.depth,
            "retrievers": [r.name for r in self.retrievers],
        }

    def __repr__(self) -> str:
        return f"HybridRetriever(name={self.name!r}, retrievers={[r.name for r in self.retrievers]})"


def _check_hybrid(
    retrievers: Sequence[Retriever], method: str, alpha: float, rrf_k: float, depth: int, weights: Sequence[float] | None
) -> None:
    """Validate the hybrid's settings."""
    if not retrievers:
        raise ValueError("a hybrid needs at least one retriever")
    if method == "minmax" and weights is None and len(retrievers) != 2:
        raise ValueError(f"minmax fusion without weights takes exactly 2 retrievers (weights alpha, 1-alpha), got {len(retrievers)}")
    if method == "minmax" and weights is not None and len(weights) != len(retrievers):
        raise ValueError(f"minmax fusion needs one weight per retriever: {len(retrievers)} retrievers, {len(weights)} weights")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
