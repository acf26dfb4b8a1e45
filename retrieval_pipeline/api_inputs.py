"""Qrels and runs in any of the forms :mod:`retrieval_pipeline.api` accepts, read into plain dicts.

Qrels and runs may be dicts (``{qid: {docid: grade}}``, ``{qid: {docid: score}}`` as in pytrec_eval and
ranx; a run may also be ``{qid: [(docid, score), ...]}``), paths of TREC files, pandas DataFrames
(columns ``query_id``/``qid``/``q_id``, ``doc_id``/``docid``/``docno``, and ``grade``/``relevance``/``rel``
or ``score``), or ranx ``Qrels``/``Run`` objects.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval_pipeline.core.evaluation.exports.trec import read_trec_qrels, read_trec_run_for_judging, read_trec_run_scores
from retrieval_pipeline.core.evaluation.metrics.judging import FlatScores

if TYPE_CHECKING:
    import pandas as pd

#: Column names a DataFrame may use, first match wins.
_QUERY_COLUMNS = ("query_id", "qid", "q_id", "query")
_DOC_COLUMNS = ("doc_id", "docid", "docno", "doc")
_GRADE_COLUMNS = ("grade", "relevance", "rel", "label", "score")
_SCORE_COLUMNS = ("score", "sim", "similarity")


def _column(frame: pd.DataFrame, candidates: Sequence[str], what: str, label: str) -> str:
    for name in candidates:
        if name in frame.columns:
            return name
    raise ValueError(f"{label}: no {what} column (tried {', '.join(candidates)}; columns are {list(frame.columns)})")


def _frame_triples(frame: pd.DataFrame, value_columns: Sequence[str], what: str, label: str) -> Iterable[tuple[Any, Any, Any]]:
    query = _column(frame, _QUERY_COLUMNS, "query id", label)
    doc = _column(frame, _DOC_COLUMNS, "doc id", label)
    value = _column(frame, value_columns, what, label)
    return zip(frame[query].tolist(), frame[doc].tolist(), frame[value].tolist())


def _is_frame(obj: object) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


def _grade(value: object, query_id: str, doc_id: str, label: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{label}: grade {value!r} of query {query_id!r}, doc {doc_id!r} is not an integer")
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise ValueError(f"{label}: grade {value!r} of query {query_id!r}, doc {doc_id!r} is not an integer")
    return int(value)


def _score(value: object, query_id: str, doc_id: str, label: str) -> float:
    try:
        score = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{label}: score {value!r} of query {query_id!r}, doc {doc_id!r} is not a number") from None
    if isinstance(value, (bool, np.bool_)) or not math.isfinite(score):
        raise ValueError(f"{label}: score {value!r} of query {query_id!r}, doc {doc_id!r} is not a finite number")
    return score


def _add(target: dict[str, dict[str, Any]], query_id: object, doc_id: object, value: Any, label: str) -> None:
    query, doc = str(query_id), str(doc_id)
    judged = target.setdefault(query, {})
    if doc in judged:
        raise ValueError(f"{label}: doc {doc!r} appears twice for query {query!r}")
    judged[doc] = value


#: Score types the bulk check of :func:`_plain_score_dicts` lets through (``bool`` is refused, as by :func:`_score`).
_SCORE_TYPES = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})


def _plain_score_dicts(mapping: Mapping[Any, Any]) -> bool:
    """Whether ``mapping`` is already ``{str: {str: finite number}}``, checked in bulk (a few C-level passes).

    Such a run is used as it is (no per-hit copy); anything else takes the per-hit path, whose errors name
    the query and doc.
    """
    if not all(type(q) is str and type(h) is dict for q, h in mapping.items()):
        return False
    hits = list(mapping.values())
    if (
        not set(map(type, chain.from_iterable(hits))) <= {str}
        or not set(map(type, chain.from_iterable(map(dict.values, hits)))) <= _SCORE_TYPES
    ):
        return False
    scores = np.fromiter(chain.from_iterable(map(dict.values, hits)), np.float64, sum(map(len, hits)))
    return bool(np.isfinite(scores).all())


def load_qrels(qrels: object, label: str = "qrels") -> dict[str, dict[str, int]]:
    """Qrels as ``{query_id: {doc_id: grade}}`` from a dict, a TREC qrels path, a DataFrame or a ranx ``Qrels``.

    Raises:
        ValueError: Empty qrels, a grade that is not an integer, a doc listed twice for a query, a
            DataFrame without the columns; for a file, :class:`~retrieval_pipeline.core.common.errors.InputError`
            naming the file and line.
    """
    if isinstance(qrels, (str, Path)):
        result = read_trec_qrels(qrels)
        label = f"qrels file {qrels}"
    elif _is_frame(qrels):
        result = {}
        for query_id, doc_id, grade in _frame_triples(qrels, _GRADE_COLUMNS, "grade", label):  # type: ignore[arg-type]
            _add(result, query_id, doc_id, _grade(grade, str(query_id), str(doc_id), label), label)
    else:
        mapping = qrels.to_dict() if hasattr(qrels, "to_dict") and not isinstance(qrels, Mapping) else qrels
        if not isinstance(mapping, Mapping):
            raise ValueError(
                f"{label}: expected a dict {{query_id: {{doc_id: grade}}}}, a TREC qrels path or a DataFrame, got {type(qrels).__name__}"
            )
        result = {}
        for query_id, judged in mapping.items():
            if not isinstance(judged, Mapping):
                raise ValueError(f"{label}: query {query_id!r} maps to {type(judged).__name__}, expected {{doc_id: grade}}")
            result[str(query_id)] = {str(d): _grade(g, str(query_id), str(d), label) for d, g in judged.items()}
    if not result:
        raise ValueError(f"{label} is empty: there are no queries to evaluate")
    return result


def load_scores(run: object, label: str = "run") -> dict[str, dict[str, float]] | FlatScores:
    """A run as :func:`load_run` reads it; a TREC run path as flat arrays where the file allows
    (:func:`~retrieval_pipeline.core.evaluation.exports.trec.read_trec_run_for_judging`, which reads it once), which
    ``evaluate`` and ``compare`` judge without a dict per query."""
    if isinstance(run, (str, Path)):
        return read_trec_run_for_judging(run)
    return load_run(run, label)


def load_run(run: object, label: str = "run") -> dict[str, dict[str, float]]:
    """A run as ``{query_id: {doc_id: score}}`` from a dict, a TREC run path, a DataFrame or a ranx ``Run``.

    ``{query_id: [(doc_id, score), ...]}`` is accepted too; the order of the list is not used (runs are
    ranked by score, as trec_eval ranks them).

    Raises:
        ValueError: A score that is not a finite number, a doc listed twice for a query, a DataFrame
            without the columns; for a file, :class:`~retrieval_pipeline.core.common.errors.InputError` naming
            the file and line.
    """
    if isinstance(run, (str, Path)):
        return read_trec_run_scores(run)
    result: dict[str, dict[str, float]] = {}
    if _is_frame(run):
        for query_id, doc_id, score in _frame_triples(run, _SCORE_COLUMNS, "score", label):  # type: ignore[arg-type]
            _add(result, query_id, doc_id, _score(score, str(query_id), str(doc_id), label), label)
        return result
    mapping = run.to_dict() if hasattr(run, "to_dict") and not isinstance(run, Mapping) else run
    if not isinstance(mapping, Mapping):
        raise ValueError(
            f"{label}: expected a dict {{query_id: {{doc_id: score}}}}, a TREC run path or a DataFrame, got {type(run).__name__}"
        )
    if _plain_score_dicts(mapping):
        return dict(mapping)
    for query_id, hits in mapping.items():
        pairs = hits.items() if isinstance(hits, Mapping) else hits
        try:
            for doc_id, score in pairs:
                _add(result, query_id, doc_id, _score(score, str(query_id), str(doc_id), label), label)
        except (TypeError, ValueError) as error:
            if isinstance(error, ValueError) and str(error).startswith(label):
                raise
            raise ValueError(f"{label}: query {query_id!r} must map to {{doc_id: score}} or [(doc_id, score), ...]") from None
        result.setdefault(str(query_id), {})
    return result
