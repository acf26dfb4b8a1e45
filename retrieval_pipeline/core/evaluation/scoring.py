"""From runs to per-query results and the metric table: what ``query_results`` and ``retrieval_metrics`` compute.

* :func:`per_query_results`: one row per (retriever, query) with every per-query metric, the dataset
  kind's extra columns (context QA), latency, the retriever's error on that query, and the top hits.
* :func:`metric_table`: the means per retriever, in the dataset's retriever order.
* :func:`evaluate_dataset`: the table, the dataset's thresholds, and its drift check against the blessed baseline
  (:data:`DRIFT_RULES`: a significant drop on paired queries, or the relative-drop rule), and the
  metadata the UI shows (one JSON table of means rounded to 4 digits, the comparison as Markdown).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from retrieval_pipeline.core.common.asset_metadata import Markdown, Table, md_preview
from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.checks.regression import DriftSettings, regression_gate
from retrieval_pipeline.core.evaluation.checks.thresholds import CheckResult, drift_check_name, drift_gate, threshold_check
from retrieval_pipeline.core.evaluation.exports.tables import comparison_table
from retrieval_pipeline.core.evaluation.history import BaselineChoice, Evaluation, choose_baseline, read_snapshot
from retrieval_pipeline.core.evaluation.latency import latency_spread
from retrieval_pipeline.core.evaluation.metrics import aggregate, headline_columns, metric_definitions_md, metric_label, per_query_metrics
from retrieval_pipeline.core.filtering.retrieval_dataset import qrels_from_records
from retrieval_pipeline.core.retrieval.run_loop import frame_to_runs

if TYPE_CHECKING:
    from retrieval_pipeline.core.evaluation.settings import EvaluatedSettings

#: The LLM judge's per-query columns; null unless the retrieval judge ran.
JUDGE_COLUMNS = ["judge", "judge_quality", "judge_completeness", "judge_relevance", "judge_pass", "judge_error"]
#: The regression gate's per-retriever figures shown in the drift check's table.
GATE_TABLE_COLUMNS = ("retriever", "status", "n_common", "before", "after", "drop", "p_holm", "alert", "n_flipped", "n_gained", "note")
#: Flipped queries listed in the drift check's metadata (all of them are counted).
MAX_FLIPPED_LISTED = 100
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


def metric_table(query_results: pd.DataFrame, order: Sequence[str]) -> MetricTable:
    """Aggregate ``query_results`` per retriever, listed in ``order`` (then any other retriever found)."""
    groups = dict(list(query_results.groupby("retriever", sort=False)))
    names = [r for r in order if r in groups] + [r for r in groups if r not in order]
    by_retriever = {str(n): aggregate(groups[n], groups[n]["latency_ms"].dropna().tolist() or None) for n in names}
    return MetricTable(by_retriever, pd.DataFrame(by_retriever).T.reset_index(names="retriever"))


def threshold_checks(
    thresholds: Mapping[str, tuple[float, str]], table: MetricTable, checked: Sequence[str], gated: Sequence[str] | None = None
) -> list[CheckResult]:
    """Every threshold (``{metric: (min, severity)}``) over the checked retrievers present; an ERROR threshold fails the
    run only for the ``gated`` retrievers (default: all), the others' failures are WARN."""
    present = [r for r in checked if r in table.by_retriever]
    gate = None if gated is None else [r for r in gated if r in table.by_retriever]
    return [threshold_check(m, minimum, severity, table.by_retriever, present, gate) for m, (minimum, severity) in thresholds.items()]


def _relative_rule(
    drift: DriftSettings, table: MetricTable, query_results: pd.DataFrame, checked: Sequence[str], baseline: Evaluation
) -> CheckResult:
    """The relative-drop rule: the drift metric's mean fell more than ``max_relative_drop`` (no test)."""
    return drift_gate(drift.metric, drift.max_relative_drop, table.by_retriever, baseline.values, checked)


def _significance_rule(
    drift: DriftSettings, table: MetricTable, query_results: pd.DataFrame, checked: Sequence[str], baseline: Evaluation
) -> CheckResult:
    """The regression gate: a significant (Holm-corrected) drop of at least ``min_drop`` on the common queries."""
    name = drift_check_name(drift.metric)
    if not baseline.snapshot or not Path(baseline.snapshot).is_file():
        why = (
            "it has no per-query snapshot (evaluated before snapshots were kept)"
            if not baseline.snapshot
            else f"{baseline.snapshot} is gone"
        )
        return CheckResult(name, True, "WARN", f"nothing to compare with: {why}", {}, drift.min_drop)
    report = regression_gate(query_results, read_snapshot(baseline.snapshot), checked, drift)
    flipped = report.flipped.head(MAX_FLIPPED_LISTED).astype(object).where(report.flipped.notna(), None).to_dict("records")
    shown = report.frame[[c for c in GATE_TABLE_COLUMNS if c in report.frame.columns]].round(4)
    extra = {
        **{k: v for k, v in report.metadata().items() if "_" not in k or k in ("min_drop", "n_alerts")},  # per-retriever figures: the table
        "comparison": Markdown(md_preview(shown, n=len(shown))),
        "flipped_queries": flipped,
        "flipped_total": len(report.flipped),
    }
    if dropped := dropped_figures(report.frame):  # only on a failed check: a passing one shows no empty value
        extra["dropped"] = dropped
    return CheckResult(name, report.passed, "WARN", report.description, {}, drift.min_drop, extra)


def dropped_figures(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``{retriever: {"before": b, "after": a}}`` of the retrievers the regression gate alerts on: the drift check's
    ``dropped`` metadata, which the alert record (``alerts/<dataset>``) shows and plots."""
    if frame.empty or not {"alert", "before", "after"} <= set(frame.columns):
        return {}
    rows = frame[frame["alert"].fillna(0).astype(bool)]
    return {str(r.retriever): {"before": float(r.before), "after": float(r.after)} for r in rows.itertuples()}


#: How the drift check decides, by ``drift.rule`` (one entry per rule).
DRIFT_RULES: dict[str, Callable[[DriftSettings, MetricTable, pd.DataFrame, Sequence[str], Evaluation], CheckResult]] = {
    "significance": _significance_rule,
    "relative": _relative_rule,
}


def drift_check(
    drift: DriftSettings, table: MetricTable, query_results: pd.DataFrame, checked: Sequence[str], choice: BaselineChoice
) -> CheckResult:
    """The drift check against the chosen baseline evaluation, by the dataset's rule; its description says which baseline."""
    present = [r for r in checked if r in table.by_retriever]
    if choice.evaluation is None:  # first evaluation passes; a configured run that is not there fails, so it gets fixed
        configured = bool(drift.blessed_run_id)
        return CheckResult(drift_check_name(drift.metric), not configured, "WARN", choice.reason, {}, drift.min_drop)
    gate = DRIFT_RULES[drift.rule](drift, table, query_results, present, choice.evaluation)
    gate.description = f"[{drift.rule} rule; baseline: {choice.reason}] {gate.description}"
    gate.extra = {**gate.extra, "baseline": choice.reason, "rule": drift.rule}
    return gate


@dataclass(frozen=True)
class EvaluatedDataset:
    """What ``retrieval_metrics`` reports: the metric table, the check results and the baseline compared with."""

    table: MetricTable
    gates: list[CheckResult]
    baseline: BaselineChoice
    drift_metric: str
    latency: pd.DataFrame  # latency_spread of the retrievers: the metadata crowns no latency within it

    def metadata(self, digits: int = 4, roles: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The headline table first (shown inline on the asset page), then one JSON table of every mean (rounded)
        and Markdown tables; no top-level number for the UI to plot.

        The UI draws top-level numeric metadata as a line across the materialisations of every partition, which
        for a retriever's metric would be a trend across datasets that does not exist; the per-dataset trend is
        ``trend_values``'s job.
        """
        columns = headline_columns(self.table.frame.columns)
        rounded = {
            r: {m: round(float(v), digits) for m, v in ms.items() if isinstance(v, (int, float)) and not math.isnan(v)}
            for r, ms in self.table.by_retriever.items()
        }
        return {
            "headline": headline_table(self.table.by_retriever, roles or {}),  # 3 digits, to fit the page
            "metrics": rounded,
            "drift_baseline": self.baseline.reason,
            "comparison": Markdown(comparison_table(self.table.by_retriever, columns, self.latency)),
            "metric_definitions": Markdown(metric_definitions_md(columns)),
        }


#: The headline table's metric columns (registry names), in order: what a reader compares first comes first (the
#: asset page shows the table in a column of about 700 px, and the right-hand columns may need a scroll).
HEADLINE_TABLE_METRICS = ("hit_rate@5", "mrr", "ndcg@10", "hit_rate@1", "hit_rate@10", "not_found_rate")
#: The metrics plotted over time per dataset (``metric_trends/<dataset>``), of the baseline and production retrievers.
TREND_METRICS = ("hit_rate@5", "mrr", "ndcg@10")


def headline_table(by_retriever: Mapping[str, Mapping[str, float]], roles: Mapping[str, str], digits: int = 3) -> Table:
    """One row per retriever: hit@5, MRR, nDCG@10, hit@1, hit@10, not-found rate, queries, its role (baseline, production).

    Column names are the metrics' short labels (``hit@5``, ``MRR``, ``nDCG@10``, ``not found``); a metric no retriever
    has is left out; a missing or NaN value is an empty cell. ``queries`` is a column here, not a top-level number.
    Values are rounded to ``digits`` (3: the console's precision), so the table fits the asset page.
    """
    present = [m for m in HEADLINE_TABLE_METRICS if any(m in ms for ms in by_retriever.values())]
    columns = (("retriever", "string"), *((_short(m), "float") for m in present), ("queries", "int"), ("role", "string"))

    def cell(value: Any) -> float | None:
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), digits)

    rows = tuple(
        {
            "retriever": name,
            **{_short(m): cell(ms.get(m)) for m in present},
            "queries": int(ms["n_queries"]) if ms.get("n_queries") is not None else None,
            "role": roles.get(name, ""),
        }
        for name, ms in by_retriever.items()
    )
    return Table(columns, rows)


def _short(metric: str) -> str:
    """A headline column's name: the metric's label (``hit@5``, ``MRR``), ``not found`` for the not-found rate."""
    return "not found" if metric == "not_found_rate" else metric_label(metric)


def trend_values(by_retriever: Mapping[str, Mapping[str, float]], retrievers: Sequence[str], digits: int = 4) -> dict[str, float]:
    """``{"<retriever> <label>": value}`` of :data:`TREND_METRICS` for ``retrievers`` (NaN and absent left out).

    Keyed by retriever name, so a line stays one retriever's even when the dataset's baseline changes.
    """
    out: dict[str, float] = {}
    for name in retrievers:
        for metric in TREND_METRICS:
            value = by_retriever.get(name, {}).get(metric)
            if value is not None and not math.isnan(float(value)):
                out[f"{name} {metric_label(metric)}"] = round(float(value), digits)
    return out


def evaluate_dataset(config: EvaluatedSettings, query_results: pd.DataFrame, earlier: Sequence[Evaluation]) -> EvaluatedDataset:
    """The metric table of ``query_results``, the dataset's thresholds, and its drift check against the chosen baseline."""
    table = metric_table(query_results, config.retrievers)
    thresholds = {m: (t.min, t.severity) for m, t in config.thresholds.items()}
    choice = choose_baseline(earlier, config.drift.blessed_run_id)
    gates = threshold_checks(thresholds, table, config.checked, config.gated)
    gates.append(drift_check(config.drift, table, query_results, config.checked, choice))
    return EvaluatedDataset(table, gates, choice, config.drift.metric, latency_spread(query_results, list(table.by_retriever)))
