"""Every run against every other (``core.evaluation.statistics.pairwise``): a hand-computed example, the matrix, Holm across
pairs, the words, too few queries, and parity with ranx's ``compare`` and scipy on the per-query values ranx scores.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.evaluation.statistics import stats
from retrieval_pipeline.core.evaluation.statistics.pairwise import (
    MEAN_COLUMNS,
    PAIR_COLUMNS,
    PairwiseSettings,
    compare_all,
    matrix,
    pair_sentence,
    verdict,
)

#: Hit@1 of three runs on 8 queries: b finds 6 more than a's 1, c finds every query b finds plus one.
HITS = pd.DataFrame(
    {"a": [1, 0, 0, 0, 0, 0, 0, 0], "b": [1, 1, 1, 1, 1, 1, 1, 0], "c": [1, 1, 1, 1, 1, 1, 1, 1]},
    index=[f"q{i}" for i in range(8)],
    dtype=float,
)
SETTINGS = PairwiseSettings(n_permutations=20_000, n_bootstrap=1000, seed=5)


def test_hand_computed_deltas_means_and_order() -> None:
    result = compare_all({"hit_rate@1": HITS}, SETTINGS)
    pairs = result.pairs
    assert list(pairs.columns) == list(PAIR_COLUMNS) and list(result.means.columns) == list(MEAN_COLUMNS)
    assert list(zip(pairs["a"], pairs["b"])) == [("b", "a"), ("c", "a"), ("c", "b")]  # later run against earlier
    assert pairs["delta"].tolist() == pytest.approx([6 / 8, 7 / 8, 1 / 8])
    assert pairs["mean_a"].tolist() == pytest.approx([7 / 8, 1.0, 1.0]) and pairs["mean_b"].tolist() == pytest.approx([1 / 8, 1 / 8, 7 / 8])
    assert result.means["mean"].tolist() == pytest.approx([1 / 8, 7 / 8, 1.0])
    assert (pairs["n_queries"] == 8).all() and (pairs["note"] == "").all()
    assert (pairs["ci_low"] <= pairs["delta"]).all() and (pairs["delta"] <= pairs["ci_high"]).all()
    # c - a is +1 on 7 queries and 0 on one: of the 2**8 sign patterns only the 2 with all seven signs equal are as
    # extreme, so the exact p is 2 / 128 = 1/64; c - b differs on one query: every flip is as extreme, p = 1
    assert pairs.loc[1, "p"] == pytest.approx(1 / 64, abs=0.004)
    assert pairs.loc[2, "p"] == 1.0


def test_holm_is_across_the_pairs_of_each_metric_and_seeds_follow_the_names() -> None:
    other = HITS.assign(a=HITS["a"][::-1].to_numpy())
    result = compare_all({"hit_rate@1": HITS, "mrr": other}, SETTINGS)
    for metric, wide in (("hit_rate@1", HITS), ("mrr", other)):
        pairs = result.pairs[result.pairs["metric"] == metric]
        assert pairs["p_holm"].tolist() == pytest.approx(stats.holm(pairs["p"].to_numpy()).tolist())
        assert pairs["significant"].tolist() == (pairs["p_holm"] <= SETTINGS.alpha).tolist()
        for pair in pairs.to_dict("records"):
            seed = stats.pair_seed(5, metric, pair["a"], pair["b"])  # the one seed of a pair
            assert pair["p"] == stats.randomisation_test(wide[pair["a"]], wide[pair["b"]], 20_000, seed)
    again = compare_all({"hit_rate@1": HITS, "mrr": other}, SETTINGS)
    pd.testing.assert_frame_equal(again.pairs, result.pairs)


def test_matrix_is_antisymmetric_in_delta_and_symmetric_in_p() -> None:
    pairs = compare_all({"hit_rate@1": HITS}, SETTINGS).pairs
    deltas = matrix(pairs, "hit_rate@1", ["a", "b", "c"])
    assert deltas.loc["b", "a"] == pytest.approx(0.75) and deltas.loc["a", "b"] == pytest.approx(-0.75)
    values = deltas.to_numpy()
    assert np.isnan(np.diag(values)).all()
    off = ~np.eye(3, dtype=bool)
    assert values[off] == pytest.approx(-values.T[off])
    low, high = matrix(pairs, "hit_rate@1", ["a", "b", "c"], "ci_low"), matrix(pairs, "hit_rate@1", ["a", "b", "c"], "ci_high")
    assert low.loc["a", "c"] == -high.loc["c", "a"] and high.loc["a", "c"] == -low.loc["c", "a"]
    p = matrix(pairs, "hit_rate@1", ["a", "b", "c"], "p_holm").to_numpy()
    assert p[off] == pytest.approx(p.T[off])


def test_sentences_and_verdict() -> None:
    win = {
        "metric": "hit_rate@5",
        "a": "bm25",
        "b": "dense",
        "delta": -0.22,
        "ci_low": -0.31,
        "ci_high": -0.12,
        "p_holm": 0.0004,
        "significant": True,
    }
    assert pair_sentence(win) == "dense beats bm25 on hit_rate@5 by +0.220 [+0.120, +0.310], p < 0.001"
    assert pair_sentence(win, digits=2, label="hit@5") == "dense beats bm25 on hit@5 by +0.22 [+0.12, +0.31], p < 0.001"
    # lower is better (a not-found rate): bm25's lower rate wins, its delta shown from its side
    assert pair_sentence(win | {"metric": "not_found_rate"}, higher=False).startswith(
        "bm25 beats dense on not_found_rate by -0.220 [-0.310, -0.120]"
    )
    tie = {
        "metric": "hit_rate@5",
        "a": "hyb_b",
        "b": "hyb_a",
        "delta": 0.01,
        "ci_low": -0.05,
        "ci_high": 0.07,
        "p_holm": 0.41,
        "significant": False,
    }
    assert pair_sentence(tie, with_metric=False) == "hyb_b and hyb_a are indistinguishable (p = 0.41)"
    line = verdict([tie, win], digits=2, label="hit@5")
    assert line == "dense beats bm25 on hit@5 by +0.22 [+0.12, +0.31], p < 0.001; hyb_b and hyb_a are indistinguishable (p = 0.41)"
    assert verdict([tie, win, tie], limit=1).endswith("; 2 more pairs (0 significant)")
    # beside a matrix of every pair: past fold_ties, the indistinguishable pairs are one clause, the wins all shown
    ties = [tie | {"a": f"r{i}"} for i in range(4)]
    assert verdict([*ties, win], digits=2, label="hit@5", fold_ties=4).count("indistinguishable") == 4
    folded = verdict([*ties, win], digits=2, label="hit@5", fold_ties=3)
    assert folded == "dense beats bm25 on hit@5 by +0.22 [+0.12, +0.31], p < 0.001; 4 other pairs are indistinguishable"
    assert verdict(ties, label="hit@5", fold_ties=3) == "hit@5: all 4 pairs are indistinguishable"
    wins = [win | {"a": f"w{i}"} for i in range(3)]
    counted = verdict([*ties, *wins], digits=2, label="hit@5", limit=1, fold_ties=3)
    assert counted.startswith("dense beats w0 on hit@5") and counted.endswith(
        "; 2 more significant pairs; 4 other pairs are indistinguishable"
    )


def test_too_few_queries_give_cis_without_p_values_and_say_so() -> None:
    settings = PairwiseSettings(n_bootstrap=1000, min_queries=10)
    pairs = compare_all({"hit_rate@1": HITS}, settings).pairs
    assert pairs["p"].isna().all() and pairs["p_holm"].isna().all() and not pairs["significant"].any()
    assert (pairs["note"] == "not enough queries for a test (n=8 < 10)").all()
    assert pairs["ci_high"].notna().all()
    assert verdict(pairs.to_dict("records"), label="hit@1") == "hit@1: no test (not enough queries for a test (n=8 < 10))"


def test_queries_without_a_value_for_some_run_are_left_out() -> None:
    gappy = HITS.copy()
    gappy.loc["q0", "a"] = math.nan
    pairs = compare_all({"hit_rate@1": gappy}, SETTINGS).pairs
    assert (pairs["n_queries"] == 7).all()
    assert pairs.loc[0, "delta"] == pytest.approx(6 / 7)
    empty = compare_all({"hit_rate@1": gappy.iloc[:1]}, SETTINGS).pairs
    assert empty["delta"].isna().all() and (empty["note"] == "no query has a value for every run").all()


def test_unknown_test_is_refused() -> None:
    with pytest.raises(ValueError, match="test must be"):
        PairwiseSettings(test="wilcoxon")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Parity with ranx and scipy on ranx's own per-query values
# --------------------------------------------------------------------------------------------------

RANX_METRICS = ("ndcg@10", "mrr", "map")


def _ranx_case(seed: int, n_queries: int = 30):
    """Qrels, three ranx runs (distinct scores), and ranx's per-query values of :data:`RANX_METRICS` as wide frames."""
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels = {f"q{q}": {str(d): int(rng.integers(1, 3)) for d in rng.choice(docs, size=3, replace=False)} for q in range(n_queries)}
    runs = []
    for name, boost in (("bm25", 0.2), ("dense", 1.0), ("hybrid", 1.05)):
        run = {}
        for qid, judged in qrels.items():
            scores = rng.random(len(docs)) + np.array([boost if d in judged else 0.0 for d in docs])
            run[qid] = {d: float(s) for d, s in zip(docs, scores)}
        runs.append(ranx.Run(run, name=name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in runs:
            ranx.evaluate(ranx.Qrels(qrels), run, list(RANX_METRICS))
    wide = {m: pd.DataFrame({run.name: pd.Series(run.scores[m]) for run in runs}) for m in RANX_METRICS}
    return ranx, ranx.Qrels(qrels), runs, wide


def test_means_and_t_test_equal_ranx_compare() -> None:
    ranx, qrels, runs, wide = _ranx_case(3)
    result = compare_all(wide, PairwiseSettings(test="t-test", n_bootstrap=1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = ranx.compare(qrels, runs, list(RANX_METRICS), stat_test="student", make_comparable=True)
    for row in result.means.to_dict("records"):
        assert row["mean"] == pytest.approx(report.results[row["run"]][row["metric"]], abs=1e-12)
    for pair in result.pairs.to_dict("records"):
        theirs = report.comparisons[frozenset([pair["a"], pair["b"]])][pair["metric"]]["p_value"]
        if math.isnan(theirs):  # scipy's NaN when every difference is 0; core.stats defines p = 1 there
            assert pair["delta"] == 0 and pair["p"] == 1.0
        else:
            assert pair["p"] == pytest.approx(theirs, abs=1e-9), pair
        assert pair["delta"] == pytest.approx(
            report.results[pair["a"]][pair["metric"]] - report.results[pair["b"]][pair["metric"]], abs=1e-12
        )


def test_randomisation_p_agrees_with_ranx_fisher_within_sampling_error() -> None:
    ranx, qrels, runs, wide = _ranx_case(4)
    continuous = {m: wide[m] for m in ("ndcg@10", "map")}  # no ties between permuted and observed sums (ranx has no tie tolerance)
    result = compare_all(continuous, PairwiseSettings(n_permutations=10_000, n_bootstrap=1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = ranx.compare(qrels, runs, list(continuous), stat_test="fisher", n_permutations=2000, make_comparable=True)
    for pair in result.pairs.to_dict("records"):
        theirs = report.comparisons[frozenset([pair["a"], pair["b"]])][pair["metric"]]["p_value"]
        tolerance = 5.0 * math.sqrt(max(theirs * (1 - theirs), 0.01) * (1 / 10_000 + 1 / 2000)) + 1e-3
        assert abs(pair["p"] - theirs) <= tolerance, (pair, theirs)


def test_t_test_equals_scipy_and_randomisation_the_exact_sign_flip_test() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(11)
    x, y = rng.integers(0, 6, 12) / 5.0, rng.integers(1, 7, 12) / 6.0
    wide = pd.DataFrame({"y": y, "x": x})
    t_pair = compare_all({"m": wide}, PairwiseSettings(test="t-test", n_bootstrap=1000)).pairs.iloc[0]
    assert t_pair["p"] == pytest.approx(float(scipy_stats.ttest_rel(x, y).pvalue), abs=1e-12)
    r_pair = compare_all({"m": wide}, PairwiseSettings(n_permutations=20_000, n_bootstrap=1000)).pairs.iloc[0]
    exact = scipy_stats.permutation_test(
        (x, y), lambda u, v, axis: np.mean(u - v, axis=axis), permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    ).pvalue
    assert r_pair["p"] == pytest.approx(exact, abs=5.0 * math.sqrt(max(exact * (1 - exact), 0.01) / 20_000) + 1e-3)
