"""A run judged against the qrels (:class:`Judged`): the arrays every metric formula reads.

Two ways in, one result:

* :func:`judge` takes a run in list order (``{query_id: [(doc_id, score), ...]}``, best first: the
  pipeline's runs, whose ties the retriever already broke) and looks every hit's grade up.
* :func:`judge_scores` takes a run of scores (``{query_id: {doc_id: score}}``, any order: pytrec_eval's
  and ranx's shape) and ranks it as trec_eval does: score descending compared in single precision (trec_eval
  reads scores as C ``float``), ties by doc id descending. It works on flat arrays over all queries at once
  and ranks only the judged documents: a judged document's rank is 1 + the number of documents of its
  query with a higher float32 score + the number of tied ones with a higher doc id (those few ties are
  compared as strings). No metric here reads anything of an unjudged document but its rank, so the
  unjudged ones are never sorted or looked up. The same run read from a file as flat arrays (:class:`FlatScores`:
  row ranges per query, dictionary-encoded doc ids, scores) is judged the same way without a dict per query.

Conventions (checked against trec_eval, pytrec_eval, ir_measures and ranx in the evaluation tests):

* **Relevance** is ``grade >= 1`` (:data:`RELEVANCE_THRESHOLD`, trec_eval's default ``-l 1``). Grade-0
  entries are judged non-relevant; a negative grade is trec_eval's "in the pool but unjudged" (bpref and
  infAP skip it; judged@k counts it as judged); only nDCG and ERR use the grade itself.
* **Ranking** is column order: rank 1 in column 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from retrieval_pipeline.core.common.types import Hit, Qrels, Run

#: Lowest grade that counts as relevant (trec_eval's default ``-l 1``).
RELEVANCE_THRESHOLD = 1

#: ``{query_id: {doc_id: score}}``: scores, any order.
ScoreRun = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Judged:
    """A ranking judged against the qrels: one row per query, rank 1 in column 0.

    Attributes:
        gains: ``(n_queries, depth)``: the grade at each rank when relevant, else 0 (also past a query's last hit).
        ideal_gains: ``(n_queries, >= 1)``: the qrels' relevant grades, best first, then 0.
        n_relevant: ``(n_queries,)``: ``R``, the number of relevant documents in the qrels.
        first_relevant_rank: ``(n_queries,)``: 1-based rank of the first relevant document over the whole
            ranking (it may lie deeper than ``depth``), NaN when none.
        labels: ``(n_queries, depth)``: the qrels grade of the document at each rank, NaN when the qrels do
            not hold it (and past the run's end); None when not judged that way (bpref, infAP and judged@k need it).
        n_judged_nonrelevant: ``(n_queries,)``: documents the qrels grade 0 (below the relevance level, not
            negative), trec_eval's number of judged non-relevant documents; None as ``labels``.
        n_retrieved: ``(n_queries,)``: the number of documents in each query's run; None as ``labels``.
    """

    gains: np.ndarray
    ideal_gains: np.ndarray
    n_relevant: np.ndarray
    first_relevant_rank: np.ndarray
    labels: np.ndarray | None = None
    n_judged_nonrelevant: np.ndarray | None = None
    n_retrieved: np.ndarray | None = None

    @property
    def relevant(self) -> np.ndarray:
        """Boolean relevance by rank, ``(n_queries, depth)``."""
        return self.gains > 0

    @property
    def depth(self) -> int:
        """How many ranks the arrays hold: the cut-off of a metric asked for without one."""
        return int(self.gains.shape[1])

    def need_labels(self, metric: str) -> np.ndarray:
        """:attr:`labels`, or ValueError naming ``metric`` when this ranking was judged without them."""
        if self.labels is None or self.n_judged_nonrelevant is None or self.n_retrieved is None:
            raise ValueError(
                f"{metric} needs the grade of every retrieved document (Judged.labels): judge the run with judge() or judge_scores()"
            )
        return self.labels


#: A family formula: per-query values of the metric at cut-off ``k`` (None: the full depth; a float for ``rbp(p={k})``).
Formula = Callable[[Judged, int | float | None], np.ndarray]


# --------------------------------------------------------------------------------------------------
# A run in list order
# --------------------------------------------------------------------------------------------------


def _graded_ranks(query_id: str, hits: Sequence[Hit], judgements: Mapping[str, int]) -> list[float]:
    """Qrels grade of each hit in run order (NaN when not judged); raises on a doc listed twice."""
    doc_ids = [doc_id for doc_id, _ in hits]
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError(f"run for query {query_id!r} lists the same doc_id more than once")
    return [judgements.get(doc_id, np.nan) for doc_id in doc_ids]


def judge(run: Run, qrels: Qrels, depth: int, ideal_depth: int) -> Judged:
    """The run, in list order, judged against the qrels, one row per qrels query (in qrels order).

    Every hit's grade is looked up; the top ``depth`` ranks are kept, the qrels' best ``ideal_depth``
    relevant grades, and each query's first relevant rank over the whole run.

    Raises:
        ValueError: If a query's run lists a doc id twice.
    """
    n = len(qrels)
    labels, ideal_gains = np.full((n, depth), np.nan), np.zeros((n, ideal_depth))
    first_rank = np.full(n, np.nan)
    for row, (query_id, judgements) in enumerate(qrels.items()):
        grades = _graded_ranks(query_id, run.get(query_id) or (), judgements)
        top = grades[:depth]
        labels[row, : len(top)] = top
        ideal = sorted((g for g in judgements.values() if g >= RELEVANCE_THRESHOLD), reverse=True)[:ideal_depth]
        ideal_gains[row, : len(ideal)] = ideal
        first_rank[row] = next((rank for rank, grade in enumerate(grades, start=1) if grade >= RELEVANCE_THRESHOLD), np.nan)
    n_retrieved = np.fromiter((len(run.get(q) or ()) for q in qrels), np.int64, n)
    return _judged(labels, ideal_gains, qrels, first_rank, n_retrieved)


def _judged(labels: np.ndarray, ideal_gains: np.ndarray, qrels: Qrels, first_rank: np.ndarray, n_retrieved: np.ndarray) -> Judged:
    """The :class:`Judged` of a label matrix (NaN: not in the qrels) and the qrels' counts."""
    grades = [list(judgements.values()) for judgements in qrels.values()]
    n_relevant = np.fromiter((sum(g >= RELEVANCE_THRESHOLD for g in row) for row in grades), np.int64, len(grades))
    n_nonrelevant = np.fromiter((sum(0 <= g < RELEVANCE_THRESHOLD for g in row) for row in grades), np.int64, len(grades))
    gains = np.where(labels >= RELEVANCE_THRESHOLD, labels, 0.0)
    return Judged(gains, ideal_gains, n_relevant, first_rank, labels, n_nonrelevant, n_retrieved)


# --------------------------------------------------------------------------------------------------
# A run of scores, ranked as trec_eval ranks it
# --------------------------------------------------------------------------------------------------


def _sortable(scores32: np.ndarray) -> np.ndarray:
    """uint64 keys that sort as the float32 scores do (``-0.0`` is ``0.0``, as C compares them)."""
    bits = (scores32 + np.float32(0.0)).view(np.uint32)
    negative = (bits & np.uint32(0x80000000)) != 0
    return np.where(negative, ~bits, bits | np.uint32(0x80000000)).astype(np.uint64)


@dataclass(frozen=True)
class FlatScores:
    """A run of scores as flat arrays, read from a file without building a dict per query (see
    :func:`~retrieval_pipeline.core.evaluation.exports.trec.read_trec_run_flat`).

    Attributes:
        query_ids: The run's queries, each once, in file order.
        starts: ``(len(query_ids) + 1,)``: query ``i``'s documents are rows ``starts[i]:starts[i + 1]``.
        doc_index: ``(rows,)``: each row's document, as a position in ``doc_ids``; no query lists one twice.
        doc_ids: The run's distinct doc ids.
        scores: ``(rows,)``: each row's score, finite.
    """

    query_ids: list[str]
    starts: np.ndarray
    doc_index: np.ndarray
    doc_ids: list[str]
    scores: np.ndarray

    def sizes(self) -> dict[str, int]:
        """``{query_id: documents listed}`` (every query of the run lists at least one)."""
        return dict(zip(self.query_ids, np.diff(self.starts).tolist()))


def lists_a_doc_twice(starts: np.ndarray, doc_index: np.ndarray, n_docs: int) -> bool:
    """Whether a query (rows ``starts[i]:starts[i + 1]``) lists a document (``doc_index``) twice: Numba's single pass for
    large runs, else one sort of (query, doc) keys."""
    if doc_index.size >= _COMPILED_FROM:
        try:
            from retrieval_pipeline.core.evaluation.metrics.kernels import repeats_within
        except ImportError:  # Numba is not installed: the same answer, by sorting
            pass
        else:
            return bool(repeats_within(starts.astype(np.int64), doc_index.astype(np.int64), n_docs))
    keys = np.sort(np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts)) * max(n_docs, 1) + doc_index)
    return bool((keys[1:] == keys[:-1]).any())


def judge_scores(run: ScoreRun | FlatScores, qrels: Qrels, min_depth: int = 1) -> Judged:
    """A run of scores judged against the qrels, ranked as trec_eval ranks it; one row per qrels query.

    The arrays are as deep as the deepest retrieved judged document, the largest ``R`` and ``min_depth``.

    Args:
        run: ``{query_id: {doc_id: score}}`` with finite scores, or the same as :class:`FlatScores`; queries not in the
            qrels are ignored.
        qrels: ``{query_id: {doc_id: grade}}``, not empty.
        min_depth: The least depth of the arrays.

    Returns:
        The :class:`Judged`, labels included.
    """
    retrieved = _flat_retrieved(run, qrels) if isinstance(run, FlatScores) else _dict_retrieved(run, qrels)
    return _rank_judged(retrieved, qrels, min_depth)


@dataclass(frozen=True)
class _Retrieved:
    """A run's scores in qrels query order, and its judged documents: what ranking needs from either input."""

    scores: np.ndarray  # every query's scores, concatenated in qrels order
    lengths: np.ndarray  # documents per qrels query
    rows: np.ndarray  # per judged retrieved document: its qrels row ...
    docs: list[str]  # ... its doc id ...
    grades: np.ndarray  # ... its grade ...
    found: np.ndarray  # ... and its score
    doc_ids_of: Callable[[int], list[str]]  # a row's doc ids, in the order of its scores (only for ties)


def _dict_retrieved(run: ScoreRun, qrels: Qrels) -> _Retrieved:
    n = len(qrels)
    hits = [run.get(q) or {} for q in qrels]
    lengths = np.fromiter(map(len, hits), np.int64, n)
    scores = np.fromiter(chain.from_iterable(h.values() for h in hits), np.float64, int(lengths.sum()))
    rows, docs, grades, found = [], [], [], []
    for row, (judgements, h) in enumerate(zip(qrels.values(), hits)):
        for doc, grade in judgements.items():
            score = h.get(doc)
            if score is not None:
                rows.append(row), docs.append(doc), grades.append(grade), found.append(score)
    return _Retrieved(
        scores, lengths, np.asarray(rows, dtype=np.int64), docs, np.asarray(grades, dtype=np.float64),
        np.asarray(found, dtype=np.float64), lambda row: list(hits[row]),
    )  # fmt: skip


def _flat_retrieved(run: FlatScores, qrels: Qrels) -> _Retrieved:
    """The same from flat arrays: the rows gathered into qrels order, the judged documents found by (query, doc) keys."""
    n, n_docs = len(qrels), len(run.doc_ids)
    row_of_query = {q: row for row, q in enumerate(qrels)}
    file_rows = np.fromiter((row_of_query.get(q, -1) for q in run.query_ids), np.int64, len(run.query_ids))
    kept = np.flatnonzero(file_rows >= 0)
    kept = kept[np.argsort(file_rows[kept], kind="stable")]  # the run's queries in qrels order
    sizes = np.diff(run.starts)
    lengths = np.zeros(n, dtype=np.int64)
    lengths[file_rows[kept]] = sizes[kept]
    take = np.repeat(run.starts[kept] - np.concatenate(([0], np.cumsum(sizes[kept])[:-1])), sizes[kept])
    take += np.arange(take.size)
    scores, doc_index = run.scores[take], run.doc_index[take].astype(np.int64)
    # the judged documents: (qrels row, doc position) keys of the qrels, looked up among the rows whose doc is judged
    position = {doc: i for i, doc in enumerate(run.doc_ids)}
    q_rows, q_docs, q_grades, q_pos = [], [], [], []
    for row, judgements in enumerate(qrels.values()):
        for doc, grade in judgements.items():
            at = position.get(doc)
            if at is not None:
                q_rows.append(row), q_docs.append(doc), q_grades.append(grade), q_pos.append(at)
    wanted = np.asarray(q_rows, dtype=np.int64) * n_docs + np.asarray(q_pos, dtype=np.int64)
    judged_doc = np.zeros(n_docs, dtype=bool)
    judged_doc[np.asarray(q_pos, dtype=np.int64)] = True
    candidates = np.flatnonzero(judged_doc[doc_index])
    keys = np.repeat(np.arange(n, dtype=np.int64), lengths)[candidates] * n_docs + doc_index[candidates]
    order = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys[order], wanted)
    hit = at < keys.size
    hit[hit] = keys[order][at[hit]] == wanted[hit]
    picked = candidates[order[at[hit]]]
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    doc_ids = run.doc_ids
    return _Retrieved(
        scores, lengths, wanted[hit] // n_docs, [d for d, h in zip(q_docs, hit.tolist()) if h],
        np.asarray(q_grades, dtype=np.float64)[hit], scores[picked],
        lambda row: [doc_ids[i] for i in doc_index[starts[row] : starts[row] + lengths[row]].tolist()],
    )  # fmt: skip


def _rank_judged(retrieved: _Retrieved, qrels: Qrels, min_depth: int) -> Judged:
    """Rank the judged documents as trec_eval does: float32 scores descending, ties by doc id descending."""
    lengths, rows, docs = retrieved.lengths, retrieved.rows, retrieved.docs
    ends = np.cumsum(lengths)
    singles = retrieved.scores.astype(np.float32)
    singles_of = retrieved.found.astype(np.float32)
    higher, same = _above_and_tied(singles, lengths, ends, rows, singles_of)
    ranks = 1 + higher
    starts = ends - lengths
    doc_ids: dict[int, list[str]] = {}
    for i in np.flatnonzero(same > 1).tolist():  # tied scores: trec_eval puts the higher doc id first
        row = int(rows[i])
        tied = np.flatnonzero(singles[starts[row] : ends[row]] == singles_of[i]).tolist()
        ids = doc_ids.setdefault(row, retrieved.doc_ids_of(row))
        ranks[i] += sum(ids[t] > docs[i] for t in tied)
    return _judged_flat(qrels, rows, ranks, retrieved.grades, lengths, min_depth)


#: Documents in a run from which the compiled kernel pays for loading Numba (about a second the first time).
_COMPILED_FROM = 3_000_000


def _above_and_tied(
    singles: np.ndarray, lengths: np.ndarray, ends: np.ndarray, rows: np.ndarray, own: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each judged document (query ``rows[i]``, float32 score ``own[i]``): how many documents of its query score
    higher, and how many the same (itself included). All queries at once: Numba's loop over the judged documents'
    queries for large runs (no sort), else one sort of (query, score) keys and two binary searches."""
    if singles.size >= _COMPILED_FROM:
        try:
            from retrieval_pipeline.core.evaluation.metrics.kernels import above_and_tied
        except ImportError:  # Numba is not installed: the same counts, by sorting
            pass
        else:
            return above_and_tied(singles, ends - lengths, ends, rows, own)
    keys = np.sort((np.repeat(np.arange(len(lengths), dtype=np.uint64), lengths) << np.uint64(32)) | _sortable(singles))
    mine = (rows.astype(np.uint64) << np.uint64(32)) | _sortable(own)
    below, above = np.searchsorted(keys, mine, side="left"), np.searchsorted(keys, mine, side="right")
    return ends[rows] - above, above - below


def _judged_flat(qrels: Qrels, rows: np.ndarray, ranks: np.ndarray, grades: np.ndarray, n_retrieved: np.ndarray, min_depth: int) -> Judged:
    """The :class:`Judged` of the retrieved judged documents, given as flat (row, rank, grade) arrays."""
    n = len(qrels)
    all_grades = np.fromiter(chain.from_iterable(j.values() for j in qrels.values()), np.float64)
    all_rows = np.repeat(np.arange(n), np.fromiter(map(len, qrels.values()), np.int64, n))
    relevant = all_grades >= RELEVANCE_THRESHOLD
    n_relevant = np.bincount(all_rows[relevant], minlength=n)
    n_nonrelevant = np.bincount(all_rows[(all_grades >= 0) & ~relevant], minlength=n)
    depth = max(int(ranks.max(initial=0)), int(n_relevant.max(initial=0)), min_depth, 1)
    labels = np.full((n, depth), np.nan)
    labels[rows, ranks - 1] = grades
    first_rank = np.full(n, np.inf)
    hit = grades >= RELEVANCE_THRESHOLD
    np.minimum.at(first_rank, rows[hit], ranks[hit].astype(np.float64))
    first_rank[np.isinf(first_rank)] = np.nan
    # the ideal ranking: each query's relevant grades, best first
    order = np.lexsort((-all_grades[relevant], all_rows[relevant]))
    ideal_rows, ideal_grades = all_rows[relevant][order], all_grades[relevant][order]
    starts = np.concatenate(([0], np.cumsum(n_relevant)[:-1]))
    ideal_gains = np.zeros((n, max(int(n_relevant.max(initial=0)), 1)))
    ideal_gains[ideal_rows, np.arange(len(ideal_rows)) - starts[ideal_rows]] = ideal_grades
    gains = np.where(labels >= RELEVANCE_THRESHOLD, labels, 0.0)
    return Judged(gains, ideal_gains, n_relevant, first_rank, labels, n_nonrelevant, n_retrieved)


# --------------------------------------------------------------------------------------------------
# Helpers of the formulas
# --------------------------------------------------------------------------------------------------


def cut(judged: Judged, k: int | float | None) -> int:
    """The cut-off to slice at: ``k``, or the full depth when None."""
    return judged.depth if k is None else int(k)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` per query, 0 where the denominator is not positive (no warning, no stale memory)."""
    return np.divide(numerator, denominator, out=np.zeros(len(numerator)), where=denominator > 0)
