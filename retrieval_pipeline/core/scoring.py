"""From runs to per-query results and the metric table: what ``query_results`` and ``retrieval_metrics`` compute.

* :func:`per_query_results`: one row per (retriever, query) with every per-query metric, the dataset
  kind's extra columns (context QA), latency, the retriever's error on that query, and the top hits.
* :func:`metric_table`: the means per retriever, in the dataset's retriever order, with the metric
  values flattened for asset metadata (``<retriever>/<metric>``, rounded for display).
* :func:`dataset_gates`: the dataset's floors and its drift rule applied to the checked retrievers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from retrieval_pipeline.core.evaluate import frame_to_runs
from retrieval_pipeline.core.metrics import aggregate, per_query_metrics
from retrieval_pipeline.core.quality_gates import GateResult, drift_gate, threshold_gate
from retrieval_pipeline.core.retrieval_dataset import qrels_from_records
from retrieval_pipeline.core.types import Qrels, Run

#: The LLM judge's per-query columns; null unless the retrieval judge ran.
JUDGE_COLUMNS = ["judge", "judge_quality", "judge_completeness", "judge_relevance", "judge_pass", "judge_error"]
#: Hits kept per query in ``top_hits`` (for failure analysis and the judge).
TOP_HITS = 10


def evaluated_qrels(runs: pd.DataFrame, dataset: pd.DataFrame) -> Qrels:
    """The dataset's qrels for the queries that were run: all of them unless the run was sampled."""
    evaluated = set(runs["query_id"])
    return {q: rel for q, rel in qrels_from_records(dataset.to_dict("records")).items() if q in evaluated}


def per_query_results(
    runs: pd.DataFrame, dataset: pd.DataFrame, extra_columns: Callable[[Run, Qrels], pd.DataFrame] | None = None
) -> pd.DataFrame:
    """Per-query metrics of every retriever in ``runs`` (long format), judge columns left null.

    Args:
        runs: The ``retrieval_runs`` frame (retriever, query_id, rank, doc_id, score, latency_ms, error).
        dataset: The ``retrieval_dataset`` frame (its qrels).
        extra_columns: ``(run, qrels) -> frame`` keyed by ``query_id``, from the dataset kind's adapter.
    """
    qrels = evaluated_qrels(runs, dataset)
    frames = []
    for name, timed in frame_to_runs(runs).items():
        pq = per_query_metrics(timed.run, qrels)
        if extra_columns is not None:
            pq = pq.merge(extra_columns(timed.run, qrels), on="query_id", how="left")
        pq.insert(0, "retriever", name)
        pq["latency_ms"] = pq["query_id"].map(timed.latency_ms)
        pq["error"] = pq["query_id"].map(timed.errors)  # the retriever failed on the query (counted as not found)
        pq["top_hits"] = pq["query_id"].map(lambda q, run=timed.run: [d for d, _ in run.get(q, [])[:TOP_HITS]])
        frames.append(pq)
    frame = pd.concat(frames, ignore_index=True)
    for column in JUDGE_COLUMNS:
        frame[column] = None
    return frame


@dataclass(frozen=True)
class MetricTable:
    """Means per retriever: ``by_retriever[name][metric]``, and the same as a frame (one row per retriever)."""

    by_retriever: dict[str, dict[str, float]]
    frame: pd.DataFrame

    def flat(self, digits: int = 4) -> dict[str, float]:
        """``{"<retriever>/<metric>": value}`` for every finite number, rounded to ``digits``."""
        return {
            f"{r}/{m}": round(float(v), digits)
            for r, ms in self.by_retriever.items()
            for m, v in ms.items()
            if isinstance(v, (int, float)) and not math.isnan(v)
        }


def metric_table(query_results: pd.DataFrame, order: Sequence[str]) -> MetricTable:
    """Aggregate ``query_results`` per retriever, listed in ``order`` (then any other retriever found)."""
    groups = dict(list(query_results.groupby("retriever", sort=False)))
    names = [r for r in order if r in groups] + [r for r in groups if r not in order]
    by_retriever = {str(n): aggregate(groups[n], groups[n]["latency_ms"].dropna().tolist() or None) for n in names}
    return MetricTable(by_retriever, pd.DataFrame(by_retriever).T.reset_index(names="retriever"))


def dataset_gates(
    thresholds: Mapping[str, tuple[float, str]],
    drift_metric: str,
    max_relative_drop: float,
    table: MetricTable,
    checked: Sequence[str],
    previous: Mapping[str, float] | None,
) -> list[GateResult]:
    """Every floor (``{metric: (min, severity)}``) and the drift rule, over the checked retrievers present."""
    present = [r for r in checked if r in table.by_retriever]
    gates = [threshold_gate(m, floor, severity, table.by_retriever, present) for m, (floor, severity) in thresholds.items()]
    gates.append(drift_gate(drift_metric, max_relative_drop, table.by_retriever, previous, present))
    return gates
