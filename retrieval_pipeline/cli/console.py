"""What ``make run`` prints after the runs: per dataset the retriever table, the failed checks, where the outputs are.

The table's columns are the metric registry's ``console`` view
(:func:`~retrieval_pipeline.core.evaluation.metrics.registry.view_columns`), under each metric's short label: retrievers x
hit@1, hit@5, MRR and nDCG@10 (best per column marked ``*``), hit@5 with its 95% confidence interval and
▲/▼ marks when the run tested the retrievers against the baseline; under it, when the run compared every retriever
with every other (``retriever_pairs``), one verdict line per column's metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from retrieval_pipeline.core.evaluation.metrics import metric_label, view_columns
from retrieval_pipeline.core.evaluation.statistics.pairwise import metric_verdicts

#: The table columns: (header, metric column of ``retrieval_metrics``).
TABLE_COLUMNS: tuple[tuple[str, str], ...] = tuple((metric_label(name), name) for name in view_columns("console"))
#: The console's marks: significantly better / worse than the baseline retriever.
MARKS = {"better": "▲", "worse": "▼"}
#: The one metric whose confidence interval the console table shows (one of the table's columns).
CI_METRIC = "hit_rate@5"
#: Clauses of a console verdict line before the other pairs are counted in one.
VERDICT_CLAUSES = 3
#: The error class of a step whose blocking check failed (the check itself is reported, not the step).
CHECK_FAILED_ERROR = "DagsterAssetCheckFailedError"
#: The error class of a step stopped by SIGINT (or SIGTERM): Dagster ends the run, the runner stops after it.
INTERRUPTED_ERROR = "DagsterExecutionInterruptedError"
#: The error class of a step whose loop saw the stop flag (:class:`retrieval_pipeline.core.common.stop.StopRequested`).
STOPPED_ERROR = "StopRequested"


def step_label(step_key: str, assets: Sequence[str]) -> str:
    """The step key, as the run page and the event log name the step, then in brackets the asset names where they
    are not the key read with ``__`` as ``/``: the assets of a step that makes several (``question_verdicts
    (quality_report, question_verdicts)``), and an asset whose name has characters Dagster's op names do not allow
    (``retrievers__hybrid_minmax_a0_5_index (retrievers/hybrid_minmax_a0.5_index)``: only letters, digits and ``_``)."""
    if not assets or list(assets) == [step_key] or list(assets) == [step_key.replace("__", "/")]:
        return step_key
    return f"{step_key} ({', '.join(assets)})"


@dataclass
class StepResult:
    """One finished step (op) of a run: the assets it materialised and how long it took."""

    step_key: str
    stage: str
    assets: list[str]
    status: str  # ok | failed | skipped
    seconds: float
    error: str = ""
    error_class: str = ""

    @property
    def label(self) -> str:
        return step_label(self.step_key, self.assets)


@dataclass(frozen=True)
class FailedCheck:
    """A failed asset check, as recorded in the instance."""

    asset: str
    name: str
    severity: str  # ERROR | WARN
    description: str
    metadata: dict[str, Any]
    blocking: bool = False  # a blocking check that fails fails its step, hence the run


@dataclass
class DatasetRun:
    """What one dataset's run produced, for the summary (and the stage benchmark)."""

    dataset: str
    run_id: str
    success: bool
    seconds: float
    steps: list[StepResult]
    failed_checks: list[FailedCheck]
    metrics: pd.DataFrame | None
    exports_dir: Path
    error: str = ""
    significance: pd.DataFrame | None = None  # metric_significance: CIs and tests against the baseline
    pairs: pd.DataFrame | None = None  # retriever_pairs: every retriever against every other
    notes: list[str] = field(default_factory=list)  # rejected rows, retrievers that answered nothing (warnings)

    @property
    def failed_steps(self) -> list[StepResult]:
        return [s for s in self.steps if s.status == "failed"]

    @property
    def interrupted(self) -> bool:
        """Whether a signal stopped the run (Dagster ends it with the interrupted step failed)."""
        return any(s.error_class in (INTERRUPTED_ERROR, STOPPED_ERROR) for s in self.steps)


def run_notes(materialised: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What a run's materialisations say that the console must show: rejected rows, and retrievers that answered nothing.

    Args:
        materialised: ``{asset key: {metadata key: value}}`` of the run's materialisations.
    """
    notes = []
    rejected = {
        key: int(meta["rejected"])
        for key, meta in materialised.items()
        if key.endswith("rejects") and str(meta.get("rejected", "")).isdigit()  # counts are text on partitioned assets
    }
    if rejected:
        notes.append("rejected: " + ", ".join(f"{n} row(s) in {key}" for key, n in sorted(rejected.items())) + " (reasons in each asset)")
    empty = str(materialised.get("retrieval_runs", {}).get("empty_runs", "none"))
    if empty != "none":
        notes.append(f"warning: {empty} returned no hit for any query: every metric of it is 0 (a wrong index or service?)")
    return notes


def metrics_table(metrics: pd.DataFrame, significance: pd.DataFrame | None = None) -> str:
    """Retrievers x hit@1, hit@5 (with its 95% CI), MRR, nDCG@10 with 3 decimals; the best value of each column marked ``*``.

    Args:
        metrics: The ``retrieval_metrics`` frame (a ``retriever`` column, one column per metric).
        significance: The ``metric_significance`` frame, when the run made it: adds hit@5's confidence
            interval and marks each value significantly better (``▲``) or worse (``▼``) than the baseline.

    Returns:
        A plain-text table (``tabulate``'s ``simple`` format); a missing metric shows ``-``.
    """
    tests = (
        {} if significance is None or significance.empty else {(r["retriever"], r["metric"]): r for r in significance.to_dict("records")}
    )
    baseline = next((r["baseline_retriever"] for r in tests.values() if r.get("baseline_retriever")), None)
    rows = [[f"{name} (baseline)" if name == baseline else name] for name in metrics["retriever"]]
    headers = ["retriever"]
    for header, column in TABLE_COLUMNS:
        values = pd.to_numeric(metrics[column], errors="coerce") if column in metrics else pd.Series([math.nan] * len(metrics))
        best = values.max() if values.nunique() > 1 else None  # no mark when every retriever scores the same
        for row, name, value in zip(rows, metrics["retriever"], values.tolist()):
            test = tests.get((name, column), {})
            mark = MARKS.get(test.get("direction") or "", "") if test.get("significant") else ""
            row.append("-" if pd.isna(value) else f"{value:.3f}" + ("*" if value == best else " ") + (mark or " "))
            if column == CI_METRIC and tests:
                row.append(f"[{test['ci_low']:.3f}, {test['ci_high']:.3f}]" if test else "-")
        headers += [header, f"{header} 95% CI"] if column == CI_METRIC and tests else [header]
    return tabulate(rows, headers=headers, tablefmt="simple", colalign=("left", *("right" for _ in headers[1:])), disable_numparse=True)


def verdict_lines(pairs: pd.DataFrame | None) -> list[str]:
    """The verdict line of each table column's metric (``retriever_pairs``), under a heading; none without pairs."""
    verdicts = metric_verdicts(pairs, [column for _, column in TABLE_COLUMNS], VERDICT_CLAUSES) if pairs is not None and len(pairs) else {}
    if not verdicts:
        return []
    n_pairs = int(pairs.groupby("metric").size().max())
    heading = (
        f"  every retriever against every other (delta [95% CI, unadjusted], randomisation test, Holm-corrected over the {n_pairs}"
        f" pair{'s' * (n_pairs != 1)} of a metric, the family of the table's ▲/▼; a verdict follows the Holm p, not the interval):"
    )
    return [heading, *(f"    {line}" for line in verdicts.values())]


def format_summary(runs: Sequence[DatasetRun], log_path: Path, interrupted_by: str = "") -> str:
    """Per dataset: outcome, the metrics table, failed checks and steps, where the outputs are; then the log file.

    ``interrupted_by`` (e.g. ``"SIGTERM"``): a signal stopped the invocation; the last line says so and the exit code
    130, instead of a FAILED line with exit code 1 that the process would not return.
    """
    lines = ["Summary", "======="]
    for run in runs:
        outcome = "succeeded" if run.success else "FAILED"
        lines.append(f"{run.dataset}: {outcome} in {run.seconds:.1f} s" + (f" (run {run.run_id[:8]})" if run.run_id else ""))
        if run.error:
            lines.append(f"  error: {first_line(run.error)}")
        lines += [f"  {note}" for note in run.notes]
        if run.metrics is not None and not run.metrics.empty:
            lines += ["  " + line for line in metrics_table(run.metrics, run.significance).splitlines()]
            queries = f"; {int(run.metrics['n_queries'].max())} queries" if "n_queries" in run.metrics else ""
            tested = (
                " ▲/▼ significantly better/worse than the baseline (randomisation test, Holm-corrected over every pair);"
                if run.significance is not None
                else ""
            )
            lines.append(f"  (* best per column{queries};{tested} every metric: the report below and retrieval_metrics in the Dagster UI)")
            lines += verdict_lines(run.pairs)
        else:
            lines.append("  no retrieval_metrics from this run (not selected, or its step did not run)")
        retrievers = set(run.metrics["retriever"]) if run.metrics is not None else set()
        if run.failed_checks:
            lines.append("  failed checks:")
            for check in run.failed_checks:
                note = "" if check.blocking or check.severity != "ERROR" else " (not blocking: the run went on)"
                lines.append(f"    {check.severity:<5}  {check.name} on {check.asset}: {check.description}{note}")
                numbers = _numbers(check.metadata, skip=retrievers)
                if numbers:
                    lines.append(f"           {numbers}")
                lines.append(f"           why: {why_it_failed(check, run.dataset)}")
        else:
            lines.append("  failed checks: none")
        for step in (s for s in run.failed_steps if s.error_class != CHECK_FAILED_ERROR):  # failed checks are listed above
            lines.append(f"  failed step {step.label}: {first_line(step.error)}")
        lines += _outputs(run.exports_dir)
        lines.append("")
    lines.append(f"Log (the full Dagster event stream): {shown_path(log_path)}")
    failed = [r for r in runs if not r.success]
    if interrupted_by:
        lines.append(f"INTERRUPTED by {interrupted_by}: {len(runs) - len(failed)} of {len(runs)} run(s) finished before it. Exit code 130")
    elif failed:
        why = [
            f"{r.dataset} ("
            + (
                ", ".join(f"ERROR check {c.name}" for c in r.failed_checks if c.blocking and c.severity == "ERROR")
                or ("did not run" if r.error else "a step failed")
            )
            + ")"
            for r in failed
        ]
        lines.append(f"FAILED: {len(failed)} of {len(runs)} run(s): {'; '.join(why)}. Exit code 1")
    else:
        counts = {sev: sum(c.severity == sev for r in runs for c in r.failed_checks) for sev in ("ERROR", "WARN")}
        failed_checks = [f"{n} {'non-blocking ' if sev == 'ERROR' else ''}{sev} check(s)" for sev, n in counts.items() if n]
        if failed_checks:
            lines.append(
                f"Done, exit code 0: {len(runs)} dataset(s) materialised, no run failed; {' and '.join(failed_checks)} failed"
                " without blocking (each is listed above with why)"
            )
        else:
            lines.append(f"OK: {len(runs)} dataset(s) materialised")
    return "\n".join(lines) + "\n"


#: Where a dataset's thresholds are set, for the explanations.
REGISTRY_FILE = "data/config/datasets.yaml"


def why_it_failed(check: FailedCheck, dataset: str) -> str:
    """One line on what a failed check means and why it did or did not stop the run, printed under it.

    The demo on the embedded samples ends with such failures on purpose: their thresholds are WARN, so the checks
    are seen at work without failing the run, and their multiple-choice questions include disproven answers.
    """
    if check.blocking and check.severity == "ERROR":
        return "a blocking ERROR threshold: this run failed, and its downstream steps were skipped"
    if check.name.startswith("min_"):
        if check.severity == "ERROR":
            return "an ERROR threshold failed only by retrievers outside the dataset's gate: reported, the run went on"
        return (
            f"a WARN threshold (severity WARN for {dataset} in {REGISTRY_FILE}): reported and alerted, never fails a run; "
            "the embedded samples set their thresholds to WARN on purpose, to show the checks at work"
        )
    if check.name.startswith("drift_"):
        return "drift against the blessed evaluation: WARN by design, alerted by the sensor, never fails a run"
    if check.name == "no_incorrect_questions":
        return (
            "a marked answer of the dataset's own questions was disproven against the installed library (quality report below): "
            "ERROR so it stands out, not blocking, since it is the questions, not the retrievers, that are in doubt"
        )
    return "not blocking: reported, the run went on" if check.severity == "WARN" or not check.blocking else ""


def _numbers(metadata: Mapping[str, Any], skip: set[str]) -> str:
    """A check's metadata in one line (``threshold`` first), without the per-retriever values the table shows."""
    items = sorted(((k, v) for k, v in metadata.items() if k not in skip and _one_line(k, v)), key=lambda kv: (kv[0] != "threshold", kv[0]))
    shown = []
    for key, value in items:
        if isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value)) or "none"
        elif isinstance(value, float):
            value = f"{value:.4g}"
        shown.append(f"{key} {value}")
    return "; ".join(shown)


def _one_line(key: str, value: Any) -> bool:
    """Whether a check's metadata entry fits the one-line summary (not a table, a list of records or the dataset)."""
    if key in {"dataset", "baseline", "rule"}:  # the description already says them
        return False
    if isinstance(value, str):
        return "\n" not in value and len(value) <= 80
    return not (isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value))


def _outputs(exports_dir: Path) -> list[str]:
    """Where the exports and the quality report of a dataset are."""
    if not exports_dir.is_dir():
        return [f"  exports: none yet ({shown_path(exports_dir)}/)"]
    files = sorted(p.name for p in exports_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    runs = [f for f in files if f.endswith(".run")]
    named = [f for f in files if not f.endswith(".run")]
    listing = ", ".join(named + ([f"{len(runs)} TREC runs (*.run)"] if runs else []))
    lines = [f"  exports: {shown_path(exports_dir)}/: {listing}"]
    shown = (
        ("report (open in a browser)", "report.html"),
        ("evaluation results", "evaluation_results.json"),
        ("quality report", "quality_report.md"),
    )
    for label, name in shown:
        if (exports_dir / name).is_file():
            lines.append(f"  {label}: {shown_path(exports_dir / name)}")
    return lines


def shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def first_line(text: str) -> str:
    """The first non-blank line of ``text`` (empty for blank text)."""
    return text.strip().splitlines()[0] if text.strip() else ""
