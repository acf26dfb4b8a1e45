"""Statistics: parity with ranx (t-test, Fisher randomisation) and scipy (bootstrap, permutation test), hand-worked Holm.

Monte Carlo bounds used below:

* two randomisation p-values from independent draws of ``n`` and ``m`` permutations differ by at most
  ``4 * sqrt(p * (1 - p) * (1 / n + 1 / m)) + 1 / min(n, m)`` (4 standard errors of the difference of two
  binomial proportions, plus one count of slack for p near 0);
* an estimate against an exact p: ``4 * sqrt(p * (1 - p) / n) + 1 / n``;
* percentile bootstrap bounds from two independent sets of ``B`` resamples differ by at most
  ``4 * sqrt(2) * SE``, with ``SE = sqrt(q (1 - q) / B) / phi(z_q) * sigma`` the standard error of a
  sample quantile of a normal bootstrap distribution (``sigma`` = standard error of the mean).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.metrics import UnknownMetricError, aggregate, per_query_metrics
from retrieval_pipeline.core.evaluation.statistics.significance import SIGNIFICANCE_COLUMNS, significance_metrics, significance_table
from retrieval_pipeline.core.evaluation.statistics.stats import (
    StatisticsSettings,
    bootstrap_means,
    derive_seed,
    format_ci,
    holm,
    paired_bootstrap_ci,
    paired_t_test,
    randomisation_test,
)

SETTINGS = StatisticsSettings()


def _mc_bound_two_estimates(p: float, n: int, m: int | None = None) -> float:
    m = n if m is None else m
    return 4 * math.sqrt(p * (1 - p) * (1 / n + 1 / m)) + 1 / min(n, m)


def _mc_bound_exact(p: float, n: int) -> float:
    return 4 * math.sqrt(p * (1 - p) / n) + 1 / n


# --------------------------------------------------------------------------------------------------
# Synthetic runs (strictly decreasing scores, so ranx's re-sort by score keeps our list order)
# --------------------------------------------------------------------------------------------------


def _synthetic(seed: int = 7, n_queries: int = 80, n_docs: int = 300) -> tuple[Qrels, dict[str, Run]]:
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(n_docs)]
    qrels: Qrels = {}
    for q in range(n_queries):
        relevant = rng.choice(n_docs, size=int(rng.integers(1, 4)), replace=False)
        qrels[f"q{q:03d}"] = {docs[d]: int(rng.integers(1, 3)) for d in relevant}

    def run(skill: float) -> Run:
        out: Run = {}
        for query_id, judged in qrels.items():
            scores = rng.random(n_docs)
            for doc in judged:
                scores[int(doc[1:])] += skill * rng.random()
            top = np.argsort(-scores)[:20]
            out[query_id] = [(docs[i], float(20 - rank)) for rank, i in enumerate(top)]
        return out

    return qrels, {"a": run(0.9), "b": run(1.5), "c": run(0.5)}


def _query_results(qrels: Qrels, runs: dict[str, Run]) -> pd.DataFrame:
    return pd.concat([per_query_metrics(run, qrels).assign(retriever=name) for name, run in runs.items()], ignore_index=True)


@pytest.fixture(scope="module")
def synthetic() -> tuple[Qrels, dict[str, Run], pd.DataFrame]:
    qrels, runs = _synthetic()
    return qrels, runs, _query_results(qrels, runs)


# --------------------------------------------------------------------------------------------------
# Parity with ranx.compare
# --------------------------------------------------------------------------------------------------

RANX_METRICS = ["hit_rate@5", "mrr", "ndcg@10"]
#: ranx's Fisher test runs interpreted in the suite (see the root conftest): 2,000 permutations take ~6 s, 10,000 ~28 s.
RANX_PERMUTATIONS = 2_000


@pytest.fixture(scope="module")
def ranx_reports(synthetic):
    """ranx's compare with the Student and Fisher tests."""
    ranx = pytest.importorskip("ranx")
    qrels, runs, _ = synthetic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumbaTypeSafetyWarning from ranx internals
        ranx_runs = [ranx.Run({q: dict(hits) for q, hits in run.items()}, name=name) for name, run in runs.items()]
        student = ranx.compare(ranx.Qrels(qrels), ranx_runs, RANX_METRICS, stat_test="student")
        fisher = ranx.compare(
            ranx.Qrels(qrels), ranx_runs, RANX_METRICS, stat_test="fisher", n_permutations=RANX_PERMUTATIONS, random_seed=3
        )
    return student, fisher


PAIRS = [("a", "b"), ("a", "c"), ("b", "c")]


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", RANX_METRICS)
def test_t_test_equals_ranx_student(synthetic, ranx_reports, pair, name):
    _, _, frame = synthetic
    values = {r: frame.loc[frame["retriever"] == r, name].to_numpy() for r in pair}
    theirs = ranx_reports[0].comparisons[frozenset(pair)][name]["p_value"]
    assert paired_t_test(values[pair[0]], values[pair[1]]) == pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", RANX_METRICS)
def test_randomisation_within_monte_carlo_error_of_ranx_fisher(synthetic, ranx_reports, pair, name):
    _, _, frame = synthetic
    values = {r: frame.loc[frame["retriever"] == r, name].to_numpy() for r in pair}
    theirs = ranx_reports[1].comparisons[frozenset(pair)][name]["p_value"]
    ours = randomisation_test(values[pair[0]], values[pair[1]], RANX_PERMUTATIONS, seed=5)
    p = (ours + theirs) / 2
    assert abs(ours - theirs) <= _mc_bound_two_estimates(p, RANX_PERMUTATIONS), (ours, theirs)


def test_significance_table_p_values_match_ranx(synthetic, ranx_reports):
    """The table's raw p-values against baseline ``a`` are ranx's for {a, b} and {a, c}."""
    _, _, frame = synthetic
    table = significance_table(frame, ["a", "b", "c"], "a", SETTINGS, metrics=RANX_METRICS)
    student, fisher = ranx_reports
    for row in table[table["retriever"] != "a"].itertuples():
        key = frozenset(("a", row.retriever))
        assert row.p_t == pytest.approx(student.comparisons[key][row.metric]["p_value"], abs=1e-6)
        theirs = fisher.comparisons[key][row.metric]["p_value"]
        p = (row.p_randomisation + theirs) / 2
        assert abs(row.p_randomisation - theirs) <= _mc_bound_two_estimates(p, SETTINGS.n_permutations, RANX_PERMUTATIONS)


# --------------------------------------------------------------------------------------------------
# Randomisation test and t-test conventions
# --------------------------------------------------------------------------------------------------


def _exact_sign_flip_p(diffs: np.ndarray, alternative: str) -> float:
    """Enumerate all 2^n sign flips: the exact randomisation p-value (ties count)."""
    observed = diffs.sum()
    sums = np.array([np.dot(signs, diffs) for signs in itertools.product((-1.0, 1.0), repeat=len(diffs))])
    extreme = {
        "two-sided": np.abs(sums) >= abs(observed) - 1e-12,
        "greater": sums >= observed - 1e-12,
        "less": sums <= observed + 1e-12,
    }[alternative]
    return float(extreme.mean())


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_randomisation_matches_exact_enumeration_and_scipy(alternative):
    rng = np.random.default_rng(2)
    a, b = rng.random(11), rng.random(11) - 0.15
    exact = _exact_sign_flip_p(a - b, alternative)
    scipy_p = scipy_stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples", alternative=alternative, vectorized=True
    ).pvalue  # exact for 2^11 < 9999 resamples
    assert exact == pytest.approx(scipy_p, abs=1e-12)
    ours = randomisation_test(a, b, 20_000, seed=1, alternative=alternative)
    assert abs(ours - exact) <= _mc_bound_exact(exact, 20_000)


def test_randomisation_ties_count_for_binary_metrics():
    """Three +1 differences and one -1: exact two-sided p = P(|sum| >= 2) = 10/16 (only sums 0 are less extreme)."""
    a, b = np.array([1.0, 1, 1, 0, 0, 0]), np.array([0.0, 0, 0, 1, 0, 0])
    assert _exact_sign_flip_p(a - b, "two-sided") == pytest.approx(10 / 16)
    assert abs(randomisation_test(a, b, 20_000, seed=4) - 10 / 16) <= _mc_bound_exact(10 / 16, 20_000)


def test_randomisation_conventions_of_ranx():
    """p = count / n_permutations, no +1: a difference no flip reaches gives p = 0; identical systems give p = 1."""
    a = np.linspace(0.5, 1.0, 40)
    assert randomisation_test(a, a - 0.3, 10_000, seed=0) == 0.0
    assert randomisation_test(a, a, 10_000, seed=0) == 1.0
    assert randomisation_test(a, a - 0.3, 10_000, seed=0, alternative="less") == 1.0


def test_randomisation_is_deterministic_by_seed():
    rng = np.random.default_rng(3)
    a, b = rng.random(50), rng.random(50)
    assert randomisation_test(a, b, 10_000, seed=9) == randomisation_test(a, b, 10_000, seed=9)
    assert randomisation_test(a, b, 10_000, seed=9) != randomisation_test(a, b, 10_000, seed=10)


def test_t_test_defines_identical_systems_as_p_1_and_matches_scipy():
    a = np.array([0.1, 0.5, 0.9, 0.3])
    assert paired_t_test(a, a) == 1.0
    b = np.array([0.2, 0.4, 0.7, 0.35])
    assert paired_t_test(a, b) == pytest.approx(scipy_stats.ttest_rel(a, b).pvalue, abs=1e-12)


@pytest.mark.parametrize("func", [paired_t_test, randomisation_test])
def test_paired_tests_reject_unpaired_or_nan_input(func):
    with pytest.raises(ValueError, match="equal length"):
        func([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="finite"):
        func([0.1, math.nan], [0.1, 0.2])


# --------------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------------


def test_bootstrap_coverage_of_a_bernoulli_mean():
    """True mean 0.3, n = 100, 300 simulations: coverage near 0.95. Bounds [0.90, 0.99]: about 4 binomial
    standard errors (sqrt(0.95 * 0.05 / 300) = 0.0126) around 0.95, widened below for the percentile
    method's known small-sample undercoverage."""
    rng = np.random.default_rng(11)
    covered = 0
    for sim in range(300):
        sample = (rng.random(100) < 0.3).astype(float)
        low, high = paired_bootstrap_ci(sample, n_resamples=1000, confidence=0.95, seed=sim)
        covered += low <= 0.3 <= high
    assert 0.90 <= covered / 300 <= 0.99


def test_bootstrap_is_paired_across_columns_and_chunks():
    """One draw per resample for every column: the resampled mean of x - y is exactly mean(x) - mean(y)
    in every resample, also across chunk boundaries (3,000 queries x 2,000 resamples span several chunks)."""
    rng = np.random.default_rng(5)
    x, y = rng.random(3000), rng.random(3000)
    means = bootstrap_means(np.column_stack([x, y, x - y]), 2000, seed=1)
    assert means.shape == (2000, 3)
    np.testing.assert_allclose(means[:, 2], means[:, 0] - means[:, 1], atol=1e-12)


def test_bootstrap_ci_of_a_difference_of_identical_columns_is_zero():
    x = np.random.default_rng(6).random(50)
    low, high = paired_bootstrap_ci(np.column_stack([x, x, x - x]), 2000, 0.95, seed=3)
    assert low[0] == low[1] and high[0] == high[1]
    assert (low[2], high[2]) == (0.0, 0.0)


def test_bootstrap_is_deterministic_by_seed():
    x = np.random.default_rng(8).random(40)
    assert paired_bootstrap_ci(x, 2000, 0.95, seed=1) == paired_bootstrap_ci(x, 2000, 0.95, seed=1)
    assert paired_bootstrap_ci(x, 2000, 0.95, seed=1) != paired_bootstrap_ci(x, 2000, 0.95, seed=2)


def test_bootstrap_width_shrinks_like_one_over_root_n():
    """Four times the queries, half the width (within 20%)."""
    rng = np.random.default_rng(9)
    small, large = rng.random(100), rng.random(400)
    width = {n: np.subtract(*paired_bootstrap_ci(x, 4000, 0.95, seed=1)[::-1]) for n, x in ((100, small), (400, large))}
    assert 0.4 <= width[400] / width[100] <= 0.6


def _quantile_se(sigma: float, q: float, n_resamples: int) -> float:
    """Standard error of the q-quantile of n_resamples draws of a normal with sd sigma."""
    return math.sqrt(q * (1 - q) / n_resamples) / scipy_stats.norm.pdf(scipy_stats.norm.ppf(q)) * sigma


def test_bootstrap_matches_scipy_percentile_within_monte_carlo_error():
    rng = np.random.default_rng(12)
    x = rng.random(200)
    y = x + rng.normal(0.05, 0.1, 200)
    n_resamples = 5000
    ours_low, ours_high = paired_bootstrap_ci(np.column_stack([x, y - x]), n_resamples, 0.95, seed=2)
    single = scipy_stats.bootstrap((x,), np.mean, method="percentile", n_resamples=n_resamples, rng=1).confidence_interval
    paired = scipy_stats.bootstrap(
        (x, y), lambda u, v, axis: np.mean(v - u, axis=axis), paired=True, method="percentile", n_resamples=n_resamples, rng=1
    ).confidence_interval
    for ours, theirs, sd in ((ours_low[0], single.low, x.std()), (ours_high[0], single.high, x.std())):
        assert abs(ours - theirs) <= 4 * math.sqrt(2) * _quantile_se(sd / math.sqrt(200), 0.025, n_resamples)
    for ours, theirs in ((ours_low[1], paired.low), (ours_high[1], paired.high)):
        assert abs(ours - theirs) <= 4 * math.sqrt(2) * _quantile_se((y - x).std() / math.sqrt(200), 0.025, n_resamples)


@pytest.mark.parametrize(("n", "columns"), [(37, 1), (2000, 2)])  # 2,000 queries: bootstrap_means draws in two chunks
def test_bootstrap_equals_scipy_percentile_given_the_same_generator(n, columns):
    """The same seed draws the same indices in scipy: the bounds agree to rounding, not only within Monte Carlo error."""
    matrix = np.random.default_rng(n).random((n, columns))
    ours_low, ours_high = paired_bootstrap_ci(matrix, 2000, 0.9, seed=8)
    generator = np.random.default_rng(8)
    theirs = scipy_stats.bootstrap(
        (matrix,), np.mean, axis=0, n_resamples=2000, confidence_level=0.9, method="percentile", vectorized=True, rng=generator
    ).confidence_interval
    np.testing.assert_allclose([ours_low, ours_high], [theirs.low, theirs.high], rtol=0, atol=1e-12)
    shifted = paired_bootstrap_ci(matrix, 2000, 0.9, seed=9)  # another seed: other draws, other bounds
    assert np.abs(np.asarray(shifted[0]) - np.asarray(theirs.low)).max() > 1e-6


def test_bootstrap_rejects_nan_and_empty_input():
    with pytest.raises(ValueError, match="NaN"):
        paired_bootstrap_ci([0.1, math.nan], 1000, 0.95, 1)
    with pytest.raises(ValueError, match="non-empty"):
        paired_bootstrap_ci([], 1000, 0.95, 1)


# --------------------------------------------------------------------------------------------------
# Holm, format_ci, seeds
# --------------------------------------------------------------------------------------------------


def test_holm_textbook_example():
    """m = 4, p = (0.01, 0.04, 0.03, 0.005). Sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06,
    0.04 * 1 = 0.04 -> running max 0.06. Back in input order: (0.03, 0.06, 0.06, 0.02)."""
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_passes_nan_through():
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])
    np.testing.assert_allclose(holm([0.01, math.nan, 0.04]), [0.02, math.nan, 0.04])  # m = 2: NaN does not count
    assert holm([]).size == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_format_ci():
    assert format_ci(0.4362, 0.3404, 0.5319) == "0.436 [0.340, 0.532]"
    assert format_ci(math.nan, 0.1, 0.2) == "n/a"
    assert format_ci(0.5, math.nan, math.nan) == "0.500"


def test_derive_seed_is_stable_and_position_dependent():
    assert derive_seed(13, "mrr", "bm25") == derive_seed(13, "mrr", "bm25")
    assert len({derive_seed(13, "mrr", "bm25"), derive_seed(13, "mrr", "dense"), derive_seed(14, "mrr", "bm25")}) == 3


# --------------------------------------------------------------------------------------------------
# significance_table
# --------------------------------------------------------------------------------------------------


def test_table_shape_means_and_baseline_rows(synthetic):
    qrels, runs, frame = synthetic
    table = significance_table(frame, ["b", "c"], "a", SETTINGS, metrics=["hit_rate@5", "mrr", "not_found_rate"])
    assert list(table.columns) == list(SIGNIFICANCE_COLUMNS)
    assert len(table) == 3 * 3 and list(table["retriever"][:3]) == ["a", "b", "c"]  # the baseline is added first
    for row in table.itertuples():
        expected = aggregate(per_query_metrics(runs[row.retriever], qrels))[row.metric]
        assert row.mean == pytest.approx(expected) and row.ci_low <= row.mean <= row.ci_high
        assert row.n_queries == row.n_paired == len(qrels)
    base = table[table["retriever"] == "a"]
    assert (base["note"] == "baseline").all() and base[["p_t", "p_randomisation", "p_randomisation_holm"]].isna().all().all()
    assert not base["significant"].any() and base["direction"].isna().all()


def test_table_holm_and_direction(synthetic):
    """b is clearly better than c on this data: against baseline c it is 'better' (more hits, fewer
    not-found); against baseline b, c is 'worse' on both, whatever the metric's direction."""
    _, _, frame = synthetic
    table = significance_table(frame, ["c", "a", "b"], "c", SETTINGS, metrics=["hit_rate@5", "not_found_rate"])
    for _, rows in table[table["retriever"] != "c"].groupby("metric"):
        # Holm over every pair of a, b, c (the all-pairs family): at least as strict as over the pairs with c alone
        assert (rows["p_randomisation_holm"].to_numpy() >= holm(rows["p_randomisation"]) - 1e-12).all()
        assert (rows["significant"] == (rows["p_randomisation_holm"] <= SETTINGS.alpha)).all()
    b = table[table["retriever"] == "b"].set_index("metric")
    assert b.loc["hit_rate@5", "direction"] == "better" and b.loc["hit_rate@5", "delta"] > 0
    assert b.loc["not_found_rate", "direction"] == "better" and b.loc["not_found_rate", "delta"] < 0
    assert not b.loc["not_found_rate", "higher_is_better"]
    c = significance_table(frame, ["b", "c"], "b", SETTINGS, metrics=["hit_rate@5", "not_found_rate"]).set_index(["retriever", "metric"])
    assert c.loc[("c", "hit_rate@5"), "direction"] == "worse" and c.loc[("c", "not_found_rate"), "direction"] == "worse"
    assert c.loc[("c", "not_found_rate"), "delta"] > 0


def test_table_is_reproducible_and_seeds_do_not_depend_on_other_retrievers(synthetic):
    _, _, frame = synthetic
    full = significance_table(frame, ["a", "b", "c"], "a", SETTINGS, metrics=["mrr"])
    pd.testing.assert_frame_equal(full, significance_table(frame, ["a", "b", "c"], "a", SETTINGS, metrics=["mrr"]))
    alone = significance_table(frame, ["a", "b"], "a", SETTINGS, metrics=["mrr"])
    assert alone.loc[1, "p_randomisation"] == full.loc[1, "p_randomisation"]


def test_table_identical_retriever_has_zero_delta_and_p_one(synthetic):
    _, _, frame = synthetic
    twin = pd.concat([frame, frame[frame["retriever"] == "a"].assign(retriever="a_twin")], ignore_index=True)
    row = significance_table(twin, ["a", "a_twin"], "a", SETTINGS, metrics=["ndcg@10"]).iloc[1]
    assert (row["delta"], row["delta_ci_low"], row["delta_ci_high"]) == (0.0, 0.0, 0.0)
    assert row["p_t"] == 1.0 and row["p_randomisation"] == 1.0 and not row["significant"]


def test_table_with_few_queries_gives_cis_but_no_p_values(synthetic):
    _, _, frame = synthetic
    few = frame[frame["query_id"].isin(["q000", "q001", "q002", "q003"])]
    table = significance_table(few, ["a", "b"], "a", SETTINGS, metrics=["mrr"])
    row = table.iloc[1]
    assert row["n_paired"] == 4 and row["ci_low"] <= row["mean"] <= row["ci_high"] and not math.isnan(row["delta_ci_low"])
    assert math.isnan(row["p_t"]) and math.isnan(row["p_randomisation"]) and math.isnan(row["p_randomisation_holm"])
    assert row["note"] == "not enough queries for a test (n=4 < 6)" and not row["significant"]


def test_table_pairs_on_the_common_queries(synthetic):
    """b lacks 30 queries: its mean is over its 50, the comparison over the 50 both have."""
    _, _, frame = synthetic
    keep = ~((frame["retriever"] == "b") & frame["query_id"].isin([f"q{i:03d}" for i in range(30)]))
    table = significance_table(frame[keep], ["a", "b"], "a", SETTINGS, metrics=["mrr"]).set_index("retriever")
    a_values = frame[(frame["retriever"] == "a") & ~frame["query_id"].isin([f"q{i:03d}" for i in range(30)])]["mrr"]
    assert table.loc["a", "n_queries"] == 80 and table.loc["b", "n_queries"] == table.loc["b", "n_paired"] == 50
    assert table.loc["b", "baseline"] == pytest.approx(a_values.mean())
    assert table.loc["b", "delta"] == pytest.approx(table.loc["b", "mean"] - a_values.mean())


def test_default_metrics_are_the_testable_headline_metrics(synthetic):
    _, _, frame = synthetic
    expected = [
        "hit_rate@1",
        "hit_rate@5",
        "hit_rate@10",
        "recall@5",
        "recall@10",
        "precision@5",
        "f1@5",
        "mrr",
        "ndcg@10",
        "not_found_rate",
    ]
    assert significance_metrics(frame.columns) == expected
    light = StatisticsSettings(n_bootstrap=1000, n_permutations=10_000)
    assert list(significance_table(frame, ["a", "b"], "a", light)["metric"].unique()) == expected


def test_table_bad_input_names_the_dataset(synthetic):
    _, _, frame = synthetic
    with pytest.raises(ValueError, match="dataset 'toy'.*no rows for retrievers \\['zzz'\\]"):
        significance_table(frame, ["a", "zzz"], "a", SETTINGS, dataset="toy")
    with pytest.raises(ValueError, match="dataset 'toy'.*duplicate"):
        significance_table(pd.concat([frame, frame.head(1)]), ["a"], "a", SETTINGS, dataset="toy")
    with pytest.raises(ValueError, match="not a mean over queries"):
        significance_table(frame, ["a"], "a", SETTINGS, metrics=["latency_p95_ms"], dataset="toy")
    with pytest.raises(UnknownMetricError):
        significance_table(frame, ["a"], "a", SETTINGS, metrics=["no_such_metric"], dataset="toy")
