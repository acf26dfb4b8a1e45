"""Uncertainty and significance of retrieval metrics over queries.

Datasets are small (14 to 2,000 queries), so a ranking of retrievers on point estimates alone can be
noise. This module gives, Dagster-free:

* :func:`paired_bootstrap_ci`: percentile bootstrap confidence intervals of means over queries, PAIRED
  (one draw of query indices per resample is applied to every column, so the CIs of several
  retrievers and of their differences come from the same resamples);
* :func:`randomisation_test`: Fisher's paired randomisation test (random sign flips of the per-query
  differences), with ranx's conventions (``ranx.statistical_tests.fisher_randomization_test``);
* :func:`paired_t_test`: scipy's paired t-test, with p = 1 when every difference is 0;
* :func:`holm`: the Holm–Bonferroni step-down adjustment.

The significance table of a ``query_results`` frame (:mod:`~retrieval_pipeline.core.evaluation.statistics.significance`)
and the regression gate are built on these.

Every random draw comes from a seeded :class:`numpy.random.Generator`; the seed of each comparison is
derived from ``StatisticsSettings.seed`` and the names of the metric and retriever (:func:`derive_seed`),
so a table is the same run to run and adding a retriever does not change the others' numbers.

**Why not ``scipy.stats.bootstrap`` / ``permutation_test`` / a library Holm.** scipy is the reference the
tests hold these to, not the code path (``benchmarks/stats_vs_scipy.py`` measures both; times on one core):

* ``scipy.stats.bootstrap(method="percentile", vectorized=True)``, given the same seeded generator, draws
  the same query indices and returns the same bounds as :func:`paired_bootstrap_ci` to within 3e-15
  (``test_stats.py`` asserts 1e-12), but it materialises every resample (resamples x queries x columns
  values) where :func:`bootstrap_means` multiplies per-query counts: 2,000 queries x 210 columns (20
  retrievers and their 190 differences, the pairwise table) x 2,000 resamples take 0.39 s here and 5.3 s
  in scipy with its memory bounded to the same 16 MB chunks.
* ``scipy.stats.permutation_test(permutation_type="samples")`` has scipy's conventions, not ranx's: p =
  (count + 1) / (n + 1), two-sided p = 2 min(one-sided p), and exact enumeration once 2^n <= n_resamples.
  Its p-values agree with :func:`randomisation_test`'s within Monte Carlo error (``test_stats.py``), not to
  the digit, and 2,000 queries x 10,000 permutations take 4.9 to 12.9 s against 0.08 to 0.10 s here.
* Holm: scipy has none (``scipy.stats.false_discovery_control`` is Benjamini-Hochberg/-Yekutieli only)
  and statsmodels is not a dependency; :func:`holm` is checked against a textbook example.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

#: Which way a randomisation test looks: ``two-sided``, ``greater`` (mean of ``a - b`` above 0), ``less``.
Alternative = Literal["two-sided", "greater", "less"]

#: Upper bound on the number of elements of one chunk of resamples (query indices or sign flips):
#: 2**21 float64 values are 16 MB, so 2,000 queries x 2,000 resamples run in a few chunks.
_CHUNK_ELEMENTS = 2**21

#: Relative tolerance when a permuted statistic is compared with the observed one: sums of the same
#: differences in another order differ by rounding only, and a tie must count (binary metrics tie often).
_TIE_TOLERANCE = 1e-9


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


def pair_seed(seed: int, metric: str, run: str, other: str) -> int:
    """The seed of the randomisation test of ``run`` against ``other`` on ``metric``: the ONE derivation every p-value
    of a pair uses (the significance table, the all-pairs table, the report, the console and ``compare()``).

    The pair is unordered (the names sorted), so ``bm25`` against ``dense`` and ``dense`` against ``bm25`` draw the
    same sign flips; the two-sided p-value is then the same whichever of the two is the baseline or comes first.
    """
    first, second = sorted((str(run), str(other)))
    return derive_seed(seed, metric, first, second, "randomisation")


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
    need no Python loop per permutation and bounded memory; each byte (8 queries' signs) is summed by a
    look-up in a table of its 256 values, 8 times fewer operations than a product with the unpacked bits.

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
    table = _byte_sums(diffs)
    row_sums = _row_sums_kernel(n_permutations * table.shape[0])
    for size in _chunks(n_permutations, n):
        flips = rng.integers(0, 256, size=(size, (n + 7) // 8), dtype=np.uint8)  # bit set: +d_i, else -d_i
        permuted = 2.0 * row_sums(table, flips) - observed  # sum of s_i * d_i
        extreme += int(as_extreme(observed, permuted, tol).sum())
    return extreme / n_permutations


#: Table look-ups of one test from which the compiled kernel pays for loading Numba (about a second the first time).
_COMPILED_FROM = 5_000_000


def _row_sums_numpy(table: np.ndarray, flips: np.ndarray) -> np.ndarray:
    """Per row of packed sign bytes, the sum of the table entries they select (numpy's gather)."""
    return table[np.arange(table.shape[0]), flips].sum(axis=1)


def _row_sums_kernel(lookups: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The row-sum kernel for a test of ``lookups`` table look-ups: Numba's compiled loop for large tests when Numba
    is installed (a gather in numpy costs some 40 ns a look-up, the loop about 1), else :func:`_row_sums_numpy`."""
    if lookups < _COMPILED_FROM:
        return _row_sums_numpy
    try:
        from retrieval_pipeline.core.evaluation.statistics.kernels import row_sums
    except ImportError:  # Numba is not installed: the same sums, slower
        return _row_sums_numpy
    return row_sums


#: Byte value -> its 8 bits, most significant first (``numpy.unpackbits``' order): ``(256, 8)``.
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)


def _byte_sums(diffs: np.ndarray) -> np.ndarray:
    """``(n_bytes, 256)``: for byte ``j`` of a packed draw and each value of it, the sum of the differences of
    queries ``8j .. 8j + 7`` whose bit is set. A permutation's sum is then one table look-up per byte, not per query."""
    padded = np.zeros(-(-diffs.size // 8) * 8)
    padded[: diffs.size] = diffs
    return padded.reshape(-1, 8) @ _BITS.T


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
    from scipy import stats as scipy_stats  # noqa: PLC0415  (1 s to import: every Dagster process loads this module)

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
