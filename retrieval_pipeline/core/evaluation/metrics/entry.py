"""The shape of a metric entry (:class:`MetricInfo`) and the rules an entry must keep.

Each module of :mod:`~retrieval_pipeline.core.evaluation.metrics.families` declares its entries (one per
metric or column) beside its formula; :mod:`~retrieval_pipeline.core.evaluation.metrics.registry` collects
them and looks names up. This module says what an entry holds and checks one (:func:`entry_problems`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from retrieval_pipeline.core.evaluation.metrics.judging import Formula

#: How a metric is summarised over queries: ``mean`` (over all queries), ``rate`` (share of queries),
#: ``mean_over_found`` (mean over the queries where it is defined; NaN elsewhere), ``count``, ``p95``
#: (95th percentile), ``none`` (bookkeeping: not aggregated).
Aggregation = Literal["mean", "rate", "mean_over_found", "count", "p95", "none"]

#: ``per_query``: a per-query column that ``aggregate`` averages; ``summary``: a figure only
#: ``aggregate`` produces (counts, rates and latencies); ``bookkeeping``: a per-query column that is
#: not a metric (ids, flags, raw ranks).
Kind = Literal["per_query", "summary", "bookkeeping"]

#: The short lists of metrics, besides the comparison table (``headline``): ``console``, the retriever table
#: ``make run`` prints (under each entry's ``label``); ``summary``, the report's compact table (Dagster
#: metadata); ``chart``, the report's bar and weekly trend charts; ``sweep``, the metrics the fusion sweep reports.
View = Literal["console", "summary", "chart", "sweep"]
VIEWS: tuple[View, ...] = ("console", "summary", "chart", "sweep")

#: Which cut-offs of an entry a list shows: a tuple of cut-offs for an ``@{k}`` pattern, True / False for a plain name.
Shown = bool | tuple[int, ...]


#: Where the per-query frame of :func:`~retrieval_pipeline.core.evaluation.metrics.frame.per_query_metrics` takes
#: an entry's cut-offs from: the argument of that name (``ks``, ``precision_ks``, ``f1_k``, ``ndcg_k``), or
#: ``plain`` for a name without one; None: not a column of that frame.
FrameCutoffs = Literal["ks", "precision_ks", "f1_k", "ndcg_k", "plain"]

#: The suffix of a name pattern with a cut-off (``hit_rate@{k}``).
K_SUFFIX = "@{k}"
#: The suffix of a name pattern with a persistence parameter instead (``rbp(p={k})``: ``{k}`` is a float in (0, 1)).
P_SUFFIX = "(p={k})"
_NAME = re.compile(r"[a-z][a-z0-9_]*(@\{k\}|\(p=\{k\}\))?")
_AVERAGED: frozenset[str] = frozenset({"mean", "rate", "mean_over_found"})


@dataclass(frozen=True)
class MetricInfo:
    """One metric or column of the registry.

    Attributes:
        name: The name, or a pattern ending in ``@{k}`` for a metric with a cut-off.
        description: One sentence; ``{k}`` in it is replaced by the cut-off.
        higher_is_better: The better direction; None for bookkeeping columns and counts with no better direction.
        aggregation: How the metric is summarised over queries (see :data:`Aggregation`).
        kind: ``per_query``, ``summary`` or ``bookkeeping`` (see :data:`Kind`).
        headline: Shown in comparison tables: True / False for a plain name, the cut-offs shown for a pattern.
        formula: The per-query formula on a judged ranking (each family module of :mod:`~retrieval_pipeline.core.evaluation.metrics.families`);
            None for columns computed otherwise (context similarity, the LLM judge, summaries, bookkeeping).
        objective: What the fusion sweep may tune on, as ``headline``; needs a formula and higher is better.
        views: The short lists that show it (:data:`View`), with the cut-offs shown, as ``headline``.
        label: The short header of the console's table (``{k}`` is the cut-off); empty: the name.
        aliases: The spellings :func:`~retrieval_pipeline.core.evaluation.metrics.names.parse_metric` accepts for
            it (lower case, without the cut-off); empty: the API does not offer it. A family with both a plain
            and an ``@{k}`` entry takes an optional cut-off; one with only the pattern needs one.
        trec_eval: The trec_eval / pytrec_eval measure with the same value (``{k}``: the cut-off, as in
            ``ndcg_cut.{k}``); empty when there is none.
        frame: Where :func:`~retrieval_pipeline.core.evaluation.metrics.frame.per_query_metrics` takes its
            cut-offs from (:data:`FrameCutoffs`); None: not one of that frame's columns.
        order: Where it sorts among the entries (headline, views, frame columns); ties keep discovery order.
        default_k: The parameter a name without one gets (``rbp`` is ``rbp(p=0.8)``); None: none.
    """

    name: str
    description: str
    higher_is_better: bool | None
    aggregation: Aggregation
    kind: Kind
    headline: Shown = False
    formula: Formula | None = None
    objective: Shown = False
    views: Mapping[View, Shown] = field(default_factory=dict, hash=False)
    label: str = ""
    aliases: tuple[str, ...] = ()
    trec_eval: str = ""
    frame: FrameCutoffs | None = None
    order: int = 500
    default_k: float | None = None

    @property
    def has_cutoff(self) -> bool:
        """Whether the name is a pattern (``@{k}``, or ``(p={k})`` for a parameter)."""
        return self.name.endswith((K_SUFFIX, P_SUFFIX))

    @property
    def base(self) -> str:
        """The name without its pattern suffix (``hit_rate@{k}`` -> ``hit_rate``)."""
        return self.name.removesuffix(K_SUFFIX).removesuffix(P_SUFFIX)

    @property
    def takes_fraction(self) -> bool:
        """Whether the pattern's parameter is a fraction in (0, 1) (``rbp(p={k})``) rather than a cut-off >= 1."""
        return self.name.endswith(P_SUFFIX)

    @property
    def is_metric(self) -> bool:
        """Whether this is a metric (per-query or summary), not a bookkeeping column."""
        return self.kind != "bookkeeping"

    @property
    def objective_names(self) -> tuple[str, ...]:
        """The concrete names of this entry the fusion sweep may tune on."""
        return self._shown_names(self.objective)

    @property
    def headline_names(self) -> tuple[str, ...]:
        """The concrete names of this entry shown in comparison tables, in table order."""
        return self._shown_names(self.headline)

    def view_names(self, view: View) -> tuple[str, ...]:
        """The concrete names of this entry that ``view`` shows, in cut-off order."""
        return self._shown_names(self.views.get(view, False))

    def _shown_names(self, shown: Shown) -> tuple[str, ...]:
        if isinstance(shown, tuple):
            return tuple(self.concrete_name(k) for k in shown)
        return (self.name,) if shown else ()

    def concrete_name(self, k: int | None = None) -> str:
        """The name for cut-off ``k`` (``hit_rate@{k}`` with 5 -> ``hit_rate@5``); plain names ignore ``k``."""
        return self.name.replace("{k}", str(k)) if self.has_cutoff else self.name

    def describe(self, k: int | None = None) -> str:
        """The description with ``{k}`` replaced by the cut-off."""
        return self.description.format(k=k) if self.has_cutoff else self.description


def entry_problems(info: MetricInfo) -> list[str]:
    """What is wrong with one entry (empty when it is consistent)."""
    problems = [] if _NAME.fullmatch(info.name) else ["name must be lower_snake_case, optionally ending in @{k}"]
    if not info.description.strip() or ("{k}" in info.description) != info.has_cutoff:
        problems.append("description must be non-empty and mention {k} exactly when the name has a cut-off")
    if (info.kind == "bookkeeping") != (info.aggregation == "none"):
        problems.append("bookkeeping columns, and only they, have aggregation 'none'")
    if info.kind == "per_query" and (info.aggregation not in _AVERAGED or info.higher_is_better is None):
        problems.append(f"per-query metrics are averaged ({sorted(_AVERAGED)}) and have a better direction")
    if info.kind == "bookkeeping" and (info.higher_is_better is not None or info.headline):
        problems.append("bookkeeping columns have no direction and are not headline")
    if not _fits(info, info.headline):
        problems.append("headline is a tuple of cut-offs >= 1 for an @{k} pattern, a bool otherwise")
    problems += [f"views.{view}: {why}" for view, shown in info.views.items() if (why := _shown_problem(info, view, shown))]
    if (info.formula is not None or info.objective) and info.kind != "per_query":
        problems.append("only per-query metrics have a formula or are tuning objectives")
    if info.objective and (info.formula is None or info.higher_is_better is not True):
        problems.append("a tuning objective needs a formula, and higher must be better")
    if not _fits(info, info.objective):
        problems.append("objective is a tuple of cut-offs >= 1 for an @{k} pattern, a bool otherwise")
    if info.label and ("{k}" in info.label) != info.has_cutoff:
        problems.append("the label mentions {k} exactly when the name has a cut-off")
    if (info.aliases or info.frame) and info.formula is None:
        problems.append("only metrics with a formula have aliases or are columns of the per-query frame")
    if info.frame is not None and (info.frame == "plain") == info.has_cutoff:
        problems.append("frame is 'plain' exactly for a name without a cut-off")
    if info.trec_eval and ("{k}" in info.trec_eval) != info.has_cutoff:
        problems.append("the trec_eval name mentions {k} exactly when the name has a cut-off")
    return problems


def _shown_problem(info: MetricInfo, view: str, shown: Shown) -> str | None:
    """Why a view's entry is wrong (an unknown view, cut-offs for a plain name or a bool for a pattern), or None."""
    if view not in VIEWS:
        return f"unknown view; the views are {list(VIEWS)}"
    if info.kind == "bookkeeping" and shown:
        return "bookkeeping columns are in no view"
    if not _fits(info, shown):
        return "a tuple of cut-offs >= 1 for an @{k} pattern, a bool otherwise"
    return None


def _fits(info: MetricInfo, shown: Shown) -> bool:
    """Whether ``shown`` is cut-offs >= 1 for an ``@{k}`` pattern, a bool for a plain name."""
    if isinstance(shown, tuple):
        return info.has_cutoff and all(isinstance(k, int) and k >= 1 for k in shown)
    return not info.has_cutoff


def per_query(
    name: str,
    description: str,
    formula: Formula | None = None,
    *,
    aggregation: Aggregation = "mean",
    higher: bool = True,
    **fields: object,
) -> MetricInfo:
    """A per-query metric entry (the common case): averaged over queries, higher better unless said."""
    none_shown: Shown = () if name.endswith((K_SUFFIX, P_SUFFIX)) else False
    fields = {"headline": none_shown, "objective": none_shown} | fields
    return MetricInfo(name, description, higher, aggregation, "per_query", formula=formula, **fields)  # type: ignore[arg-type]
