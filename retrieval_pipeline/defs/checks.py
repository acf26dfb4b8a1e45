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

#: What every check's description says about where the UI shows which partition.
PER_PARTITION = (
    "Recorded per dataset partition: the check list and the Partition column name the dataset; the asset page's "
    "'Latest check results' summary is the latest evaluated partition's."
)


def blocking_datasets(metric: str) -> list[str]:
    """The datasets whose ``metric`` threshold has ERROR severity: the only ones where a failure can block the run."""
    return [name for name, d in REGISTRY.datasets.items() if metric in d.thresholds and d.thresholds[metric].severity == "ERROR"]


def _threshold_description(metric: str) -> str:
    """What a threshold check does and where it blocks: declared blocking only when some dataset's threshold is an ERROR."""
    blocks, warns = blocking_datasets(metric), [n for n, d in REGISTRY.datasets.items() if metric in d.thresholds]
    warns = [n for n in warns if n not in blocks]
    what = f"Every checked retriever's {metric} is at least the dataset's threshold."
    if blocks:
        what += f" ERROR (blocks downstream steps and fails the run when a gated retriever is below) on: {', '.join(blocks)}."
    if warns:
        what += f" WARN only (never blocks) on: {', '.join(warns)}."
    return f"{what} {PER_PARTITION}"


def _build_check_specs() -> list[dg.AssetCheckSpec]:
    """One threshold check per metric any registered dataset sets a threshold on, plus the drift checks.

    Every spec is partitioned by dataset, so each dataset has its own check status and history. A threshold check is
    declared ``blocking`` only when some dataset sets it at ERROR severity (Dagster blocks on a failed blocking
    check of ERROR severity only); a WARN-only threshold and the drift checks (WARN) are not blocking.
    """
    metrics = sorted({m for d in REGISTRY.datasets.values() for m in d.thresholds})
    drift = sorted({d.drift.metric for d in REGISTRY.datasets.values()})
    specs = [
        partitioned_check_spec(
            check_name(m), asset="retrieval_metrics", blocking=bool(blocking_datasets(m)), description=_threshold_description(m)
        )
        for m in metrics
    ]
    specs += [
        partitioned_check_spec(
            drift_check_name(m),
            asset="retrieval_metrics",
            description=f"{m} did not drop against the blessed baseline evaluation: by default, no drop that is both significant "
            "(paired randomisation test, Holm-corrected) and larger than the dataset's drift.min_drop; the flipped queries are listed. "
            f"WARN, never blocks. {PER_PARTITION}",
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
    meta.update(gate.extra)
    return dg.AssetCheckResult(
        check_name=gate.name,
        passed=gate.passed,
        description=f"[dataset {dataset}] {gate.description}",
        severity=dg.AssetCheckSeverity.ERROR if gate.severity == "ERROR" else dg.AssetCheckSeverity.WARN,
        metadata=dagster_metadata({k: v for k, v in meta.items() if v is not None}),
    )


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
            check_name=n,
            passed=True,
            description=f"[dataset {dataset}] no such threshold configured for this dataset",
            metadata={"dataset": dataset},
        )
        for n in sorted(spec_names - {g.name for g in gates})
    ]
