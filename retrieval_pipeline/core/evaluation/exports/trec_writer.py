"""Write TREC run and qrels files so that reference tools read our ranking (reading them back: :mod:`.trec`).

Formats (whitespace-separated, one judgement or hit per line)::

    run:    <query_id> Q0 <doc_id> <rank> <score> <tag>
    qrels:  <query_id> 0 <doc_id> <grade>

**Why scores are rewritten on ties.** trec_eval, pytrec_eval and ranx ignore the rank column and re-sort
each query by score. Ties are then broken by doc id (trec_eval/pytrec_eval: descending docno) or by an
unstable sort (ranx), so a run with tied scores would be evaluated in an order that is not ours. Worse,
trec_eval (and so pytrec_eval and ir_measures' trec_eval provider) stores scores as C ``float``: scores
that differ only past single precision (e.g. ``0.5`` and ``0.5 - 1e-9``) are ties for it, while ranx
(float64) keeps them apart. :func:`write_trec_run` therefore writes scores that strictly decrease down
each query's list *both as float64 and after rounding to float32*:

* a score whose float32 rounding is below the float32 rounding of the score written above it is written
  unchanged (``repr`` of the double, which reads back bit-identical);
* any other score (a tie, or a gap lost in float32) is written as the next float32 below the one written
  above it (``numpy.nextafter`` in float32, written as its exact double). So a score only ever moves
  down, by one float32 unit in the last place (about ``6e-8`` relative) more than the score above it: a
  block of ``m`` tied hits spreads over ``m - 1`` such steps, and the real scores of untied hits are
  kept unless a long tie block just above has been pushed down past them.

Every reader then sees exactly our order, whether it parses scores as float32 or float64. Scores beyond
the float32 range (``|score| > 3.4e38``) raise :class:`ValueError`, since trec_eval would read them as
infinite.

Scores that *increase* down the list contradict "best first" and raise :class:`ValueError`, as do NaN and
infinite scores. A query with an empty hit list writes no
line (TREC files cannot express it; a missing query and an empty one evaluate the same in
:mod:`retrieval_pipeline.core.evaluation.metrics`). Likewise a qrels query with no judgements writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from retrieval_pipeline.core.common.atomic import atomic_write
from retrieval_pipeline.core.common.types import Hit, Qrels, Run

#: Largest finite float32: trec_eval stores run scores as C ``float``.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def write_trec_run(run: Run, path: str | Path, tag: str) -> Path:
    """Write a run as a TREC run file whose scores strictly decrease within each query.

    Args:
        run: ``{query_id: [(doc_id, score), ...]}``, best first, scores non-increasing.
        path: Output file (parent directories are created; the file is replaced atomically).
        tag: Run name for the sixth column; no whitespace.

    Returns:
        The path written.

    Raises:
        ValueError: An id or the tag is empty or holds whitespace (the message names it), a doc id
            repeats within a query, or a score is NaN/infinite, beyond float32 range, or higher than the
            one above it.
    """
    check_trec_id(tag, "run tag")
    lines = (line for query_id, hits in run.items() for line in _run_lines(query_id, hits, tag))
    return _write_atomically(Path(path), lines)


def write_trec_qrels(qrels: Qrels, path: str | Path) -> Path:
    """Write qrels as a TREC qrels file (``query_id 0 doc_id grade``), in dict order.

    Args:
        qrels: ``{query_id: {doc_id: grade}}`` with integer grades.
        path: Output file (parent directories are created; the file is replaced atomically).

    Returns:
        The path written.

    Raises:
        ValueError: An id is empty or holds whitespace (the message names it), or a grade is not an int.
    """
    lines = (line for query_id, judged in qrels.items() for line in _qrels_lines(query_id, judged))
    return _write_atomically(Path(path), lines)


def untie_scores(query_id: str, scores: Sequence[float]) -> list[float]:
    """Scores to write for one query: strictly decreasing in float64 and in float32, ties pushed down.

    Args:
        query_id: Named in error messages.
        scores: The query's scores in list (best-first) order.

    Returns:
        Floats that strictly decrease even after rounding to float32; a score is unchanged wherever its
        float32 rounding is already below that of the score written above it.

    Raises:
        ValueError: A score is not a number, is NaN, infinite or beyond float32 range, or is higher than
            the score above it.
    """
    written: list[float] = []
    previous = math.inf
    for rank, raw in enumerate(scores, start=1):
        score = _finite_score(query_id, rank, raw)
        if score > previous:
            raise ValueError(
                f"run for query {query_id!r}: score {score!r} at rank {rank} is higher than {previous!r} "
                "at the rank above; a run must be sorted best first"
            )
        written.append(_below(score, written[-1]) if written else score)
        previous = score
    return written


def _below(score: float, above: float) -> float:
    """``score`` if it stays below ``above`` in float32, else the next float32 below ``above``."""
    ceiling = np.float32(above)
    if np.float32(score) < ceiling:
        return score
    return float(np.nextafter(ceiling, np.float32(-np.inf)))


def check_trec_id(value: object, what: str) -> str:
    """Return ``value`` when it can be a TREC field: a non-empty string without whitespace.

    Raises:
        ValueError: Naming ``what`` and the offending value.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} {value!r} must be a non-empty string")
    if any(char.isspace() for char in value):
        raise ValueError(f"{what} {value!r} contains whitespace; TREC files are whitespace-separated")
    return value


def _finite_score(query_id: str, rank: int, raw: float) -> float:
    """``raw`` as a finite float, or ValueError naming the query and rank."""
    try:
        score = float(raw)
    except (TypeError, ValueError) as error:
        raise ValueError(f"run for query {query_id!r}: score {raw!r} at rank {rank} is not a number") from error
    if not math.isfinite(score):
        raise ValueError(f"run for query {query_id!r}: score {score!r} at rank {rank} is not finite")
    if abs(score) > _FLOAT32_MAX:
        raise ValueError(
            f"run for query {query_id!r}: score {score!r} at rank {rank} is beyond float32 range (trec_eval reads scores as C float)"
        )
    return score


def _run_lines(query_id: str, hits: Sequence[Hit], tag: str) -> Iterator[str]:
    """The TREC lines of one query."""
    check_trec_id(query_id, "query id")
    doc_ids = [check_trec_id(doc_id, f"doc id (query {query_id!r})") for doc_id, _ in hits]
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError(f"run for query {query_id!r} lists the same doc id more than once")
    scores = untie_scores(query_id, [score for _, score in hits])
    for rank, (doc_id, score) in enumerate(zip(doc_ids, scores), start=1):
        yield f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}\n"


def _qrels_lines(query_id: str, judged: dict[str, int]) -> Iterator[str]:
    """The TREC qrels lines of one query."""
    check_trec_id(query_id, "query id")
    for doc_id, grade in judged.items():
        check_trec_id(doc_id, f"doc id (query {query_id!r})")
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise ValueError(f"qrels grade {grade!r} for query {query_id!r}, doc {doc_id!r} must be an int")
        yield f"{query_id} 0 {doc_id} {grade}\n"


def _write_atomically(path: Path, lines: Iterable[str]) -> Path:
    """Write to a uniquely named sibling temp file, then rename over ``path`` (see :func:`atomic_write`)."""

    def write(temp: Path) -> None:
        with temp.open("w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(lines)

    return atomic_write(path, write)
