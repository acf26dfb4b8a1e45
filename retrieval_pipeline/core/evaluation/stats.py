"""Uncertainty and significance of retrieval metrics over queries.

Datasets are small (14 to 2,000 queries), so a ranking of retrievers on point estimates alone can be
noise. This module gives, Dagster-free:

* :func:`paired_bootstrap_ci`: percentile bootstrap confidence intervals of means over queries, PAIRED
  (one draw of query indices per resample is applied to every column, so the CIs of several
  retrievers and of their differences come from the same resamples);
* :func:`randomisation_test`: Fisher's paired randomisation test (random sign flips of the per-query
  differences), with ranx's conventions (``ranx.statistical_tests.fisher_randomization_test``);
* :func:`paired_t_test`: scipy's paired t-test, with p = 1 when every difference is 0;
* :func:`holm`: the Holm–Bonferroni step-down adjustment;
* :func:`significance_table`: one row per (retriever, metric) of a ``query_results`` frame, each
  retriever tested against the dataset's baseline retriever, Holm-corrected per metric.

Every random draw comes from a seeded :class:`numpy.random.Generator`; the seed of each comparison is
derived from ``StatisticsSettings.seed`` and the names of the metric and retriever (:func:`derive_seed`),
so a table is the same run to run and adding a retriever does not change the others' numbers.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as scipy_stats

from retrieval_pipeline.core.metric_registry import headline_columns, higher_is_better, metric

#: Which way a randomisation test looks: ``two-sided``, ``greater`` (mean of ``a - b`` above 0), ``less``.
Alternative = Literal["two-sided", "greater", "less"]

#: Upper bound on the number of elements of one chunk of resamples (query indices or sign flips):
#: 2**21 float64 values are 16 MB, so 2,000 queries x 2,000 resamples run in a few chunks.
_CHUNK_ELEMENTS = 2**21

#: Relative tolerance when a permuted statistic is compared with the observed one: sums of the same
#: differences in another order differ by rounding only, and a tie must count (binary metrics tie often).
_TIE_TOLERANCE = 1e-9

#: The columns every ``query_results`` frame must have.
_KEY_COLUMNS = ("retriever", "query_id")


class StatisticsSettings(BaseModel):
    """How confidence intervals and the tests against the dataset's baseline retriever are computed.

    ``datasets.yaml``: ``statistics: {confidence, n_bootstrap, n_permutations, alpha, seed, min_queries_for_test}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    n_bootstrap: int = Field(2000, ge=1000, le=100_000)
    n_permutations: int = Field(10_000, ge=10_000, le=1_000_000)
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    seed: int = 13
    min_queries_for_test: int = Field(6, ge=2)


# --------------------------------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------------------------------


def derive_seed(seed: int, *position: str | int) -> int:
    """A seed for one comparison, derived from the base seed and where the comparison sits.

    Uses :class:`numpy.random.SeedSequence` over the base seed and a CRC-32 of each part (stable across
    processes, unlike ``hash``), so ``derive_seed(13, "mrr", "bm25")`` is the same in every run and
    differs from ``derive_seed(13, "mrr", "dense")``.

    Args:
        seed: The base seed (``StatisticsSettings.seed``, ``DriftSettings.seed``).
        *position: What identifies the comparison: metric name, retriever name, purpose.

    Returns:
        A non-negative 63-bit integer seed.
    """
    parts = [zlib.crc32(str(part).encode("utf-8")) for part in position]
    state = np.random.SeedSequence([seed & 0xFFFFFFFF, *parts]).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


# --------------------------------------------------------------------------------------------------
# Bootstrap, randomisation test, t-test, Holm
# --------------------------------------------------------------------------------------------------


def _finite_matrix(values: npt.ArrayLike, name: str) -> np.ndarray:
    """``values`` as a float array with queries on axis 0; raises on empty, NaN or > 2 dimensions."""
    array = np.asarray(values, dtype=float)
    if array.ndim not in (1, 2) or array.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (n_queries,) or (n_queries, n_columns) array, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values: drop the queries without a value before resampling")
    return array


def _chunks(total: int, row_size: int) -> Iterable[int]:
    """Sizes of consecutive chunks of ``total`` rows of ``row_size`` elements, each within :data:`_CHUNK_ELEMENTS`."""
    rows = max(1, _CHUNK_ELEMENTS // max(row_size, 1))
    for start in range(0, total, rows):
        yield min(rows, total - start)


def bootstrap_means(matrix: npt.ArrayLike, n_resamples: int, seed: int) -> np.ndarray:
    """Means of ``n_resamples`` paired bootstrap resamples of the rows (queries) of ``matrix``.

    One draw of ``n`` query indices (with replacement) per resample is applied to every column. The
    draw is turned into per-query counts, so a chunk of resamples is one ``counts @ matrix`` product.

    Args:
        matrix: ``(n_queries,)`` or ``(n_queries, n_columns)`` finite values.
        n_resamples: Number of resamples (>= 1).
        seed: Seed of the :class:`numpy.random.Generator`.

    Returns:
        ``(n_resamples,)`` or ``(n_resamples, n_columns)`` resampled means.
    """
    values = _finite_matrix(matrix, "matrix")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    parts = []
    for size in _chunks(n_resamples, n):
        draws = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(float)
        parts.append(counts @ values / n)
    return np.concatenate(parts, axis=0)


def paired_bootstrap_ci(
    matrix: npt.ArrayLike, n_resamples: int = 2000, confidence: float = 0.95, seed: int = 13
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap confidence interval of the mean over queries, paired across columns.

    Each resample draws ``n`` queries with replacement, once, and applies that draw to every column
    (retriever, or difference of two retrievers), so the intervals of different columns are paired the
    way the queries are. The bounds are the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    quantiles of the resampled means (numpy's linear interpolation), as in
    ``scipy.stats.bootstrap(method="percentile")``. Identical columns give identical bounds, and a
    column of per-query differences that are all 0 gives ``(0, 0)``.

    Args:
        matrix: ``(n_queries,)`` or ``(n_queries, n_columns)`` finite per-query values.
        n_resamples: Number of bootstrap resamples.
        confidence: Coverage of the interval, in (0, 1).
        seed: Seed of the :class:`numpy.random.Generator`; the same seed gives the same interval.

    Returns:
        ``(low, high)``: floats for a 1-D input, ``(n_columns,)`` arrays for a 2-D one.

    Raises:
        ValueError: If ``matrix`` is empty, holds NaN, or ``confidence`` is not in (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    means = bootstrap_means(matrix, n_resamples, seed)
    low, high = np.quantile(means, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0], axis=0)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


def _paired_differences(a: npt.ArrayLike, b: npt.ArrayLike) -> np.ndarray:
    """``a - b`` per query; raises when the two are not the same length or hold NaN."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"paired tests need two non-empty 1-D arrays of equal length, got shapes {first.shape} and {second.shape}")
    if not (np.isfinite(first).all() and np.isfinite(second).all()):
        raise ValueError("paired tests need finite values: drop the queries without a value in either array first")
    return first - second


#: ``alternative -> (observed sum, permuted sums) -> whether each permuted sum is at least as extreme``.
_AS_EXTREME: dict[str, Callable[[float, np.ndarray, float], np.ndarray]] = {
    "two-sided": lambda observed, permuted, tol: np.abs(permuted) >= abs(observed) - tol,
    "greater": lambda observed, permuted, tol: permuted >= observed - tol,
    "less": lambda observed, permuted, tol: permuted <= observed + tol,
}


def randomisation_test(
    a: npt.ArrayLike, b: npt.ArrayLike, n_permutations: int = 10_000, seed: int = 13, alternative: Alternative = "two-sided"
) -> float:
    """Fisher's paired randomisation test of the mean difference ``a - b`` (random sign flips).

    Under the null hypothesis the two systems are exchangeable on every query, so each per-query
    difference is as likely to have the other sign. Each permutation flips every difference's sign with
    probability 1/2 (what ranx's swap of the two columns per query does); the p-value is the share of
    the ``n_permutations`` permutations whose mean difference is at least as extreme as the observed
    one. This follows ``ranx.statistical_tests.fisher_randomization_test``: two-sided on the absolute
    mean difference, ties count as extreme, and ``p = count / n_permutations`` with no +1, so p can be 0
    (read it as ``p < 1 / n_permutations``). Ties are compared with a relative tolerance of
    :data:`_TIE_TOLERANCE` so rounding does not decide them. All differences 0 gives p = 1.

    The sign flips are drawn as packed random bytes in chunks, so 2,000 queries x 10,000 permutations
    need no Python loop per permutation and bounded memory.

    Args:
        a: Per-query values of the first system.
        b: Per-query values of the second system, same queries in the same order.
        n_permutations: Number of random sign-flip permutations.
        seed: Seed of the :class:`numpy.random.Generator`.
        alternative: ``two-sided`` (ranx), ``greater`` (H1: mean of ``a - b`` > 0) or ``less``.

    Returns:
        The p-value in [0, 1].

    Raises:
        ValueError: On arrays of different lengths, NaN, an unknown ``alternative`` or ``n_permutations < 1``.
    """
    diffs = _paired_differences(a, b)
    if alternative not in _AS_EXTREME:
        raise ValueError(f"alternative must be one of {sorted(_AS_EXTREME)}, got {alternative!r}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    as_extreme = _AS_EXTREME[alternative]
    observed, tol = float(diffs.sum()), _TIE_TOLERANCE * float(np.abs(diffs).sum())
    rng = np.random.default_rng(seed)
    n, extreme = diffs.size, 0
    for size in _chunks(n_permutations, n):
        bits = np.unpackbits(rng.integers(0, 256, size=(size, (n + 7) // 8), dtype=np.uint8), axis=1, count=n)
        permuted = 2.0 * (bits @ diffs) - observed  # sum of s_i * d_i with s_i = +1 where the bit is set, else -1
        extreme += int(as_extreme(observed, permuted, tol).sum())
    return extreme / n_permutations


def paired_t_test(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Two-sided paired Student t-test p-value (``scipy.stats.ttest_rel``, as ranx's ``student`` test).

    Defined where scipy gives NaN: when every difference is 0 the systems are identical on these
    queries and p = 1. Fewer than 2 queries give NaN (no variance to estimate).

    Args:
        a: Per-query values of the first system.
        b: Per-query values of the second system, same queries in the same order.

    Returns:
        The p-value in [0, 1], or NaN for fewer than 2 queries.
    """
    diffs = _paired_differences(a, b)
    if not diffs.any():
        return 1.0
    if diffs.size < 2:
        return math.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(scipy_stats.ttest_rel(np.asarray(a, dtype=float), np.asarray(b, dtype=float)).pvalue)


def holm(pvalues: npt.ArrayLike) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p-values; NaN entries pass through and do not count.

    With the ``m`` non-NaN p-values sorted ascending, ``p_(1) <= ... <= p_(m)``, the adjusted value of
    the ``i``-th is ``max_{j <= i} min(1, (m - j + 1) * p_(j))``: monotone in the raw p, capped at 1.
    Rejecting where the adjusted p is <= alpha controls the family-wise error rate at alpha.

    Args:
        pvalues: Raw p-values in [0, 1] (NaN for "no test").

    Returns:
        Adjusted p-values, same shape and order as the input.

    Raises:
        ValueError: If a p-value is outside [0, 1].
    """
    raw = np.asarray(pvalues, dtype=float)
    tested = ~np.isnan(raw)
    if ((raw[tested] < 0) | (raw[tested] > 1)).any():
        raise ValueError(f"p-values must be in [0, 1], got {raw[tested].tolist()}")
    adjusted = raw.copy()
    values = raw[tested]
    order = np.argsort(values, kind="stable")
    multipliers = values.size - np.arange(values.size)
    stepped = np.minimum(1.0, np.maximum.accumulate(values[order] * multipliers))
    result = np.empty_like(values)
    result[order] = stepped
    adjusted[tested] = result
    return adjusted


def format_ci(mean: float, low: float, high: float, digits: int = 3) -> str:
    """``"0.436 [0.340, 0.532]"`` for tables; ``"n/a"`` for a NaN mean, the mean alone for a NaN interval."""
    if mean is None or math.isnan(mean):
        return "n/a"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


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
    seed = derive_seed(settings.seed, name, retriever, baseline, "randomisation")
    row["p_t"] = paired_t_test(current, base)
    row["p_randomisation"] = randomisation_test(current, base, settings.n_permutations, seed)
    return row


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
    p_t_holm = dict(zip(others, holm([comparisons[r]["p_t"] for r in others])))
    p_rand_holm = dict(zip(others, holm([comparisons[r]["p_randomisation"] for r in others])))
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
      (:func:`paired_t_test`), ``p_randomisation`` (:func:`randomisation_test`, two-sided), their Holm
      adjustments ``p_t_holm``/``p_randomisation_holm`` across the retrievers compared with the
      baseline for this metric; ``significant`` is ``p_randomisation_holm <= alpha``; ``direction`` is
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
