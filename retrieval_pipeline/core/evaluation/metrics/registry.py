"""The metric registry: every metric and per-query column the pipeline produces, collected from their entries.

Each module under :mod:`~retrieval_pipeline.core.evaluation.metrics.families` declares its entries
(:class:`~retrieval_pipeline.core.evaluation.metrics.entry.MetricInfo`) beside its formula; this module
finds them all (:data:`METRICS`, sorted by each entry's ``order``) and looks names up. Names with a
cut-off are patterns: ``hit_rate@{k}`` covers ``hit_rate@1``, ``hit_rate@20``, ... (``k`` is an integer
>= 1); ``rbp(p={k})`` takes a persistence in (0, 1) instead.

Adding a metric is adding one module to a folder of ``families/`` (its formula and entry) and its test. Then
:func:`~retrieval_pipeline.core.evaluation.metrics.frame.aggregate` averages it (``kind="per_query"``),
reports bold its best value in the right direction, the UI shows its description, dataset thresholds may
name it, with ``aliases`` the public API parses it
(:mod:`~retrieval_pipeline.core.evaluation.metrics.names`), with ``frame`` the per-query frame has it, and
(flagged ``objective``) the fusion sweep may tune on it. A per-query column missing from the registry makes
``aggregate`` raise, so a new column cannot be dropped from the aggregates silently.

The headline columns (:data:`HEADLINE_COLUMNS`) follow the order of :data:`METRICS`, and within an
entry the order of its ``headline`` cut-offs. A view (:func:`view_columns`) lists the console's
columns first, then its others, each in that order.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable, Sequence

import numpy as np

from retrieval_pipeline.core.evaluation.metrics import columns as computed_elsewhere
from retrieval_pipeline.core.evaluation.metrics import families
from retrieval_pipeline.core.evaluation.metrics.entry import K_SUFFIX, P_SUFFIX, VIEWS, MetricInfo, View, entry_problems
from retrieval_pipeline.core.evaluation.metrics.judging import Judged

#: Cut-offs :data:`~retrieval_pipeline.core.evaluation.metrics.frame.METRIC_DESCRIPTIONS` lists for each ``@{k}`` pattern.
DEFAULT_KS: tuple[int, ...] = (1, 5, 10)

_CUTOFF = re.compile(r"[1-9][0-9]*")
_FRACTION = re.compile(r"0?\.[0-9]*[1-9][0-9]*")
_FAMILIES_PATH = "retrieval_pipeline/core/evaluation/metrics/families/"


def _discover() -> tuple[MetricInfo, ...]:
    """Every module's ``ENTRIES`` under ``families/`` (its sub-folders included) and in ``columns`` (the columns
    computed elsewhere), sorted by ``order`` (ties: the module's own name, then position)."""
    names = [computed_elsewhere.__name__] + [
        m.name for m in pkgutil.walk_packages(families.__path__, f"{families.__name__}.") if not m.ispkg
    ]
    found: list[MetricInfo] = []
    for name in sorted(names, key=lambda name: (name.rsplit(".", 1)[-1], name)):
        found += getattr(importlib.import_module(name), "ENTRIES", ())
    return tuple(sorted(found, key=lambda info: info.order))


#: Every metric and column, in headline order for the headline ones.
METRICS: tuple[MetricInfo, ...] = _discover()


# --------------------------------------------------------------------------------------------------
# Consistency of the entries, checked once at import
# --------------------------------------------------------------------------------------------------


def _index(entries: Sequence[MetricInfo]) -> dict[str, MetricInfo]:
    """``{name or pattern: entry}``; raises ValueError on an inconsistent or duplicate entry."""
    index: dict[str, MetricInfo] = {}
    for info in entries:
        problems = entry_problems(info) + (["duplicate name"] if info.name in index else [])
        if problems:
            raise ValueError(f"metric registry entry {info.name!r}: " + "; ".join(problems))
        index[info.name] = info
    return index


_BY_NAME: dict[str, MetricInfo] = _index(METRICS)

#: The comparison-table columns, in order.
HEADLINE_COLUMNS: tuple[str, ...] = tuple(name for info in METRICS for name in info.headline_names)


# --------------------------------------------------------------------------------------------------
# Looking names up
# --------------------------------------------------------------------------------------------------


def known_metric_names() -> list[str]:
    """Every registered name or pattern (``hit_rate@{k}``, ``mrr``, ...), in registry order."""
    return [info.name for info in METRICS]


class UnknownMetricError(KeyError):
    """A name that is not in the registry; the message lists the known names and patterns."""

    def __init__(self, name: object) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        hint = _hint(self.name)
        return (
            f"unknown metric {self.name!r}{hint}. Known metrics ({{k}} is a cut-off >= 1): "
            f"{', '.join(known_metric_names())}. New metrics are one module in a folder of {_FAMILIES_PATH}."
        )


def _hint(name: object) -> str:
    """Why a near miss is refused (``recall`` needs a cut-off, ``mrr`` takes none, ``hit_rate@0``)."""
    if not isinstance(name, str):
        return " (metric names are strings)"
    base, at, k = name.partition("@")
    if not at and f"{base}{K_SUFFIX}" in _BY_NAME:
        return f" ({base} needs a cut-off: {base}@k, e.g. {base}@5)"
    if at and f"{base}{K_SUFFIX}" in _BY_NAME:
        return f" (the cut-off must be an integer >= 1, got {k!r})"
    if at and base in _BY_NAME:
        return f" ({base} takes no cut-off)"
    return ""


def resolve_metric(name: str) -> tuple[MetricInfo, int | float | None]:
    """The registry entry of a concrete name and its cut-off (``"ndcg@20"`` -> ``(ndcg@{k} entry, 20)``).

    Args:
        name: A concrete metric or column name such as ``"hit_rate@5"``, ``"mrr"`` or ``"rbp(p=0.8)"``.

    Returns:
        The entry and the cut-off (a float for ``rbp(p={k})``; None for a name without one).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    if isinstance(name, str):
        base, at, k = name.partition("@")
        if not at and name in _BY_NAME:
            return _BY_NAME[name], None
        if at and _CUTOFF.fullmatch(k) and f"{base}{K_SUFFIX}" in _BY_NAME:
            return _BY_NAME[f"{base}{K_SUFFIX}"], int(k)
        base, paren, p = name.partition(P_SUFFIX.partition("{")[0])
        if paren and p.endswith(")") and _FRACTION.fullmatch(p[:-1]) and f"{base}{P_SUFFIX}" in _BY_NAME:
            return _BY_NAME[f"{base}{P_SUFFIX}"], float(p[:-1])
    raise UnknownMetricError(name)


def metric(name: str) -> MetricInfo:
    """The registry entry of a concrete name (``"ndcg@20"`` resolves through ``ndcg@{k}``).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    return resolve_metric(name)[0]


def describe_metric(name: str) -> str:
    """One-sentence description of a concrete name, for any cut-off (``"recall@20"``, ``"mrr"``, ...).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    info, k = resolve_metric(name)
    return info.describe(k)


def higher_is_better(name: str) -> bool | None:
    """Whether a larger value of ``name`` is better; None when no direction applies (counts, bookkeeping).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    return metric(name).higher_is_better


def is_metric_column(name: str) -> bool:
    """Whether ``name`` is a per-query metric column that ``aggregate`` averages (False for bookkeeping).

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered, so an
            unregistered column is never skipped silently.
    """
    return metric(name).kind == "per_query"


def headline_columns(available: Iterable[str] | None = None) -> list[str]:
    """The comparison-table columns in headline order, keeping only those in ``available`` when given.

    Args:
        available: The columns at hand (e.g. a metric table's ``columns``); None for all of them.

    Returns:
        Headline names such as ``["hit_rate@1", "hit_rate@5", ..., "latency_p95_ms"]``.
    """
    if available is None:
        return list(HEADLINE_COLUMNS)
    present = set(available)
    return [name for name in HEADLINE_COLUMNS if name in present]


def view_columns(view: View, available: Iterable[str] | None = None) -> list[str]:
    """The names ``view`` shows: the console's columns first, then the others, each in registry order.

    Args:
        view: One of :data:`VIEWS`.
        available: The columns at hand; None for all of the view's names.

    Returns:
        Concrete names such as ``["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@10"]`` (the sweep's).

    Raises:
        ValueError: If ``view`` is not one of :data:`VIEWS`.
    """
    if view not in VIEWS:
        raise ValueError(f"unknown metric view {view!r}; the views are {list(VIEWS)}")
    names = [name for info in METRICS for name in info.view_names(view)]
    console = {name for info in METRICS for name in info.view_names("console")}
    ordered = [n for n in names if n in console] + [n for n in names if n not in console]
    present = None if available is None else set(available)
    return [name for name in ordered if present is None or name in present]


def metric_label(name: str) -> str:
    """The console's short header of a concrete name (``"hit_rate@5"`` -> ``"hit@5"``); the name when it has none.

    Raises:
        UnknownMetricError: A KeyError listing the known names, if ``name`` is not registered.
    """
    info, k = resolve_metric(name)
    return info.label.format(k=k) if info.label else name


def tuning_objectives() -> list[str]:
    """The names the fusion sweep may tune on (``hit_rate@1``, ..., ``mrr``, ``ndcg@10``), in registry order."""
    return [name for info in METRICS for name in info.objective_names]


def compute_metric(name: str, judged: Judged) -> np.ndarray:
    """Per-query values of a concrete name on a judged ranking, by the entry's formula.

    Args:
        name: A registered name with a formula, e.g. ``"ndcg@20"``, ``"mrr"``, ``"map"``.
        judged: The ranking judged against the qrels (its ``gains`` at least as deep as the cut-off).

    Returns:
        One value per row of ``judged``.

    Raises:
        UnknownMetricError: If ``name`` is not registered.
        ValueError: If the entry has no formula (it is computed otherwise, or is not a per-query metric).
    """
    info, k = resolve_metric(name)
    if info.formula is None:
        with_formula = ", ".join(i.name for i in METRICS if i.formula is not None)
        raise ValueError(f"{name!r} is not computed from a ranking; these are: {with_formula}")
    return info.formula(judged, k)


def metric_descriptions(ks: Sequence[int] = DEFAULT_KS) -> dict[str, str]:
    """``{concrete name: description}`` for every entry, each ``@{k}`` pattern at the cut-offs ``ks``."""
    return {info.concrete_name(k): info.describe(k) for info in METRICS for k in _cutoffs(info, ks)}


def _cutoffs(info: MetricInfo, ks: Sequence[int]) -> Sequence[int | float | None]:
    """The cut-offs an entry is listed at: ``ks`` for an ``@{k}`` pattern, its default for ``(p={k})``, none otherwise."""
    if info.takes_fraction:
        return (info.default_k,)
    return ks if info.has_cutoff else (None,)


def metric_definitions_md(columns: Iterable[str]) -> str:
    """A markdown bullet list ``- **name**: description`` for the given concrete names, in their order.

    Raises:
        UnknownMetricError: A KeyError listing the known names, if a column is not registered.
    """
    return "\n".join(f"- **{name}**: {describe_metric(name)}" for name in columns)


def validate_metric_name(name: str, max_k: int | None = None) -> None:
    """Check a metric name from configuration (a threshold, the drift metric) before any run.

    Args:
        name: The concrete name, e.g. ``"hit_rate@5"``.
        max_k: The deepest cut-off that makes sense (the run depth); None for no limit.

    Raises:
        ValueError: If the name is not registered (the message lists the known names), is a bookkeeping
            column rather than a metric, or its cut-off exceeds ``max_k``.
    """
    try:
        info, k = resolve_metric(name)
    except UnknownMetricError as err:
        raise ValueError(str(err)) from None
    if not info.is_metric:
        metrics = ", ".join(i.name for i in METRICS if i.is_metric)
        raise ValueError(f"{name!r} is a bookkeeping column, not a metric; metrics are: {metrics}")
    if max_k is not None and k is not None and not info.takes_fraction and k > max_k:
        raise ValueError(f"{name!r} has cut-off {k}, deeper than the run depth {max_k}: use {info.concrete_name(max_k)} or less")
