"""Benchmark the hand-written bootstrap and randomisation test against ``scipy.stats``: agreement and time.

For each size, on seeded synthetic per-query scores:

* ``paired_bootstrap_ci`` against ``scipy.stats.bootstrap(method="percentile", vectorized=True)`` given
  the same seeded ``numpy.random.Generator`` (and a ``batch`` that bounds scipy's memory as
  ``bootstrap_means`` bounds its own): the largest difference of the bounds, and both times;
* ``randomisation_test`` against ``scipy.stats.permutation_test(permutation_type="samples")`` on the
  per-query differences: both p-values per alternative, their difference in standard errors of the difference of two independent estimates,
  and both times.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/stats_vs_scipy.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/stats_vs_scipy.py --queries 2000 --columns 210 --resamples 2000
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from retrieval_pipeline.core.evaluation.statistics.stats import paired_bootstrap_ci, randomisation_test

#: Elements of one chunk of scipy's resamples: the 16 MB ``bootstrap_means`` works in.
_CHUNK_ELEMENTS = 2**21


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    """``call()`` and the seconds it took."""
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def bootstrap_row(n: int, k: int, n_resamples: int, seed: int) -> str:
    """One line: the largest bound difference and the two times of a ``(n, k)`` matrix."""
    matrix = np.random.default_rng(seed).random((n, k))
    (low, high), ours_s = timed(lambda: paired_bootstrap_ci(matrix, n_resamples, 0.95, seed=seed))
    result, scipy_s = timed(
        lambda: scipy_stats.bootstrap(
            (matrix,), np.mean, axis=0, n_resamples=n_resamples, confidence_level=0.95, method="percentile",
            vectorized=True, rng=np.random.default_rng(seed), batch=max(1, _CHUNK_ELEMENTS // (n * k)),
        )
    )  # fmt: skip
    ci = result.confidence_interval
    gap = max(np.max(np.abs(np.asarray(ci.low) - low)), np.max(np.abs(np.asarray(ci.high) - high)))
    return f"bootstrap   n={n:>5} columns={k:>4} resamples={n_resamples}: max |bound diff| {gap:.2g}; ours {ours_s:.2f} s, scipy {scipy_s:.2f} s"


def permutation_rows(n: int, n_permutations: int, seed: int) -> list[str]:
    """One line per alternative: both p-values, their gap in standard errors, and the two times."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.5).astype(float)
    b = np.clip(a + rng.normal(0.02, 0.3, n) * (rng.random(n) < 0.5), 0.0, 1.0)
    rows = []
    for alternative in ("two-sided", "greater", "less"):
        ours, ours_s = timed(lambda alt=alternative: randomisation_test(b, a, n_permutations, seed=seed, alternative=alt))
        result, scipy_s = timed(
            lambda alt=alternative: scipy_stats.permutation_test(
                (b - a,), lambda d, axis: d.mean(axis=axis), permutation_type="samples", n_resamples=n_permutations,
                alternative=alt, vectorized=True, rng=np.random.default_rng(seed),
            )
        )  # fmt: skip
        se = math.sqrt(2 * max(ours * (1 - ours), 1 / n_permutations) / n_permutations)  # of the difference of two estimates
        rows.append(
            f"permutation n={n:>5} {alternative:<9} permutations={n_permutations}: ours p={ours:.4f}, scipy p={result.pvalue:.4f} "
            f"({abs(ours - result.pvalue) / se:.1f} SE apart); ours {ours_s:.2f} s, scipy {scipy_s:.2f} s"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--columns", type=int, default=210, help="bootstrap columns (20 retrievers and their 190 differences: 210)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    for n in args.queries:
        print(bootstrap_row(n, args.columns, args.resamples, args.seed), flush=True)
        for row in permutation_rows(n, args.permutations, args.seed):
            print(row, flush=True)


if __name__ == "__main__":
    main()
