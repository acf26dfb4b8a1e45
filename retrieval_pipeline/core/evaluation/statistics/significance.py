"""The significance table of a ``query_results`` frame: one row per (retriever, metric), each retriever tested
against the dataset's baseline retriever (:func:`significance_table`).

The Holm family is the all-pairs one: every pair of the dataset's retrievers on the metric (:func:`all_pairs_p`, what
``retriever_pairs`` and ``compare()`` use), so a retriever marked significantly better than the baseline (▲) is
never "indistinguishable" from it in the all-pairs section. Each pair's randomisation test is seeded by
:func:`~retrieval_pipeline.core.evaluation.statistics.stats.pair_seed` alone, so a pair has one p-value everywhere.

The per-query values of a metric (measured, or derived from measured ones: :data:`DERIVED_METRICS`) are
read from the frame here; the confidence intervals and tests are those of
:mod:`~retrieval_pipeline.core.evaluation.statistics.stats`, seeded from ``StatisticsSettings.seed`` and the names of the
metric and retriever, so a table is the same run to run and adding a retriever does not change the others' numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from retrieval_pipeline.core.evaluation.metrics import headline_columns, higher_is_better, metric
from retrieval_pipeline.core.evaluation.statistics.stats import (
    StatisticsSettings,
    derive_seed,
    holm,
    pair_seed,
    paired_bootstrap_ci,
    paired_t_test,
    randomisation_test,
)

#: The columns every ``query_results`` frame must have.
_KEY_COLUMNS = ("retriever", "query_id")


# --------------------------------------------------------------------------------------------------
# Per-query values of a query_results frame
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DerivedMetric:
    """A headline metric that is a mean over queries of a transformed per-query column."""

    source: str
    compute: Callable[[pd.Series], pd.Series]


#: Headline summary metrics that are means over queries of a bookkeeping column.
DERIVED_METRICS: dict[str, DerivedMetric] = {
    "not_found_rate": DerivedMetric("found", lambda found: (~found.astype(bool)).astype(float)),
}


def _where(label: str | None) -> str:
    """How error messages name the frame: ``query_results of dataset 'stdlib'``, ``query_results of the blessed evaluation``."""
    return f"query_results of {label}" if label else "query_results"


def has_metric(frame: pd.DataFrame, name: str) -> bool:
    """Whether ``frame`` has per-query values of ``name`` (its column, or a derived metric's source column)."""
    derived = DERIVED_METRICS.get(name)
    return (derived.source if derived else name) in frame.columns


def significance_metrics(columns: Iterable[str]) -> list[str]:
    """Headline metrics that are means over queries and can be computed from ``columns``, in headline order.

    These are the per-query headline metrics (``hit_rate@k``, ``recall@k``, ``mrr``, ``ndcg@k``, ...)
    that are columns, plus the :data:`DERIVED_METRICS` (``not_found_rate`` from ``found``).
    """
    present = set(columns)
    return [
        name
        for name in headline_columns()
        if (name in present and metric(name).kind == "per_query") or (name in DERIVED_METRICS and DERIVED_METRICS[name].source in present)
    ]


def per_query_values(frame: pd.DataFrame, name: str, label: str | None = None) -> pd.Series:
    """The per-query float values of metric ``name`` in a ``query_results``-shaped frame (NaN: no value).

    Raises:
        ValueError: If the frame lacks the column, or it does not hold numbers; the message names the frame (``label``).
    """
    derived = DERIVED_METRICS.get(name)
    column = derived.source if derived else name
    if column not in frame.columns:
        raise ValueError(f"{_where(label)}: no column {column!r} for metric {name!r} (columns: {list(frame.columns)})")
    try:
        return derived.compute(frame[column]) if derived else frame[column].astype(float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{_where(label)}: column {column!r} does not hold numbers: {err}") from None


def check_query_results(frame: pd.DataFrame, retrievers: Sequence[str], label: str | None = None) -> None:
    """Raise a ValueError naming the frame (``label``) when the frame cannot be paired by query.

    Checks: the ``retriever`` and ``query_id`` columns exist, every retriever in ``retrievers`` has rows,
    and no (retriever, query_id) appears twice.
    """
    missing_columns = [c for c in _KEY_COLUMNS if c not in frame.columns]
    if missing_columns:
        raise ValueError(f"{_where(label)}: missing columns {missing_columns} (a per-query frame has one row per retriever and query)")
    absent = [r for r in retrievers if r not in set(frame["retriever"])]
    if absent:
        raise ValueError(f"{_where(label)}: no rows for retrievers {absent} (present: {sorted(set(frame['retriever']))})")
    duplicated = frame.duplicated(list(_KEY_COLUMNS))
    if duplicated.any():
        examples = frame.loc[duplicated, list(_KEY_COLUMNS)].head(3).to_records(index=False).tolist()
        raise ValueError(f"{_where(label)}: {int(duplicated.sum())} duplicate (retriever, query_id) rows, e.g. {examples}")


def wide_values(frame: pd.DataFrame, name: str, retrievers: Sequence[str], label: str | None = None) -> pd.DataFrame:
    """``query_id x retriever`` values of metric ``name`` (NaN where a retriever has no value for a query)."""
    values = frame[list(_KEY_COLUMNS)].assign(value=per_query_values(frame, name, label).to_numpy())
    values = values[values["retriever"].isin(retrievers)]
    return values.pivot(index="query_id", columns="retriever", values="value").reindex(columns=list(retrievers))


# --------------------------------------------------------------------------------------------------
# The significance table
# --------------------------------------------------------------------------------------------------

#: Columns of :func:`significance_table`, in order.
SIGNIFICANCE_COLUMNS: tuple[str, ...] = (
    "retriever",
    "metric",
    "higher_is_better",
    "n_queries",
    "mean",
    "ci_low",
    "ci_high",
    "baseline_retriever",
    "n_paired",
    "baseline",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "p_t",
    "p_randomisation",
    "p_t_holm",
    "p_randomisation_holm",
    "significant",
    "direction",
    "note",
)


def _grouped_cis(columns: pd.DataFrame, settings: StatisticsSettings, seed_key: str) -> dict[str, tuple[float, float]]:
    """Paired bootstrap CIs of every column, resampling together the columns defined on the same queries.

    Columns with the same set of non-NaN queries (all of them, when every retriever has every query)
    share one draw per resample, so their intervals are paired; a column without values gets NaN.
    """
    groups: dict[bytes, list[str]] = {}
    for name in columns.columns:
        groups.setdefault(columns[name].notna().to_numpy().tobytes(), []).append(name)
    cis: dict[str, tuple[float, float]] = {}
    for names in groups.values():
        block = columns[names].dropna()
        if block.empty:
            cis |= {name: (math.nan, math.nan) for name in names}
            continue
        low, high = paired_bootstrap_ci(
            block.to_numpy(), settings.n_bootstrap, settings.confidence, derive_seed(settings.seed, seed_key, "bootstrap", names[0])
        )
        cis |= {name: (float(lo), float(hi)) for name, lo, hi in zip(names, low, high)}
    return cis


def _too_few_note(n: int, minimum: int) -> str:
    return f"not enough queries for a test (n={n} < {minimum})"


def _comparison(
    wide: pd.DataFrame, name: str, retriever: str, baseline: str, settings: StatisticsSettings
) -> dict[str, float | int | str | None]:
    """The paired comparison of one retriever with the baseline on the queries where both have a value."""
    pair = wide[[retriever, baseline]].dropna()
    current, base = pair[retriever].to_numpy(), pair[baseline].to_numpy()
    row: dict[str, float | int | str | None] = {
        "n_paired": len(pair),
        "baseline": float(base.mean()) if len(pair) else math.nan,
        "delta": float((current - base).mean()) if len(pair) else math.nan,
        "p_t": math.nan,
        "p_randomisation": math.nan,
        "note": "",
    }
    if len(pair) < settings.min_queries_for_test:
        row["note"] = _too_few_note(len(pair), settings.min_queries_for_test)
        return row
    seed = pair_seed(settings.seed, name, retriever, baseline)
    row["p_t"] = paired_t_test(current, base)
    row["p_randomisation"] = randomisation_test(current, base, settings.n_permutations, seed)
    return row


def all_pairs_p(
    values: np.ndarray,
    names: Sequence[str],
    metric: str,
    *,
    seed: int,
    n_permutations: int,
    test: str = "randomisation",
    tested: bool = True,
) -> tuple[list[tuple[int, int]], list[float], np.ndarray]:
    """The all-pairs family of one metric: ``(pairs, raw p, Holm p)``, each pair ``(later, earlier)`` by index.

    ``values``: a ``queries x runs`` array without NaN (the queries every run has a value for). The raw p of each
    pair is Fisher's randomisation test seeded by :func:`pair_seed` (or the paired t-test); Holm's correction is
    over all the pairs of the metric. ``tested=False``: every p is NaN (too few queries).
    """
    pairs = [(j, i) for i, j in combinations(range(len(names)), 2)]  # later run against earlier
    if not tested:
        raw = [math.nan] * len(pairs)
    elif test == "t-test":
        raw = [paired_t_test(values[:, a], values[:, b]) for a, b in pairs]
    else:
        raw = [
            randomisation_test(values[:, a], values[:, b], n_permutations, pair_seed(seed, metric, names[a], names[b])) for a, b in pairs
        ]
    return pairs, raw, (holm(raw) if raw else np.empty(0))


def _family_holm(
    wide: pd.DataFrame, name: str, retrievers: list[str], baseline: str, settings: StatisticsSettings, test: str
) -> dict[str, float]:
    """``{retriever: Holm p against the baseline}`` in the all-pairs family of ``name`` (on the common queries)."""
    common = wide[retrievers].dropna().to_numpy(dtype=float)
    tested = common.shape[0] >= max(settings.min_queries_for_test, 1)
    pairs, _, adjusted = all_pairs_p(
        common, retrievers, name, seed=settings.seed, n_permutations=settings.n_permutations, test=test, tested=tested
    )
    at = retrievers.index(baseline)
    return {retrievers[a if b == at else b]: float(p) for (a, b), p in zip(pairs, adjusted) if at in (a, b)}


def _direction(significant: bool, delta: float, higher: bool) -> str | None:
    """``better`` / ``worse`` for a significant difference in the metric's good / bad direction, else None."""
    if not significant:
        return None
    return "better" if (delta > 0) == higher else "worse"


def _metric_rows(
    query_results: pd.DataFrame, name: str, retrievers: list[str], baseline: str, settings: StatisticsSettings, label: str | None
) -> list[dict[str, object]]:
    """The rows of one metric: the baseline's, then every other retriever against it, Holm-corrected."""
    wide = wide_values(query_results, name, retrievers, label)
    others = [r for r in retrievers if r != baseline]
    columns = wide.copy()
    for r in others:
        columns[f"delta:{r}"] = wide[r] - wide[baseline]
    cis = _grouped_cis(columns, settings, name)
    comparisons = {r: _comparison(wide, name, r, baseline, settings) for r in others}
    # Holm over every pair of retrievers (the all-pairs family), not only the pairs with the baseline
    p_t_holm = _family_holm(wide, name, retrievers, baseline, settings, "t-test")
    p_rand_holm = _family_holm(wide, name, retrievers, baseline, settings, "randomisation")
    higher = bool(higher_is_better(name))
    rows = []
    for r in retrievers:
        own = wide[r].dropna()
        row: dict[str, object] = {
            "retriever": r,
            "metric": name,
            "higher_is_better": higher,
            "n_queries": len(own),
            "mean": float(own.mean()) if len(own) else math.nan,
            "ci_low": cis[r][0],
            "ci_high": cis[r][1],
            "baseline_retriever": baseline,
        }
        if r == baseline:
            row |= {"n_paired": len(own), "baseline": row["mean"], "delta": 0.0, "delta_ci_low": 0.0, "delta_ci_high": 0.0}
            row |= {"p_t": math.nan, "p_randomisation": math.nan, "p_t_holm": math.nan, "p_randomisation_holm": math.nan}
            row |= {"significant": False, "direction": None, "note": "baseline"}
        else:
            row |= comparisons[r] | {"delta_ci_low": cis[f"delta:{r}"][0], "delta_ci_high": cis[f"delta:{r}"][1]}
            if math.isnan(float(row["p_randomisation"])):  # too few paired queries for this pair: no test, whatever the family
                p_t_holm[r] = p_rand_holm[r] = math.nan
            significant = bool(p_rand_holm[r] <= settings.alpha)  # False for NaN
            row |= {"p_t_holm": float(p_t_holm[r]), "p_randomisation_holm": float(p_rand_holm[r]), "significant": significant}
            row["direction"] = _direction(significant, float(row["delta"]), higher)
        if not len(own):
            row["note"] = "no values for this metric"
        rows.append(row)
    return rows


def _resolve_metrics(query_results: pd.DataFrame, metrics: Sequence[str] | None, label: str | None) -> list[str]:
    """The metrics to test: the given ones (checked) or every testable headline metric in the frame."""
    if metrics is None:
        return significance_metrics(query_results.columns)
    for name in metrics:
        if metric(name).kind != "per_query" and name not in DERIVED_METRICS:  # metric() raises on an unknown name
            raise ValueError(
                f"{_where(label)}: {name!r} is not a mean over queries; metrics that are: {significance_metrics(query_results.columns)}"
            )
        if not has_metric(query_results, name):
            raise ValueError(f"{_where(label)}: metric {name!r} has no per-query values (columns: {list(query_results.columns)})")
    return list(metrics)


def significance_table(
    query_results: pd.DataFrame,
    retrievers: Sequence[str],
    baseline: str,
    settings: StatisticsSettings,
    metrics: Sequence[str] | None = None,
    *,
    dataset: str | None = None,
) -> pd.DataFrame:
    """Means with confidence intervals, and tests of every retriever against the baseline, per metric.

    For each metric (by default every headline metric that is a mean over queries: the per-query
    headline columns present, plus ``not_found_rate`` from ``found``) and each retriever:

    * ``mean``, ``ci_low``, ``ci_high``: mean over the retriever's queries with a value (``n_queries``)
      and its percentile bootstrap CI; the CIs of all retrievers, and of the differences, are paired
      (one draw per resample) when they are defined on the same queries.
    * against the baseline, on the ``n_paired`` queries where both have a value: ``baseline`` (the
      baseline's mean there), ``delta`` (mean of retriever minus baseline, so ``mean - baseline`` when
      both have every query), its paired bootstrap CI ``delta_ci_low``/``delta_ci_high``, ``p_t``
      (:func:`paired_t_test`), ``p_randomisation`` (:func:`randomisation_test`, two-sided, seeded by
      :func:`pair_seed`), their Holm adjustments ``p_t_holm``/``p_randomisation_holm`` in the all-pairs
      family of this metric (every pair of the retrievers, on the queries all of them have: the family of
      ``retriever_pairs`` and ``compare()``); ``significant`` is ``p_randomisation_holm <= alpha``; ``direction`` is
      ``better``/``worse`` for a significant difference (the metric registry gives the good direction:
      lower ``not_found_rate`` is better), else None.
    * the baseline's own rows have NaN p-values, ``delta`` 0 and note ``baseline``; with fewer than
      ``min_queries_for_test`` paired queries the CIs are still given, the p-values are NaN and the note
      says ``not enough queries for a test (n=.. < ..)``.

    Args:
        query_results: The per-query frame (``query_results`` asset): one row per (retriever, query).
        retrievers: The retrievers to show; the baseline is added first when it is not among them.
        baseline: The dataset's baseline retriever.
        settings: Confidence, resample counts, alpha, seed and the minimum number of queries for a test.
        metrics: Metric names to test instead of the default list.
        dataset: The dataset's name, for error messages.

    Returns:
        One row per (metric, retriever), metric-major in headline order, columns :data:`SIGNIFICANCE_COLUMNS`.

    Raises:
        ValueError: If a column is missing, a retriever has no rows, a (retriever, query) appears twice,
            or a metric has no per-query values; the message names the dataset.
        KeyError: If a metric is not in the metric registry (the message lists the known names).
    """
    chosen = list(dict.fromkeys([baseline, *retrievers] if baseline not in retrievers else retrievers))
    label = f"dataset {dataset!r}" if dataset else None
    check_query_results(query_results, chosen, label)
    names = _resolve_metrics(query_results, metrics, label)
    rows = [row for name in names for row in _metric_rows(query_results, name, chosen, baseline, settings, label)]
    return pd.DataFrame(rows, columns=list(SIGNIFICANCE_COLUMNS))
