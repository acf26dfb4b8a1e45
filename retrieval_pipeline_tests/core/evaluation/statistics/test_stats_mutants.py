"""Statistics, against the mutants ``benchmarks/mutation.py`` found alive in :mod:`retrieval_pipeline.core.evaluation.statistics.stats`.

What the older tests left open:

* **Reproducibility of published numbers.** The module promises that a table is the same run to run, with
  the seed of each comparison derived from ``StatisticsSettings.seed`` and the names of the metric and the
  retrievers (:func:`derive_seed`). The tests below recompute the CIs and p-values of a table from those
  seeds with the public functions (bootstrap: ``(seed, metric, "bootstrap", first column of the resampled
  block)``; randomisation: ``(seed, metric, retriever, baseline, "randomisation")``), so a change of seed
  derivation, which would silently change every published interval, fails here and is made on purpose.
* Every field of the baseline's row; the ``<=`` bounds (``alpha``, six queries, p = 0, one permutation,
  one resample, one query); exact error messages with and without a dataset name; retrievers with
  missing or no values; the CI helpers' defaults; sign flips drawn from all 256 byte values; counts
  summed across chunks; and :func:`derive_seed` spreading over all 63 bits.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from retrieval_pipeline.core.evaluation.statistics.significance import (
    SIGNIFICANCE_COLUMNS,
    check_query_results,
    per_query_values,
    significance_metrics,
    significance_table,
)
from retrieval_pipeline.core.evaluation.statistics.stats import (
    StatisticsSettings,
    bootstrap_means,
    derive_seed,
    format_ci,
    holm,
    pair_seed,
    paired_bootstrap_ci,
    paired_t_test,
    randomisation_test,
)

SETTINGS = StatisticsSettings()  # 95%, 2,000 resamples, 10,000 permutations, alpha 0.05, seed 13, 6 queries
N = 30
IDS = [f"q{i:02d}" for i in range(N)]
RNG = np.random.default_rng(2024)
A = RNG.random(N)
B = np.clip(A + RNG.normal(0.08, 0.2, N), 0.0, 1.0)  # a noisy improvement: p neither 0 nor 1


def _exactly(message: str) -> str:
    return "^" + re.escape(message) + "$"


def _rows(retriever: str, values, ids=IDS) -> pd.DataFrame:
    return pd.DataFrame({"retriever": retriever, "query_id": list(ids), "mrr": list(values)})


def _frame(*parts: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True)


def _strict(function, *args, **kwargs):
    """Call with every warning an error: an empty mean or a numpy division must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*args, **kwargs)


def _ci(block: np.ndarray, first: str, metric: str = "mrr") -> tuple[np.ndarray, np.ndarray]:
    """The documented bootstrap CIs of a block of columns resampled together."""
    seed = derive_seed(SETTINGS.seed, metric, "bootstrap", first)
    return paired_bootstrap_ci(block, SETTINGS.n_bootstrap, SETTINGS.confidence, seed)


# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def table() -> pd.DataFrame:  # per test, not per module: mutmut maps each mutant to the tests that build the table themselves
    return significance_table(_frame(_rows("a", A), _rows("b", B)), ["a", "b"], "a", SETTINGS, metrics=["mrr"], dataset="ds")


def test_the_baseline_row_is_complete(table):
    base = table.iloc[0].to_dict()
    low, high = _ci(np.column_stack([A, B, B - A]), "a")
    missing = ("p_t", "p_randomisation", "p_t_holm", "p_randomisation_holm")
    assert all(math.isnan(base.pop(k)) for k in missing)
    assert pd.isna(base.pop("direction"))  # None; pandas' string column holds it as missing
    assert base == {
        "retriever": "a",
        "metric": "mrr",
        "higher_is_better": True,
        "n_queries": N,
        "mean": pytest.approx(A.mean(), abs=1e-15),
        "ci_low": pytest.approx(low[0], rel=1e-12),
        "ci_high": pytest.approx(high[0], rel=1e-12),
        "baseline_retriever": "a",
        "n_paired": N,
        "baseline": pytest.approx(A.mean(), abs=1e-15),
        "delta": 0.0,
        "delta_ci_low": 0.0,
        "delta_ci_high": 0.0,
        "significant": False,
        "note": "baseline",
    }
    assert base["significant"] is False or base["significant"] is np.False_
    assert table.iloc[1]["direction"] == "better"


def test_a_compared_row_follows_the_documented_tests_and_seeds(table):
    row = table.iloc[1].to_dict()
    low, high = _ci(np.column_stack([A, B, B - A]), "a")
    p_t = scipy_stats.ttest_rel(B, A).pvalue
    p_rand = randomisation_test(B, A, SETTINGS.n_permutations, pair_seed(SETTINGS.seed, "mrr", "b", "a"))
    assert 0.0 < p_rand < 0.5 and 0.0 < p_t < 0.5
    assert (row["retriever"], row["baseline_retriever"], row["n_queries"], row["n_paired"], row["note"]) == ("b", "a", N, N, "")
    assert row["mean"] == pytest.approx(B.mean()) and row["baseline"] == pytest.approx(A.mean())
    assert row["delta"] == pytest.approx((B - A).mean())
    expected_cis = [low[1], high[1], low[2], high[2]]
    assert [row["ci_low"], row["ci_high"], row["delta_ci_low"], row["delta_ci_high"]] == pytest.approx(expected_cis, rel=1e-12)
    assert row["p_t"] == pytest.approx(p_t, rel=1e-12) and row["p_randomisation"] == p_rand
    assert row["p_t_holm"] == pytest.approx(p_t, rel=1e-12) and row["p_randomisation_holm"] == p_rand  # one comparison: Holm is p
    assert row["significant"] == (p_rand <= SETTINGS.alpha)
    assert row["direction"] == ("better" if row["significant"] else None)


def test_significance_includes_alpha_itself(table):
    p = float(table.iloc[1]["p_randomisation_holm"])
    at_p = StatisticsSettings(alpha=p)
    row = significance_table(_frame(_rows("a", A), _rows("b", B)), ["a", "b"], "a", at_p, metrics=["mrr"]).iloc[1]
    assert row["significant"] and row["direction"] == "better"


def test_retrievers_missing_values_do_not_change_the_others():
    """c lacks q00..q09, d has no value at all: a's and b's rows are as without them; c's CI is over its own 20 queries."""
    c = np.where(np.arange(N) >= 10, B[::-1], np.nan)
    frame = _frame(_rows("a", A), _rows("b", B), _rows("c", c), _rows("d", [np.nan] * N))
    full = _strict(significance_table, frame, ["a", "b", "d", "c"], "a", SETTINGS, metrics=["mrr"])
    alone = significance_table(_frame(_rows("a", A), _rows("b", B)), ["a", "b"], "a", SETTINGS, metrics=["mrr"])
    holm_dependent = ["p_t_holm", "p_randomisation_holm", "significant", "direction"]  # Holm counts the tested retrievers
    pd.testing.assert_frame_equal(full.iloc[:2].drop(columns=holm_dependent), alone.drop(columns=holm_dependent))
    d = full.iloc[2]
    assert (d["retriever"], d["n_queries"], d["n_paired"], d["note"]) == ("d", 0, 0, "no values for this metric")
    assert all(math.isnan(d[k]) for k in ("mean", "ci_low", "ci_high", "baseline", "delta", "delta_ci_low", "p_t", "p_randomisation"))
    row_c = full.iloc[3]
    low, high = _ci(np.column_stack([c[10:], c[10:] - A[10:]]), "c")
    assert (row_c["n_queries"], row_c["n_paired"]) == (20, 20)
    got = [row_c["ci_low"], row_c["ci_high"], row_c["delta_ci_low"], row_c["delta_ci_high"]]
    assert got == pytest.approx([low[0], high[0], low[1], high[1]], rel=1e-12)


def test_the_given_order_is_kept_and_the_first_column_seeds_the_bootstrap():
    frame = _frame(_rows("a", A), _rows("b", B))
    table = significance_table(frame, ["b", "a"], "a", SETTINGS, metrics=["mrr"])
    assert table["retriever"].tolist() == ["b", "a"] and table["note"].tolist() == ["", "baseline"]
    low, high = _ci(np.column_stack([B, A, B - A]), "b")
    got = [table.iloc[0]["ci_low"], table.iloc[0]["ci_high"], table.iloc[0]["delta_ci_low"]]
    assert got == pytest.approx([low[0], high[0], low[2]], rel=1e-12)
    assert significance_table(frame, ["b"], "a", SETTINGS, metrics=["mrr"])["retriever"].tolist() == ["a", "b"]


def test_six_paired_queries_are_tested():
    row = significance_table(
        _frame(_rows("a", A[:6], IDS[:6]), _rows("b", B[:6], IDS[:6])), ["a", "b"], "a", SETTINGS, metrics=["mrr"]
    ).iloc[1]
    assert row["n_paired"] == 6 and row["note"] == "" and not math.isnan(row["p_t"]) and not math.isnan(row["p_randomisation"])


def test_no_metric_gives_an_empty_table_with_the_columns():
    table = significance_table(_frame(_rows("a", A), _rows("b", B)), ["a", "b"], "a", SETTINGS, metrics=[])
    assert table.empty and list(table.columns) == list(SIGNIFICANCE_COLUMNS)


def test_messages_name_the_frame_or_say_query_results():
    frame = _frame(_rows("a", A), _rows("b", B))
    with pytest.raises(ValueError, match=_exactly("query_results: no rows for retrievers ['z'] (present: ['a', 'b'])")):
        significance_table(frame, ["a", "z"], "a", SETTINGS, metrics=["mrr"])
    with pytest.raises(
        ValueError, match=_exactly("query_results: missing columns ['query_id'] (a per-query frame has one row per retriever and query)")
    ):
        check_query_results(frame.drop(columns="query_id"), ["a"])
    with pytest.raises(
        ValueError,
        match=_exactly(
            "query_results of dataset 'ds': missing columns ['retriever'] (a per-query frame has one row per retriever and query)"
        ),
    ):
        significance_table(frame.drop(columns="retriever"), ["a"], "a", SETTINGS, dataset="ds")
    twice = _frame(frame, frame.head(5).assign(mrr=0.5))  # the same keys with other values are still duplicates
    with pytest.raises(
        ValueError, match=_exactly("query_results: 5 duplicate (retriever, query_id) rows, e.g. [('a', 'q00'), ('a', 'q01'), ('a', 'q02')]")
    ):
        check_query_results(twice, ["a"])
    columns = list(frame.columns)
    with pytest.raises(
        ValueError, match=_exactly(f"query_results of dataset 'ds': metric 'ndcg@10' has no per-query values (columns: {columns})")
    ):
        significance_table(frame, ["a"], "a", SETTINGS, metrics=["ndcg@10"], dataset="ds")
    not_mean = f"query_results of dataset 'ds': 'not_found' is not a mean over queries; metrics that are: {significance_metrics(columns)}"
    with pytest.raises(ValueError, match=_exactly(not_mean)):
        significance_table(frame, ["a"], "a", SETTINGS, metrics=["not_found"], dataset="ds")
    words = frame.assign(mrr=["high"] * len(frame))
    with pytest.raises(ValueError, match="^" + re.escape("query_results of dataset 'ds': column 'mrr' does not hold numbers: ")):
        significance_table(words, ["a", "b"], "a", SETTINGS, metrics=["mrr"], dataset="ds")
    with pytest.raises(
        ValueError, match=_exactly(f"query_results of the x: no column 'ndcg@10' for metric 'ndcg@10' (columns: {columns})")
    ):
        per_query_values(frame, "ndcg@10", "the x")
    with pytest.raises(ValueError, match=_exactly(f"query_results: no column 'found' for metric 'not_found_rate' (columns: {columns})")):
        per_query_values(frame, "not_found_rate")
    with pytest.raises(ValueError, match="^" + re.escape("query_results: column 'mrr' does not hold numbers: ")):
        per_query_values(words, "mrr")


# --------------------------------------------------------------------------------------------------
# The building blocks
# --------------------------------------------------------------------------------------------------


def test_format_ci_with_a_partial_interval_gives_the_mean_alone():
    assert format_ci(0.5, math.nan, 0.6) == format_ci(0.5, 0.4, math.nan) == "0.500"
    assert format_ci(0.5, 0.4, None) == format_ci(0.5, None, 0.6) == "0.500"


def test_holm_accepts_zero_and_caps_at_one():
    assert holm([0.01, 0.0, 0.03]).tolist() == [0.02, 0.0, 0.03]  # sorted 0, 0.01, 0.03 times 3, 2, 1
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]  # 2 * 0.6 and 1 * 0.7, stepped up, capped at 1


def test_bootstrap_defaults_and_bounds():
    values = A[:12]
    assert paired_bootstrap_ci(values) == paired_bootstrap_ci(values, 2000, 0.95, 13)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=_exactly(f"confidence must be in (0, 1), got {bad}")):
            paired_bootstrap_ci(values, confidence=bad)
    assert bootstrap_means(values, 1, seed=3).shape == (1,)
    with pytest.raises(ValueError, match=_exactly("n_resamples must be >= 1, got 0")):
        bootstrap_means(values, 0, seed=3)
    with pytest.raises(
        ValueError, match=_exactly("matrix must be a non-empty (n_queries,) or (n_queries, n_columns) array, got shape (0,)")
    ):
        bootstrap_means([], 10, seed=3)
    with pytest.raises(
        ValueError, match=_exactly("matrix holds NaN or infinite values: drop the queries without a value before resampling")
    ):
        bootstrap_means([0.5, math.nan], 10, seed=3)


def test_bootstrap_draws_every_query():
    """Two queries, 1.0 and 0.0: resampled means are 1, 0.5 or 0, each with a positive chance (1/4, 1/2, 1/4)."""
    means = bootstrap_means([1.0, 0.0], 400, seed=5)
    assert set(means.tolist()) == {0.0, 0.5, 1.0}
    assert abs((means == 1.0).mean() - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 400)


def test_paired_tests_take_one_query_and_refuse_none():
    assert randomisation_test([0.5], [0.2]) == 1.0  # either sign is as extreme as the observed difference
    assert math.isnan(paired_t_test([0.5], [0.2]))
    assert paired_t_test([1.0, 2.5], [0.0, 0.5]) == pytest.approx(scipy_stats.ttest_rel([1.0, 2.5], [0.0, 0.5]).pvalue, rel=1e-12)
    with pytest.raises(ValueError, match=_exactly("paired tests need two non-empty 1-D arrays of equal length, got shapes (0,) and (0,)")):
        randomisation_test([], [])
    with pytest.raises(
        ValueError, match=_exactly("paired tests need finite values: drop the queries without a value in either array first")
    ):
        paired_t_test([0.5, math.nan], [0.2, 0.1])


def test_randomisation_defaults_and_bounds():
    a, b = A[:10], B[:10]
    assert randomisation_test(a, b) == randomisation_test(a, b, 10_000, 13, "two-sided")
    assert randomisation_test(a, b, 1, seed=4) in (0.0, 1.0)
    with pytest.raises(ValueError, match=_exactly("n_permutations must be >= 1, got 0")):
        randomisation_test(a, b, 0)
    with pytest.raises(ValueError, match=_exactly("alternative must be one of ['greater', 'less', 'two-sided'], got 'up'")):
        randomisation_test(a, b, alternative="up")  # type: ignore[arg-type]


def test_sign_flips_include_all_plus_and_all_minus():
    """8 equal differences, two-sided: only all-plus and all-minus are as extreme, exact p = 2 / 256."""
    n = 100_000
    p = randomisation_test([1.0] * 8, [0.0] * 8, n, seed=11)
    assert abs(p - 2 / 256) <= 4 * math.sqrt((2 / 256) * (254 / 256) / n) + 1 / n


def test_counts_are_summed_over_every_chunk():
    """1,000 queries x 10,000 permutations is several chunks; all differences 0: every permutation ties, p = 1."""
    assert randomisation_test(np.zeros(1000), np.zeros(1000), 10_000, seed=2) == 1.0


def test_derived_seeds_use_all_63_bits_uniformly():
    """A non-negative 63-bit seed: every bit is set about half the time and no two bits always agree."""
    seeds = [derive_seed(13, "mrr", f"retriever{i}") for i in range(2000)]
    assert all(0 <= s < 2**63 for s in seeds)
    bits = np.array([[(s >> k) & 1 for k in range(63)] for s in seeds])
    share = bits.mean(axis=0)
    assert np.all(np.abs(share - 0.5) < 4 * math.sqrt(0.25 / len(seeds))), share
    agree = (bits[:, :, None] == bits[:, None, :]).all(axis=0) & ~np.eye(63, dtype=bool)
    assert not agree.any()
