"""The regression gate: this evaluation against the blessed one, paired on common queries.

:func:`regression_gate` implements ``DriftSettings.rule == "significance"``. For each checked retriever
it pairs the current and the blessed per-query frames (``query_results``) on the queries both hold,
and alerts when the drop of ``settings.metric`` is both

* **significant**: a ONE-SIDED paired randomisation test (:func:`~retrieval_pipeline.core.evaluation.statistics.stats.randomisation_test`,
  H1: the metric got worse), Holm-corrected across the checked retrievers, at ``settings.alpha``.
  One-sided because the gate is about drops only: an improvement must never raise it, and a
  two-sided test would spend half of alpha on that direction;
* **practical**: the drop in the metric's bad direction is at least ``settings.min_drop`` (absolute).

It also lists the **flipped queries**: found in the top ``k`` before and not now, where ``k`` is the
metric's cut-off (``hit_rate@5`` -> 5). For a metric without a cut-off (``mrr``, ``not_found_rate``)
``k`` is 1: a flip is a query whose first relevant document left rank 1. "Found in the top k" reads
``first_relevant_rank <= k``. Queries that entered the top ``k`` are counted as gained.

The old rule (``rule: relative``, a relative drop of the aggregated metric against the previous
materialisation) stays :func:`retrieval_pipeline.core.evaluation.checks.thresholds.drift_gate`; the caller picks the
rule from ``DriftSettings.rule``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from retrieval_pipeline.core.evaluation.metrics import higher_is_better, resolve_metric, validate_metric_name
from retrieval_pipeline.core.evaluation.statistics.significance import DERIVED_METRICS, check_query_results, per_query_values
from retrieval_pipeline.core.evaluation.statistics.stats import derive_seed, holm, randomisation_test

#: ``higher_is_better -> alternative`` of the one-sided test of ``blessed - current`` (a drop).
_DROP_ALTERNATIVE: dict[bool, Literal["greater", "less"]] = {True: "greater", False: "less"}

#: Flipped queries named per alerting retriever in the description.
MAX_FLIPPED_IN_DESCRIPTION = 10

#: Columns of :attr:`RegressionReport.frame`, in order.
REGRESSION_COLUMNS: tuple[str, ...] = (
    "retriever",
    "status",
    "n_common",
    "n_only_current",
    "n_only_blessed",
    "n_paired",
    "before",
    "after",
    "drop",
    "p",
    "p_holm",
    "significant",
    "practical",
    "alert",
    "k",
    "n_flipped",
    "n_gained",
    "note",
)

#: Columns of :attr:`RegressionReport.flipped`.
FLIPPED_COLUMNS: tuple[str, ...] = ("retriever", "query_id", "old_rank", "new_rank")


class DriftSettings(BaseModel):
    """When the drift check on ``retrieval_metrics`` fails.

    ``rule: significance`` (default): the drop of ``metric`` against the blessed baseline is significant
    (paired randomisation test, Holm-corrected across the checked retrievers, at ``alpha``) AND at
    least ``min_drop`` (absolute). ``rule: relative``: the old rule, a relative drop above
    ``max_relative_drop`` against the previous materialisation.

    The blessed baseline is the materialisation of run ``blessed_run_id`` when set, else the latest
    materialisation whose run carries the tag ``retrieval_pipeline/blessed=true``, else the previous one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = "hit_rate@5"
    rule: Literal["significance", "relative"] = "significance"
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    min_drop: float = Field(0.05, ge=0.0, lt=1.0)
    max_relative_drop: float = Field(0.10, gt=0.0, lt=1.0)
    # alpha, n_permutations, seed and min_queries_for_test repeat StatisticsSettings' (statistics/stats.py) on
    # purpose: the gate's test has settings of its own (down to 1,000 permutations), so retuning the report's
    # statistics never moves a gate
    n_permutations: int = Field(10_000, ge=1_000, le=1_000_000)
    seed: int = 13
    min_queries_for_test: int = Field(6, ge=2)
    blessed_run_id: str | None = None


@dataclass
class RegressionReport:
    """What the regression gate found.

    Attributes:
        passed: True when no checked retriever alerts.
        description: One readable paragraph: each alerting retriever with before -> after, p and up to
            :data:`MAX_FLIPPED_IN_DESCRIPTION` flipped queries with their ranks, then the others.
        frame: One row per checked retriever, columns :data:`REGRESSION_COLUMNS`.
        flipped: The queries that left the top ``k``, columns :data:`FLIPPED_COLUMNS` (ranks NaN when not found).
        metric: The gated metric.
        settings: The settings used.
    """

    passed: bool
    description: str
    frame: pd.DataFrame
    flipped: pd.DataFrame
    metric: str
    settings: DriftSettings = field(default_factory=DriftSettings)

    @property
    def alerting(self) -> list[str]:
        """The retrievers that alert, in checked order."""
        return self.frame.loc[self.frame["alert"].astype(bool), "retriever"].tolist()

    def metadata(self) -> dict[str, float | int | str]:
        """Plain values for Dagster check metadata: the rule, then ``<retriever>_<figure>`` per retriever (NaN left out)."""
        meta: dict[str, float | int | str] = {
            "rule": "significance",
            "metric": self.metric,
            "alpha": float(self.settings.alpha),
            "min_drop": float(self.settings.min_drop),
            "passed": int(self.passed),
            "n_alerts": len(self.alerting),
            "alerting": ", ".join(self.alerting),
        }
        figures = {"n_common": int, "n_only_current": int, "n_only_blessed": int, "before": float, "after": float, "drop": float}
        figures |= {"p": float, "p_holm": float, "alert": int, "n_flipped": int, "n_gained": int, "status": str}
        for record in self.frame.to_dict("records"):
            for name, cast in figures.items():
                value = record[name]
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    meta[f"{record['retriever']}_{name}"] = cast(value)
        return meta


# --------------------------------------------------------------------------------------------------
# One retriever
# --------------------------------------------------------------------------------------------------


def _cutoff(metric: str) -> int:
    """The ``k`` of "found in the top k" for flipped queries: the metric's cut-off, or 1 without one."""
    return resolve_metric(metric)[1] or 1


def _ranks(frame: pd.DataFrame, retriever: str, label: str) -> pd.Series:
    """``first_relevant_rank`` by ``query_id`` for one retriever (NaN when not found)."""
    if "first_relevant_rank" not in frame.columns:
        raise ValueError(f"query_results of {label}: no column 'first_relevant_rank' (needed to list flipped queries)")
    rows = frame[frame["retriever"] == retriever]
    return pd.Series(rows["first_relevant_rank"].astype(float).to_numpy(), index=rows["query_id"].to_numpy())


def _flips(current: pd.DataFrame, blessed: pd.DataFrame, retriever: str, common: pd.Index, k: int) -> tuple[pd.DataFrame, int]:
    """Queries found in the top ``k`` before and not now (with both ranks), and the count of the reverse."""
    old = _ranks(blessed, retriever, "the blessed evaluation").reindex(common)
    new = _ranks(current, retriever, "the current evaluation").reindex(common)
    was_in, is_in = (old <= k).to_numpy(), (new <= k).to_numpy()  # NaN compares False: not found
    lost = was_in & ~is_in
    flipped = pd.DataFrame(
        {"retriever": retriever, "query_id": common[lost], "old_rank": old[lost].to_numpy(), "new_rank": new[lost].to_numpy()}
    )
    return flipped, int((~was_in & is_in).sum())


def _values(frame: pd.DataFrame, retriever: str, metric: str, label: str) -> pd.Series:
    """Per-query values of ``metric`` by ``query_id`` for one retriever."""
    rows = frame[frame["retriever"] == retriever]
    return pd.Series(per_query_values(rows, metric, label).to_numpy(), index=rows["query_id"].to_numpy())


def _new_row(retriever: str, n_current: int, k: int, note: str) -> dict[str, object]:
    """The row of a retriever with nothing to compare with."""
    row: dict[str, object] = dict.fromkeys(REGRESSION_COLUMNS, math.nan) | {"k": k}
    row |= {"retriever": retriever, "status": "new", "n_common": 0, "n_only_current": n_current, "n_only_blessed": 0, "n_paired": 0}
    row |= {"significant": False, "practical": False, "alert": False, "n_flipped": 0, "n_gained": 0, "note": note}
    return row


def _compare(
    current: pd.DataFrame, blessed: pd.DataFrame, retriever: str, settings: DriftSettings
) -> tuple[dict[str, object], pd.DataFrame]:
    """The row of one retriever present in both evaluations (before Holm) and its flipped queries."""
    now, before = (
        _values(current, retriever, settings.metric, "the current evaluation"),
        _values(blessed, retriever, settings.metric, "the blessed evaluation"),
    )
    common = now.index.intersection(before.index, sort=False)
    paired = pd.DataFrame({"before": before.reindex(common), "after": now.reindex(common)}).dropna()
    higher = bool(higher_is_better(settings.metric))
    k = _cutoff(settings.metric)
    flipped, gained = _flips(current, blessed, retriever, common, k)
    row: dict[str, object] = {"retriever": retriever, "status": "checked", "n_common": len(common)}
    row |= {"n_only_current": len(now.index.difference(before.index)), "n_only_blessed": len(before.index.difference(now.index))}
    row |= {"n_paired": len(paired), "k": k, "n_flipped": len(flipped), "n_gained": gained, "p": math.nan, "note": ""}
    mean_before = float(paired["before"].mean()) if len(paired) else math.nan
    mean_after = float(paired["after"].mean()) if len(paired) else math.nan
    row |= {"before": mean_before, "after": mean_after, "drop": (mean_before - mean_after) * (1.0 if higher else -1.0)}
    if len(paired) < settings.min_queries_for_test:
        row |= {"status": "too few queries", "note": f"not enough queries for a test (n={len(paired)} < {settings.min_queries_for_test})"}
        return row, flipped
    seed = derive_seed(settings.seed, "regression", settings.metric, retriever)
    row["p"] = randomisation_test(paired["before"], paired["after"], settings.n_permutations, seed, _DROP_ALTERNATIVE[higher])
    return row, flipped


# --------------------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------------------


def _check_metric(metric: str, frames: dict[str, pd.DataFrame]) -> None:
    """Raise a ValueError when the metric is unknown, not a mean over queries, or missing from a frame."""
    validate_metric_name(metric)
    derived = DERIVED_METRICS.get(metric)
    column = derived.source if derived else metric
    for label, frame in frames.items():
        if column not in frame.columns:
            raise ValueError(f"query_results of {label}: no per-query column {column!r} for the drift metric {metric!r}")


def _rank_text(rank: float) -> str:
    return "not found" if math.isnan(rank) else str(int(rank))


def _p_text(p: float, n_permutations: int) -> str:
    """``0.0123``, or ``< 0.0001`` for a p of 0 (no permutation was as extreme: p < 1 / n_permutations)."""
    return f"< {1 / n_permutations:.2g}" if p == 0 else f"{p:.4f}"


def _alert_text(row: dict[str, object], flipped: pd.DataFrame, settings: DriftSettings) -> str:
    """``bm25 0.620 -> 0.430 (drop 0.190, p 0.0003, Holm p 0.0009, 94 common queries; lost from the top 5: ...)``."""
    mine = flipped[flipped["retriever"] == row["retriever"]][["query_id", "old_rank", "new_rank"]]
    shown = ", ".join(
        f"{q} ({_rank_text(o)} -> {_rank_text(n)})" for q, o, n in mine.head(MAX_FLIPPED_IN_DESCRIPTION).itertuples(index=False)
    )
    more = f" and {len(mine) - MAX_FLIPPED_IN_DESCRIPTION} more" if len(mine) > MAX_FLIPPED_IN_DESCRIPTION else ""
    lost = f"lost from the top {row['k']}: {shown}{more}" if len(mine) else f"none lost from the top {row['k']}"
    return (
        f"{row['retriever']} {row['before']:.3f} -> {row['after']:.3f} (drop {row['drop']:.3f}, "
        f"p {_p_text(row['p'], settings.n_permutations)}, Holm p {_p_text(row['p_holm'], settings.n_permutations)}, "
        f"{row['n_paired']} common queries; {lost}; {row['n_gained']} gained)"
    )


def _other_text(row: dict[str, object], settings: DriftSettings) -> str:
    """A short account of a retriever that does not alert."""
    if row["status"] != "checked":
        return f"{row['retriever']}: {row['note']}"
    why = "drop not significant" if not row["significant"] else f"drop below {settings.min_drop:g}"
    return f"{row['retriever']} {row['before']:.3f} -> {row['after']:.3f} (Holm p {_p_text(row['p_holm'], settings.n_permutations)}; {why})"


def _query_counts_text(rows: list[dict[str, object]]) -> str:
    """Where the current and blessed query sets differ, say so, grouping retrievers with the same counts."""
    groups: dict[tuple[object, object, object], list[str]] = {}
    for r in rows:
        if r["status"] != "new" and (r["n_only_current"] or r["n_only_blessed"]):
            groups.setdefault((r["n_common"], r["n_only_current"], r["n_only_blessed"]), []).append(str(r["retriever"]))
    return "".join(
        f" Compared on {common} common queries ({current} only in current, {blessed} only in blessed): {', '.join(names)}."
        for (common, current, blessed), names in groups.items()
    )


def _describe(rows: list[dict[str, object]], flipped: pd.DataFrame, settings: DriftSettings) -> str:
    """The report's paragraph."""
    tested = sum(r["status"] == "checked" for r in rows)
    test = f"one-sided paired randomisation test, Holm across {tested} tested retrievers"
    head = f"{settings.metric} against the blessed evaluation ({test}; alert when Holm p <= {settings.alpha:g} and drop >= {settings.min_drop:g})"
    alerts = [_alert_text(r, flipped, settings) for r in rows if r["alert"]]
    others = [_other_text(r, settings) for r in rows if not r["alert"]]
    text = f"{head}: REGRESSION for " + "; ".join(alerts) + "." if alerts else f"{head}: no regression."
    if others:
        text += " " + ("Others" if alerts else "Checked") + ": " + "; ".join(others) + "."
    return text + _query_counts_text(rows)


def regression_gate(
    current: pd.DataFrame, blessed: pd.DataFrame | None, retrievers: Sequence[str], settings: DriftSettings
) -> RegressionReport:
    """Compare this evaluation with the blessed one, per retriever, on the queries both hold.

    For each checked retriever: ``before`` / ``after`` are the means of ``settings.metric`` over the
    paired queries (in both frames, with a value in both); ``drop`` is ``before - after`` for a metric
    where higher is better and ``after - before`` otherwise (positive = worse); ``p`` is the one-sided
    paired randomisation test of that drop (``settings.n_permutations`` sign flips, seed derived from
    ``settings.seed``, the metric and the retriever); ``p_holm`` is Holm's adjustment across the
    retrievers with a p-value; ``significant = p_holm <= alpha``, ``practical = drop >= min_drop`` and
    ``alert = significant and practical``. A retriever absent from ``blessed`` (or every retriever, when
    ``blessed`` is None) has status ``new`` and note "new: nothing to compare". With fewer than
    ``min_queries_for_test`` paired queries there is no p-value and no alert (status ``too few queries``).

    Args:
        current: This evaluation's per-query frame (``query_results``).
        blessed: An earlier, blessed evaluation of the same dataset, or None when there is none.
        retrievers: The checked retrievers.
        settings: The drift settings (``metric``, ``alpha``, ``min_drop``, ``n_permutations``, ``seed``, ...).

    Returns:
        The report; see :class:`RegressionReport`.

    Raises:
        ValueError: If the metric is unknown or missing, a frame lacks ``retriever``/``query_id``/
            ``first_relevant_rank``, a checked retriever has no rows in ``current``, or a
            (retriever, query_id) appears twice; the message says which frame.
    """
    frames = {"the current evaluation": current} | ({"the blessed evaluation": blessed} if blessed is not None else {})
    _check_metric(settings.metric, frames)
    check_query_results(current, retrievers, "the current evaluation")
    if blessed is not None:
        check_query_results(blessed, [], "the blessed evaluation")
    known = set(blessed["retriever"]) if blessed is not None else set()
    note = "new: nothing to compare" if blessed is not None else "new: no blessed evaluation to compare with"
    rows, flips = [], [pd.DataFrame(columns=list(FLIPPED_COLUMNS))]
    for retriever in retrievers:
        if retriever not in known:
            rows.append(_new_row(retriever, int((current["retriever"] == retriever).sum()), _cutoff(settings.metric), note))
            continue
        row, flipped = _compare(current, blessed, retriever, settings)
        rows.append(row)
        flips.append(flipped)
    adjusted = holm([r["p"] for r in rows])
    for row, p_holm in zip(rows, adjusted):
        row["p_holm"] = float(p_holm)
        row["significant"] = bool(p_holm <= settings.alpha)  # False for NaN
        row["practical"] = bool(row["drop"] >= settings.min_drop)  # False for NaN
        row["alert"] = row["significant"] and row["practical"]
    flipped = pd.concat([f for f in flips if len(f)] or flips[:1], ignore_index=True).astype({"old_rank": float, "new_rank": float})
    frame = pd.DataFrame(rows, columns=list(REGRESSION_COLUMNS))
    passed = not frame["alert"].astype(bool).any()
    return RegressionReport(passed, _describe(rows, flipped, settings), frame, flipped[list(FLIPPED_COLUMNS)], settings.metric, settings)
