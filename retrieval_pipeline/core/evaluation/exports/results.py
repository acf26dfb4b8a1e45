"""The ``evaluation_results.json`` report: per search type, summary metrics and every question's outcome.

Shape (one entry per search type, e.g. ``keyword``, ``semantic``, ``hybrid``)::

    {<search type>: {
        "metrics": {"total_questions", "recall_at_1", "recall_at_5", "mrr",
                    "not_found", "not_found_pct", "avg_rank_when_found"},
        "results": [{"question_id", "question", "expected_chunk_id", "found", "rank",
                     "returned_chunk_ids"}, ...]}}

All numbers come from :mod:`retrieval_pipeline.core.evaluation.metrics`:

* ``recall_at_1`` / ``recall_at_5`` are ``hit_rate@1`` / ``hit_rate@5``: the share of questions whose
  gold chunk is in the top 1 / top 5. Each NQ question has exactly one gold chunk, so hit rate and
  recall are the same number.
* ``mrr`` is the mean reciprocal rank of the gold chunk over the run's full depth (0 when absent).
* ``not_found`` counts questions whose gold chunk is nowhere in the run (its full depth, not just
  the top ``k``); ``not_found_pct`` is that share in percent (0-100).
* ``avg_rank_when_found`` is the mean 1-based rank of the gold chunk over the found questions
  (``null`` when none was found).

Per question, ``rank`` is the 1-based rank of the first gold chunk in the run (``null`` when absent),
``found`` is ``rank is not null``, ``expected_chunk_id`` is the first relevant chunk in the qrels, and
``returned_chunk_ids`` are the top ``k`` chunk ids the search returned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from retrieval_pipeline.core.common.atomic import atomic_write_text
from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.metrics import RELEVANCE_THRESHOLD, aggregate, metric, per_query_metrics, resolve_metric
from retrieval_pipeline.core.retrieval.run_loop import TimedRun


@dataclass(frozen=True)
class _Field:
    """One summary number of the report: its JSON key, the registry metric it reports, how it is shown."""

    key: str
    metric: str  # a key of core.evaluation.metrics.aggregate's result (a registered metric name)
    label: str  # console table row label
    scale: float = 1.0  # the JSON value is the metric times this (100 for a percentage)
    decimals: int = 3  # console table decimals (counts show as integers)

    @property
    def is_count(self) -> bool:
        """Whether the metric is a count (an integer in JSON and in the table)."""
        return metric(self.metric).aggregation == "count"


#: The summary block, in report and table order.
_FIELDS: tuple[_Field, ...] = (
    _Field("total_questions", "n_queries", "questions"),
    _Field("recall_at_1", "hit_rate@1", "recall@1"),
    _Field("recall_at_5", "hit_rate@5", "recall@5"),
    _Field("mrr", "mrr", "MRR"),
    _Field("not_found", "not_found", "not found"),
    _Field("not_found_pct", "not_found_rate", "not found %", scale=100.0, decimals=1),
    _Field("avg_rank_when_found", "avg_rank_when_found", "avg rank when found", decimals=2),
)
_BY_KEY: dict[str, _Field] = {f.key: f for f in _FIELDS}

#: Cut-offs the summary block needs from :func:`~retrieval_pipeline.core.evaluation.metrics.per_query_metrics`.
_CUTOFFS: tuple[int, ...] = tuple(sorted({k for f in _FIELDS if (k := resolve_metric(f.metric)[1]) is not None}))

#: Metric keys, in report and table order.
METRIC_KEYS: tuple[str, ...] = tuple(f.key for f in _FIELDS)

#: Row labels of the console table.
METRIC_LABELS: dict[str, str] = {f.key: f.label for f in _FIELDS}


def evaluation_results(
    runs: Mapping[str, TimedRun] | Mapping[str, Run],
    qrels: Qrels,
    questions: Mapping[str, str],
    k: int = 5,
) -> dict[str, dict[str, Any]]:
    """Build the report for every search type (see the module docstring for the shape and meanings).

    Args:
        runs: ``{search type: TimedRun or Run}``; report order follows this mapping.
        qrels: ``{question_id: {chunk_id: grade}}``; every question in it is evaluated, in its order.
        questions: ``{question_id: question text}`` for every question in ``qrels``.
        k: How many returned chunk ids to list per question.

    Returns:
        ``{search type: {"metrics": {...}, "results": [...]}}``, JSON-ready (NaN becomes ``None``).

    Raises:
        ValueError: ``k < 1``, empty ``qrels``, or a qrels question missing from ``questions``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    missing = [qid for qid in qrels if qid not in questions]
    if missing:
        raise ValueError(f"{len(missing)} qrels question(s) have no text in `questions`, e.g. {missing[:5]}")
    return {name: _search_type_report(_as_run(run), qrels, questions, k) for name, run in runs.items()}


def _as_run(run: TimedRun | Run) -> Run:
    """The ranked lists of a :class:`TimedRun` or a plain run."""
    return run.run if isinstance(run, TimedRun) else run


def _search_type_report(run: Run, qrels: Qrels, questions: Mapping[str, str], k: int) -> dict[str, Any]:
    """``{"metrics": ..., "results": ...}`` for one search type."""
    per_query = per_query_metrics(run, qrels, ks=_CUTOFFS)
    return {"metrics": _metrics(per_query), "results": _results(per_query, run, qrels, questions, k)}


def _metrics(per_query: pd.DataFrame) -> dict[str, Any]:
    """The summary block, from :func:`~retrieval_pipeline.core.evaluation.metrics.aggregate`."""
    summary = aggregate(per_query)
    return {f.key: _report_value(f, summary[f.metric]) for f in _FIELDS}


def _report_value(field: _Field, value: float) -> float | int | None:
    """A summary number as JSON holds it: an int for a count, scaled, ``None`` for NaN."""
    if field.is_count:
        return int(value)
    number = _none_if_nan(value)
    return None if number is None else field.scale * number


def _results(per_query: pd.DataFrame, run: Run, qrels: Qrels, questions: Mapping[str, str], k: int) -> list[dict[str, Any]]:
    """One entry per qrels question, in qrels order."""
    ranks = dict(zip(per_query["query_id"], per_query["first_relevant_rank"]))
    results = []
    for qid, judgements in qrels.items():
        rank = _none_if_nan(ranks[qid])
        results.append(
            {
                "question_id": qid,
                "question": questions[qid],
                "expected_chunk_id": expected_chunk_id(judgements),
                "found": rank is not None,
                "rank": None if rank is None else int(rank),
                "returned_chunk_ids": [doc_id for doc_id, _ in (run.get(qid) or [])[:k]],
            }
        )
    return results


def expected_chunk_id(judgements: Mapping[str, int]) -> str | None:
    """The first relevant (grade >= 1) chunk id of one question's qrels, or ``None``."""
    return next((doc for doc, grade in judgements.items() if grade >= RELEVANCE_THRESHOLD), None)


def _none_if_nan(value: float) -> float | None:
    """``None`` for NaN (JSON has no NaN), else the value as a float."""
    return None if value is None or math.isnan(value) else float(value)


def write_evaluation_results(results: Mapping[str, Any], path: str | Path) -> Path:
    """Write the report as indented UTF-8 JSON (strict: NaN is refused), creating the folder, atomically.

    Args:
        results: Output of :func:`evaluation_results`.
        path: Target file, e.g. ``out/evaluation_results.json``.

    Returns:
        The path written.
    """
    text = json.dumps(results, ensure_ascii=False, indent=2, allow_nan=False)
    return atomic_write_text(path, text + "\n")  # a uniquely named temp file, then a rename


def comparison_table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """A plain-text table: one column per search type, one row per metric.

    Recall and MRR show 3 decimals, percentages 1, the average rank 2; a missing value shows ``-``.

    Args:
        results: Output of :func:`evaluation_results`.

    Returns:
        The table (``tabulate``'s ``simple`` format), without a trailing newline.
    """
    names = list(results)
    rows = [[METRIC_LABELS[key], *(_format(key, results[name]["metrics"].get(key)) for name in names)] for key in METRIC_KEYS]
    return tabulate(
        rows,
        headers=["metric", *names],
        tablefmt="simple",
        colalign=("left", *("right" for _ in names)),
        disable_numparse=True,
    )


def _format(key: str, value: Any) -> str:
    """One table cell."""
    if value is None:
        return "-"
    field = _BY_KEY[key]
    return str(int(value)) if field.is_count else f"{value:.{field.decimals}f}"
