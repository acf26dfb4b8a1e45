"""Fusion parameters tuned on a seeded dev half of the queries, reported on the other half.

A hybrid retriever (``kind: hybrid``) fuses the ranked lists of its components, and its one parameter
(the min-max weight ``alpha`` of the first component, or the RRF constant ``k``) is otherwise never tuned.
Tuning it on the queries it is then scored on would flatter it, so:

1. :func:`split_queries` puts each evaluated query in a **dev** or a **test** half with a keyed hash
   of ``(seed, query_id)``: a query's half depends on nothing else (not on row order, not on which other
   queries are present), so adding queries never moves the existing ones.
2. :func:`sweep` re-fuses the components' stored runs (``retrieval_runs``) at every grid value, scores
   every setting on both halves, **chooses on dev only** (by ``TuningSettings.objective``; ties go to the
   value closest to the configured one, then the smaller) and reports the chosen and the configured
   value on **test**, next to each component alone on test.

Re-fusion (:mod:`retrieval_pipeline.core.evaluation.tuning.refusion`) reproduces the hybrid exactly from its
components' stored runs. The metrics the sweep reports (the registry's ``sweep`` view) and the objectives
it may choose on (entries flagged ``objective``) come from :mod:`retrieval_pipeline.core.evaluation.metrics.registry`,
and are computed by the registry's formulas.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval_pipeline.core.common.asset_metadata import Markdown, md_preview
from retrieval_pipeline.core.common.types import Qrels
from retrieval_pipeline.core.evaluation.metrics import resolve_metric, tuning_objectives, view_columns
from retrieval_pipeline.core.evaluation.tuning.refusion import (
    DEFAULT_CUT,
    FUSION_SCORES,
    Judgements,
    SkipHybrid,
    fusion_table,
    setting_metrics,
    stored_metrics,
)

if TYPE_CHECKING:
    from retrieval_pipeline.core.retrieval.kinds.hybrid import HybridSpec

DEFAULT_ALPHAS: tuple[float, ...] = tuple(round(i / 20, 2) for i in range(21))
DEFAULT_RRF_KS: tuple[float, ...] = (1, 2, 5, 10, 20, 30, 45, 60, 80, 100, 150, 200)

#: A dataset needs at least this many evaluated queries (and a non-empty half each) to be split.
MIN_QUERIES = 4
#: Dev objectives closer than this count as tied.
_TIE_TOLERANCE = 1e-12
HALVES: tuple[str, ...] = ("dev", "test")


class TuningSettings(BaseModel):
    """The fusion sweep: grid, the metric chosen on, and the seeded dev/test split.

    ``datasets.yaml``: ``tuning: {objective, alphas, rrf_ks, seed, dev_share}``. ``objective`` is a metric the
    registry flags ``objective`` (:func:`~retrieval_pipeline.core.evaluation.metrics.registry.tuning_objectives`; higher is
    better for each); ``alphas`` lie in [0, 1]; ``rrf_ks`` are >= 0.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: str = "ndcg@10"
    alphas: tuple[float, ...] = Field(DEFAULT_ALPHAS, min_length=2)
    rrf_ks: tuple[float, ...] = Field(DEFAULT_RRF_KS, min_length=2)
    seed: int = 13
    dev_share: float = Field(0.5, gt=0.0, lt=1.0)

    @field_validator("objective")
    @classmethod
    def _known_objective(cls, value: str) -> str:
        if value not in tuning_objectives():
            raise ValueError(f"tuning.objective {value!r} is not one the sweep computes; choose one of {sorted(tuning_objectives())}")
        return value

    @field_validator("alphas")
    @classmethod
    def _alphas_in_unit_interval(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [a for a in value if not 0.0 <= a <= 1.0]
        if bad:
            raise ValueError(f"tuning.alphas must lie in [0, 1] (alpha is the first component's weight), got {bad}")
        return value

    @field_validator("rrf_ks")
    @classmethod
    def _ks_non_negative(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [k for k in value if k < 0]
        if bad:
            raise ValueError(f"tuning.rrf_ks must be >= 0, got {bad}")
        return value


# --------------------------------------------------------------------------------------------------
# The split
# --------------------------------------------------------------------------------------------------


def split_unit(query_id: str, seed: int) -> float:
    """A query's position in [0, 1): BLAKE2b of the query id, keyed with the seed, as a fraction of 2**64.

    Keyed hashing (not a shuffled list) is what makes the split stable: the value depends on the seed and
    this one id only, so neither the order queries arrive in nor the other queries present can change it,
    and a new seed re-draws every query independently.
    """
    key = int(seed).to_bytes(16, "big", signed=True)
    digest = hashlib.blake2b(str(query_id).encode("utf-8"), key=key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def split_queries(query_ids: Iterable[str], seed: int, dev_share: float) -> tuple[list[str], list[str]]:
    """Split query ids into a dev and a test half, seeded and stable.

    A query is in dev when :func:`split_unit` of ``(query_id, seed)`` is below ``dev_share``, so each
    query lands in dev with probability ``dev_share``, independently of the others. Halves are therefore
    only approximately ``dev_share`` of the queries (a binomial draw), which is the price of stability.

    Args:
        query_ids: The evaluated query ids (duplicates are counted once).
        seed: Any integer; a different seed gives an independent split.
        dev_share: Expected share of queries in dev, in (0, 1).

    Returns:
        ``(dev, test)``, each sorted, so the result does not depend on the input order either.

    Raises:
        ValueError: If ``dev_share`` is not in (0, 1).
    """
    if not 0.0 < dev_share < 1.0:
        raise ValueError(f"dev_share must be in (0, 1), got {dev_share}")
    unique = sorted({str(q) for q in query_ids})
    dev = [q for q in unique if split_unit(q, seed) < dev_share]
    chosen = set(dev)
    return dev, [q for q in unique if q not in chosen]


# --------------------------------------------------------------------------------------------------
# The fusion methods
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionMethod:
    """How one fusion method is swept: its parameter, grid, configured value, and what it cannot tune.

    Its fused scores are :data:`~retrieval_pipeline.core.evaluation.tuning.refusion.FUSION_SCORES` of the same name.
    """

    parameter: str
    grid: Callable[[TuningSettings], tuple[float, ...]]
    default: Callable[[HybridSpec], float]
    unsupported: Callable[[HybridSpec], str | None]


def _minmax_default(spec: HybridSpec) -> float:
    weights = spec.fusion_weights()
    return float(weights[0]) / float(sum(weights))


def _minmax_unsupported(spec: HybridSpec) -> str | None:
    n = len(spec.retrievers)
    return None if n == 2 else f"minmax over {n} components: alpha weighs exactly two ([alpha, 1 - alpha])"


#: The sweep of each fusion method (``HybridSpec.method``).
FUSION_METHODS: dict[str, FusionMethod] = {
    "minmax": FusionMethod("alpha", lambda s: s.alphas, _minmax_default, _minmax_unsupported),
    "rrf": FusionMethod("k", lambda s: s.rrf_ks, lambda spec: float(spec.k), lambda spec: None),
}


# --------------------------------------------------------------------------------------------------
# Choosing and the sweep
# --------------------------------------------------------------------------------------------------


def choose(values: Sequence[float], dev_scores: Sequence[float], default: float) -> float:
    """The value with the best dev score (higher is better); ties: closest to ``default``, then the smaller."""
    best = max(dev_scores)
    tied = [v for v, s in zip(values, dev_scores) if s >= best - _TIE_TOLERANCE]
    return min(tied, key=lambda v: (abs(v - default), v))


CHOSEN_COLUMNS = [
    "hybrid",
    "method",
    "parameter",
    "default_value",
    "chosen_value",
    "objective",
    "dev_default",
    "dev_chosen",
    "test_default",
    "test_chosen",
]


def sweep_metrics(objective: str) -> list[str]:
    """The metrics a sweep reports: the registry's ``sweep`` view, and the objective when it is not one of them."""
    reported = view_columns("sweep")
    return reported + ([objective] if objective not in reported else [])


def judged_depth(metrics: Sequence[str]) -> int:
    """How many ranks the sweep judges: the deepest cut-off among ``metrics``, at least :data:`~retrieval_pipeline.core.evaluation.tuning.refusion.DEFAULT_CUT`."""
    return max([DEFAULT_CUT, *(resolve_metric(m)[1] or 0 for m in metrics)])


def curve_columns(objective: str) -> list[str]:
    """The curve frame's columns, in order."""
    return ["hybrid", "method", "parameter", "value", "half", *sweep_metrics(objective), "chosen", "is_default"]


@dataclass(frozen=True)
class SweepResult:
    """The sweep of one dataset.

    Attributes:
        curve: One row per (hybrid, value, half): ``hybrid, method, parameter ("alpha" | "k"), value,
            half ("dev" | "test")``, the headline metric means (and the objective's), ``chosen``, ``is_default``.
        chosen: One row per tuned hybrid: :data:`CHOSEN_COLUMNS`, then ``test_<component>`` (the
            objective of each component alone on test), ``n_dev``, ``n_test``, ``note``.
        skipped: ``"<hybrid>: <reason>"`` for each hybrid that could not be swept.
        n_dev: Queries in the dev half.
        n_test: Queries in the test half.
        objective: The metric chosen on.
        note: Why nothing was swept (too few queries), else empty.
    """

    curve: pd.DataFrame
    chosen: pd.DataFrame
    skipped: list[str]
    n_dev: int
    n_test: int
    objective: str
    note: str = ""

    def metadata(self, digits: int = 4) -> dict[str, Any]:
        """Plain metadata values: per hybrid the default and chosen value and the dev/test objective, counts, reasons, a table."""
        meta: dict[str, Any] = {"objective": self.objective, "n_dev": self.n_dev, "n_test": self.n_test, "skipped": list(self.skipped)}
        if self.note:
            meta["note"] = self.note
        for row in self.chosen.to_dict("records"):
            h, p = row["hybrid"], row["parameter"]
            meta[f"{h}/default_{p}"] = round(float(row["default_value"]), digits)
            meta[f"{h}/chosen_{p}"] = round(float(row["chosen_value"]), digits)
            for key in ("dev_default", "dev_chosen", "test_default", "test_chosen"):
                meta[f"{h}/{key}"] = round(float(row[key]), digits)
            for key, value in row.items():
                if str(key).startswith("test_") and key not in ("test_default", "test_chosen") and pd.notna(value):
                    meta[f"{h}/{key}"] = round(float(value), digits)
        meta["chosen_table"] = Markdown(
            md_preview(self.chosen.round(digits)) if not self.chosen.empty else f"_{self.note or 'nothing swept'}_"
        )
        return meta


def _not_enough(n: int, n_dev: int, n_test: int, dataset: str, objective: str) -> SweepResult:
    note = (
        f"not enough queries: dataset {dataset} has {n} evaluated queries (dev {n_dev}, test {n_test}); "
        f"tuning needs at least {MIN_QUERIES} and a non-empty dev and test half"
    )
    return SweepResult(
        pd.DataFrame(columns=curve_columns(objective)), pd.DataFrame(columns=CHOSEN_COLUMNS), [], n_dev, n_test, objective, note
    )


@dataclass(frozen=True)
class _Context:
    """What every hybrid's sweep shares: the runs, the qrels, the halves and the settings."""

    runs: pd.DataFrame
    judgements: Judgements
    dev: np.ndarray  # (n_queries,) bool
    settings: TuningSettings
    depth: int
    metrics: list[str]
    component_cache: dict[str, pd.DataFrame]

    def means(self, per_query: pd.DataFrame) -> dict[str, dict[str, float]]:
        return {"dev": per_query[self.dev].mean().to_dict(), "test": per_query[~self.dev].mean().to_dict()}

    def component(self, name: str) -> pd.DataFrame:
        if name not in self.component_cache:
            self.component_cache[name] = stored_metrics(self.runs, name, self.judgements, self.metrics)
        return self.component_cache[name]


def _sweep_one(spec: HybridSpec, ctx: _Context) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Curve rows and the chosen row of one hybrid; raises :class:`SkipHybrid` with the reason."""
    method = FUSION_METHODS.get(spec.method)
    if method is None or spec.method not in FUSION_SCORES:
        raise SkipHybrid(f"fusion method {spec.method!r} has no sweep; known: {sorted(FUSION_METHODS)}")
    reason = method.unsupported(spec)
    if reason:
        raise SkipHybrid(reason)
    table = fusion_table(ctx.runs, spec.retrievers, ctx.judgements, max(spec.depth, ctx.depth))
    default = method.default(spec)
    grid = sorted({float(v) for v in method.grid(ctx.settings)} | {default})
    means = {v: ctx.means(setting_metrics(table, spec.method, v, ctx.depth, ctx.judgements, ctx.metrics)) for v in grid}
    objective = ctx.settings.objective
    chosen = choose(grid, [means[v]["dev"][objective] for v in grid], default)
    base = {"hybrid": spec.name, "method": spec.method, "parameter": method.parameter}
    curve = [
        {**base, "value": v, "half": h, **means[v][h], "chosen": v == chosen, "is_default": v == default} for v in grid for h in HALVES
    ]
    notes = []
    if spec.depth > ctx.depth:
        notes.append(f"components stored at depth {ctx.depth} < hybrid depth {spec.depth}: re-fusion approximates the hybrid")
    if table.failed_queries:
        notes.append(f"{table.failed_queries} queries failed in a component (no fused hits, as in the hybrid)")
    row = {
        **base,
        "default_value": default,
        "chosen_value": chosen,
        "objective": objective,
        "dev_default": means[default]["dev"][objective],
        "dev_chosen": means[chosen]["dev"][objective],
        "test_default": means[default]["test"][objective],
        "test_chosen": means[chosen]["test"][objective],
        **{f"test_{c}": ctx.means(ctx.component(c))["test"][objective] for c in spec.retrievers},
        "n_dev": int(ctx.dev.sum()),
        "n_test": int((~ctx.dev).sum()),
        "note": "; ".join(notes),
    }
    return curve, row


def sweep(
    runs: pd.DataFrame,
    qrels: Qrels,
    hybrids: Sequence[HybridSpec],
    settings: TuningSettings,
    depth: int,
    dataset: str = "dataset",
) -> SweepResult:
    """Tune each hybrid's fusion parameter on the dev half; report dev and test numbers for every value.

    Args:
        runs: The ``retrieval_runs`` frame; it must hold each hybrid's components (the hybrid's own run is not needed).
        qrels: The evaluated queries' qrels (``scoring.evaluated_qrels``): they define the queries split.
        hybrids: Hybrid specs, in report order. ``minmax``: alpha is the weight of the first component
            (weights ``[alpha, 1 - alpha]``); ``rrf``: the constant ``k``. The configured value joins the grid.
        settings: Grid, objective, seed and dev share.
        depth: Hits per fused list (the dataset's ``retrieval.depth``; MRR reads this deep).
        dataset: Named in messages.

    Returns:
        A :class:`SweepResult`; a hybrid that cannot be swept is listed in ``skipped`` with its reason, and
        a dataset with too few queries gets empty frames and a ``note``.
    """
    metrics = sweep_metrics(settings.objective)
    judgements = Judgements.from_qrels(qrels, judged_depth(metrics))
    dev_ids, test_ids = split_queries(judgements.query_ids, settings.seed, settings.dev_share)
    if len(judgements) < MIN_QUERIES or not dev_ids or not test_ids:
        return _not_enough(len(judgements), len(dev_ids), len(test_ids), dataset, settings.objective)
    dev = np.isin(np.asarray(judgements.query_ids, dtype=object), np.asarray(dev_ids, dtype=object))
    ctx = _Context(runs, judgements, dev, settings, depth, metrics, {})
    curve: list[dict[str, Any]] = []
    chosen: list[dict[str, Any]] = []
    skipped: list[str] = []
    for spec in hybrids:
        try:
            rows, row = _sweep_one(spec, ctx)
        except SkipHybrid as exc:
            skipped.append(f"{spec.name}: {exc}")
            continue
        curve += rows
        chosen.append(row)
    curve_frame = pd.DataFrame(curve, columns=curve_columns(settings.objective))
    chosen_frame = _chosen_frame(chosen)
    return SweepResult(curve_frame, chosen_frame, skipped, len(dev_ids), len(test_ids), settings.objective)


def _chosen_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Chosen rows with the component columns after the fixed ones, then the counts and the note."""
    components = list(dict.fromkeys(k for r in rows for k in r if k.startswith("test_") and k not in CHOSEN_COLUMNS))
    return pd.DataFrame(list(rows), columns=[*CHOSEN_COLUMNS, *components, "n_dev", "n_test", "note"])
