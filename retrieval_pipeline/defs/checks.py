"""The asset checks of ``retrieval_metrics``: a threshold check per metric with a threshold, a drift check per drift metric.

The specs are the union over the registry's datasets and are partitioned by dataset, so each dataset keeps
its own check status and history. ``retrieval_metrics`` computes the gates (core) and returns one result
per spec, made by :func:`check_results`.
"""

import math
from collections.abc import Sequence

import dagster as dg

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.evaluation.checks.thresholds import CheckResult, check_name, drift_check_name
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import REGISTRY, partitioned_check_spec


def _build_check_specs() -> list[dg.AssetCheckSpec]:
    """One threshold check per metric any registered dataset sets a threshold on, plus the drift checks.

    Every spec is partitioned by dataset, so each dataset has its own check status and history.
    """
    metrics = sorted({m for d in REGISTRY.datasets.values() for m in d.thresholds})
    drift = sorted({d.drift.metric for d in REGISTRY.datasets.values()})
    specs = [
        partitioned_check_spec(
            check_name(m),
            asset="retrieval_metrics",
            blocking=True,
            description=f"Every checked retriever's {m} is at least the dataset's threshold.",
        )
        for m in metrics
    ]
    specs += [
        partitioned_check_spec(
            drift_check_name(m),
            asset="retrieval_metrics",
            description=f"{m} did not drop against the blessed baseline evaluation: by default, no drop that is both significant "
            "(paired randomisation test, Holm-corrected) and larger than the dataset's drift.min_drop; the flipped queries are listed.",
        )
        for m in drift
    ]
    return specs


CHECK_SPECS = _build_check_specs()


def check_result(gate: CheckResult, dataset: str) -> dg.AssetCheckResult:
    """A gate of the evaluation as Dagster's check result, recorded against the dataset's partition.

    The retrievers' values are one Markdown table, rounded to 4 digits, and the threshold, the settings and the
    counts are text: the UI plots numeric metadata across evaluations of every partition, which for these
    would draw a constant line and a trend across datasets that does not exist.
    """
    meta: dict[str, object] = {"dataset": dataset}
    if gate.threshold is not None:
        meta["threshold"] = f"{gate.threshold:g}"
    if gate.values:
        meta["values"] = Markdown(_values_table(gate))
    meta.update({k: _as_text(v) for k, v in gate.extra.items()})
    return dg.AssetCheckResult(
        check_name=gate.name,
        passed=gate.passed,
        description=gate.description,
        severity=dg.AssetCheckSeverity.ERROR if gate.severity == "ERROR" else dg.AssetCheckSeverity.WARN,
        metadata=dagster_metadata({k: v for k, v in meta.items() if v is not None}),
    )


def _as_text(value: object) -> object:
    """A number as text (4 significant digits), so the UI does not plot a setting or a count across datasets."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return "n/a" if isinstance(value, float) and math.isnan(value) else f"{value:.4g}"


def _values_table(gate: CheckResult) -> str:
    """``| retriever | value |``, rounded to 4 digits; a value below the threshold is marked."""
    rows = ["| retriever | value | |", "|---|---|---|"]
    for retriever, value in gate.values.items():
        shown = "n/a" if math.isnan(value) else f"{value:.4f}"
        low = gate.threshold is not None and (math.isnan(value) or value < gate.threshold)
        rows.append(f"| {retriever} | {shown} | {'below the threshold' if low else ''} |")
    return "\n".join(rows)


def check_results(gates: Sequence[CheckResult], dataset: str, log: dg.DagsterLogManager) -> list[dg.AssetCheckResult]:
    """One result per check spec: the dataset's gate where it computed one, else a pass with a note.

    The specs are the union over datasets, so a threshold only another dataset sets passes here with a note.
    A gate with no spec of its name (the definitions were loaded from another registry than this run's)
    is logged as a warning and not recorded as a check.
    """
    spec_names = {s.name for s in CHECK_SPECS}
    for gate in gates:
        if gate.name not in spec_names:
            log.warning(f"no check named {gate.name} is defined; result not recorded as a check: {gate.description}")
    results = [check_result(g, dataset) for g in gates if g.name in spec_names]
    return results + [
        dg.AssetCheckResult(
            check_name=n, passed=True, description=f"no such threshold configured for dataset {dataset}", metadata={"dataset": dataset}
        )
        for n in sorted(spec_names - {g.name for g in gates})
    ]
