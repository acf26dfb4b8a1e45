"""Threshold and drift checks over metric tables, Dagster-free (the asset checks in ``defs/checks.py`` show these).

One name from the YAML to the UI: a dataset's ``thresholds:`` (``{metric: {min, severity}}``) are applied here by
:func:`threshold_check`, and each becomes the Dagster check ``min_<metric>`` (:func:`check_name`).

A threshold check fails when ANY checked retriever is below the threshold; the result lists every
retriever's value so the failing one is visible. An ERROR threshold keeps its severity only when a gated
retriever (the dataset's ``gate``) is below it; otherwise its failure is reported as WARN. The drift check compares each checked retriever's
metric with the previous evaluation of the same dataset: relative drop ``(prev - cur) / prev``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckResult:
    name: str
    passed: bool
    severity: str  # ERROR | WARN
    description: str
    values: dict[str, float] = field(default_factory=dict)
    threshold: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # further check metadata (plain values, Markdown)


def check_name(metric: str) -> str:
    """A Dagster-safe check name for a metric's threshold: ``hit_rate@5`` → ``min_hit_rate_at_5``."""
    return "min_" + metric.replace("@", "_at_").replace(".", "_")


def drift_check_name(metric: str) -> str:
    return "drift_" + metric.replace("@", "_at_").replace(".", "_")


def threshold_check(
    metric: str,
    minimum: float,
    severity: str,
    metrics: Mapping[str, Mapping[str, float]],
    checked: Sequence[str],
    gated: Sequence[str] | None = None,
) -> CheckResult:
    """Fail when any checked retriever's ``metric`` is below ``minimum`` (NaN counts as failing).

    ``gated``: the retrievers whose failure keeps an ERROR threshold's severity (the dataset's ``gate``); a threshold
    failed only by other retrievers is reported as WARN, so it never fails the run. ``None``: all are gated.
    """
    gate = list(checked) if gated is None else list(gated)
    looked_at = list(dict.fromkeys([*checked, *gate]))
    values = {r: float(metrics[r][metric]) for r in looked_at if r in metrics}
    missing = [r for r in looked_at if r not in metrics]
    below = {r: v for r, v in values.items() if math.isnan(v) or v < minimum}
    extra = {} if gated is None else {"gate": gate}

    def result(passed: bool, desc: str, failing: Sequence[str]) -> CheckResult:
        demoted = severity == "ERROR" and not passed and not any(r in gate for r in failing)
        if demoted:
            desc += f" (not in the gate {gate}: reported as WARN, the run goes on)"
        return CheckResult(check_name(metric), passed, "WARN" if demoted else severity, desc, values, minimum, extra)

    if missing:
        return result(False, f"no {metric} for checked retrievers {missing}", missing)
    if below:
        desc = f"{metric} below {minimum:g} for " + ", ".join(f"{r} ({v:.3f})" for r, v in below.items())
    else:
        desc = f"{metric} >= {minimum:g} for all {len(values)} checked retrievers (lowest {min(values.values()):.3f})"
    return result(not below, desc, list(below))


def drift_gate(
    metric: str,
    max_relative_drop: float,
    current: Mapping[str, Mapping[str, float]],
    previous: Mapping[str, float] | None,
    checked: Sequence[str],
) -> CheckResult:
    """WARN when a retriever's metric fell more than ``max_relative_drop`` since the last evaluation.

    Args:
        previous: ``{retriever: value}`` from the previous materialisation, or None for the first one.
    """
    name = drift_check_name(metric)
    if not previous:
        return CheckResult(name, True, "WARN", "first evaluation of this dataset: nothing to compare with", {}, max_relative_drop)
    drops: dict[str, float] = {}
    for r in checked:
        prev, cur = previous.get(r), current.get(r, {}).get(metric)
        if prev is None or cur is None or prev <= 0 or math.isnan(prev):
            continue
        drops[r] = (prev - cur) / prev
    bad = {r: d for r, d in drops.items() if d > max_relative_drop}
    if bad:
        desc = f"{metric} fell more than {max_relative_drop:.0%} since the previous evaluation: " + ", ".join(
            f"{r} {previous[r]:.3f} -> {current[r][metric]:.3f} (-{d:.1%})" for r, d in bad.items()
        )
    else:
        desc = f"{metric} within {max_relative_drop:.0%} of the previous evaluation for all checked retrievers"
    dropped = {r: {"before": float(previous[r]), "after": float(current[r][metric])} for r in bad}
    return CheckResult(
        name,
        not bad,
        "WARN",
        desc,
        {f"{r}_relative_drop": d for r, d in drops.items()},
        max_relative_drop,
        {"metric": metric, "dropped": dropped} if dropped else {},  # the figures the alert record shows, when one fell
    )
