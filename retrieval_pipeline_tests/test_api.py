"""The public API (``from retrieval_pipeline import evaluate, compare``): parity with pytrec_eval for every
metric name (per query, 1e-12), with ranx's ``compare`` (means 1e-12, t-test p 1e-9, randomisation p within
sampling error), with scipy (t-test, exact sign-flip permutation test), input forms and errors.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline import compare, evaluate
from retrieval_pipeline.api_inputs import load_run
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation.metrics import parse_metric
from retrieval_pipeline.core.evaluation.statistics import stats

#: Every spelling the parity test checks, each against the pytrec_eval measure it equals.
METRIC_NAMES = (
    "ndcg@20",
    "ndcg@3",
    "ndcg",
    "ndcg_cut.10",
    "recall@100",
    "recall@5",
    "R@1",
    "mrr@10",
    "mrr@1",
    "mrr",
    "P@3",
    "precision@7",
    "P_1",
    "R-prec",
    "map",
    "map@5",
    "hit_rate@5",
    "hit@1",
    "success@10",
)

ABS = 1e-12


def _random_case(seed: int, n_queries: int = 60) -> tuple[dict, dict]:
    """Graded qrels (0..3, some queries with no relevant doc) and a run with ties, float32 ties, missing and empty queries."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(50)] + ["dé", "dz", "D1", "d1_"]  # string order is not numeric order; non-ASCII
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.choice(docs, size=int(rng.integers(1, 15)), replace=False)
        qrels[qid] = {str(d): int(rng.integers(0, 4)) for d in judged}
        if q % 11 == 5:
            continue  # missing from the run: scores 0 with us, absent from pytrec_eval's output
        retrieved = rng.choice(docs, size=int(rng.integers(0, 45)), replace=False)
        scores = rng.integers(-3, 6, size=len(retrieved)) / 4.0  # many exact ties
        near = rng.random(len(retrieved)) < 0.2
        scores = np.where(near, scores - 1e-9, scores)  # ties for trec_eval (float32), not in float64
        run[qid] = {str(d): float(s) for d, s in zip(retrieved, scores)}
    run["not_judged"] = {"d1": 1.0}
    return qrels, run


def _trec_eval_top(scores: dict[str, float], k: int) -> dict[str, float]:
    """The top ``k`` as trec_eval ranks them (float32 score desc, doc id desc), written independently of the API."""
    ranked = sorted(scores.items(), key=lambda item: (np.float32(item[1]), item[0]), reverse=True)
    return dict(ranked[:k])


def _pytrec_eval_values(qrels: dict, run: dict, name: str) -> dict[str, float]:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    parsed = parse_metric(name)
    measure = parsed.trec_eval_measure
    if measure is None:  # mrr@k: recip_rank of the run cut at k
        measure, run = "recip_rank", {q: _trec_eval_top(hits, parsed.k) for q, hits in run.items()}
    result = pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(run)
    key = measure.replace(".", "_")
    return {q: values[key] for q, values in result.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_metric_name_equals_pytrec_eval_per_query(seed: int) -> None:
    qrels, run = _random_case(seed)
    ours = evaluate(qrels, run, METRIC_NAMES)
    for name in METRIC_NAMES:
        theirs = _pytrec_eval_values(qrels, run, name)
        values = ours.per_query[parse_metric(name).name]
        assert set(values) == set(qrels)
        for qid in qrels:
            expected = theirs.get(qid, 0.0)  # pytrec_eval leaves out queries without a (non-empty) run
            assert values[qid] == pytest.approx(expected, abs=ABS, rel=0), (name, qid)
        assert ours[name] == pytest.approx(sum(theirs.get(q, 0.0) for q in qrels) / len(qrels), abs=ABS, rel=0)


def test_means_equal_pytrec_eval_means_when_the_run_has_every_query() -> None:
    qrels, run = _random_case(7)
    run = {q: run.get(q) or {"nothing": 0.0} for q in qrels}
    ours = evaluate(qrels, run, METRIC_NAMES)
    for name in METRIC_NAMES:
        theirs = _pytrec_eval_values(qrels, run, name)
        assert len(theirs) == len(qrels)
        assert ours[name] == pytest.approx(float(np.mean(list(theirs.values()))), abs=ABS, rel=0), name


def test_ties_are_broken_as_trec_eval_breaks_them() -> None:
    qrels = {"q": {"a": 1}}
    # equal scores: doc id descending puts "b" above "a"
    assert evaluate(qrels, {"q": {"a": 1.0, "b": 1.0}}, "mrr")["mrr"] == 0.5
    # a gap below float32 precision is a tie for trec_eval too
    assert evaluate(qrels, {"q": {"a": 0.5, "b": 0.5 - 1e-9}}, "mrr")["mrr"] == 0.5
    assert evaluate(qrels, {"q": {"a": 0.5, "b": 0.5 - 1e-6}}, "mrr")["mrr"] == 1.0
    # the list order of a [(doc, score)] run is not used: scores rank
    assert evaluate(qrels, {"q": [("b", 0.1), ("a", 0.9)]}, "mrr")["mrr"] == 1.0


def test_hand_computed_values() -> None:
    qrels = {"q1": {"a": 1, "b": 2, "c": 0}}
    run = {"q1": {"a": 1.0, "b": 1.0, "c": 2.0, "d": 0.5}}  # ranked c, b, a, d
    result = evaluate(qrels, run, ["P@3", "hit@1", "R-prec", "map", "map@2", "mrr@1", "ndcg@3"])
    assert result.means == pytest.approx(
        {
            "precision@3": 2 / 3,
            "hit_rate@1": 0.0,
            "r_prec": 0.5,
            "map": (1 / 2 + 2 / 3) / 2,
            "map@2": (1 / 2) / 2,
            "mrr@1": 0.0,
            "ndcg@3": (2 / math.log2(3) + 1 / math.log2(4)) / (2 + 1 / math.log2(3)),
        },
        abs=ABS,
    )


# --------------------------------------------------------------------------------------------------
# Input forms and errors
# --------------------------------------------------------------------------------------------------


def _small() -> tuple[dict, dict]:
    qrels = {"q1": {"d1": 1, "d2": 2}, "q2": {"d3": 1}, "q3": {"d5": 1, "d6": 0}}
    run = {"q1": {"d1": 1.2, "d9": 0.8, "d2": 0.5}, "q2": {"d4": 2.0, "d3": 1.0}, "q3": {"d7": 3.0, "d5": 2.0}}
    return qrels, run


def test_dicts_files_frames_and_ranx_objects_give_the_same_numbers(tmp_path: Path) -> None:
    qrels, run = _small()
    reference = evaluate(qrels, run, ["ndcg@10", "P@2", "map"]).means
    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "a.run"
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, j in qrels.items() for d, g in j.items()))
    run_path.write_text("".join(f"{q} Q0 {d} 0 {s} tag\n" for q, h in run.items() for d, s in h.items()))
    assert evaluate(qrels_path, run_path, ["ndcg@10", "P@2", "map"]).means == reference
    assert evaluate(str(qrels_path), str(run_path), ["ndcg@10", "P@2", "map"]).means == reference
    qrels_frame = pd.DataFrame([(q, d, g) for q, j in qrels.items() for d, g in j.items()], columns=["query_id", "doc_id", "relevance"])
    run_frame = pd.DataFrame([(q, d, s) for q, h in run.items() for d, s in h.items()], columns=["qid", "docno", "score"])
    assert evaluate(qrels_frame, run_frame, ["ndcg@10", "P@2", "map"]).means == reference
    as_lists = {q: list(h.items()) for q, h in run.items()}
    assert evaluate(qrels, as_lists, ["ndcg@10", "P@2", "map"]).means == reference
    ranx = pytest.importorskip("ranx")
    assert evaluate(ranx.Qrels(qrels), ranx.Run(run), ["ndcg@10", "P@2", "map"]).means == reference


def test_result_objects() -> None:
    qrels, run = _small()
    result = evaluate(qrels, run, ["ndcg@10", "P@2"])
    assert result["precision@2"] == result["P@2"] == result["p.2"]
    assert list(result) == ["ndcg@10", "precision@2"] and result.n_queries == 3
    assert result.to_frame().shape == (3, 2)
    assert result.to_dict(per_query=True)["per_query"]["precision@2"] == {"q1": 0.5, "q2": 0.5, "q3": 0.5}
    assert str(result).splitlines()[0].split() == ["num_q", "all", "3"]


def test_malformed_trec_files_name_the_file_and_line(tmp_path: Path) -> None:
    qrels, run = _small()
    bad_run = tmp_path / "bad.run"
    bad_run.write_text("q1 Q0 d1 1 0.5 tag\nq1 Q0 d2 2 high tag\n")
    with pytest.raises(InputError, match=r"bad\.run: line 2: score 'high' is not a number"):
        evaluate(qrels, bad_run)
    bad_qrels = tmp_path / "bad.qrels"
    bad_qrels.write_text("q1 0 d1 1\nq1 0 d2 1 x\n")
    with pytest.raises(InputError, match=r"bad\.qrels: line 2: expected 4 or 3 fields"):
        evaluate(bad_qrels, run)


@pytest.mark.parametrize(
    ("qrels", "run", "message"),
    [
        ({}, {}, "qrels is empty"),
        ({"q": {"d": 1.5}}, {}, "grade 1.5 of query 'q', doc 'd' is not an integer"),
        ({"q": {"d": 1}}, {"q": {"d": float("nan")}}, "score nan of query 'q', doc 'd' is not a finite number"),
        ({"q": {"d": 1}}, {"q": ["d"]}, r"query 'q' must map to \{doc_id: score\}"),
        ({"q": {"d": 1}}, [1, 2], "expected a dict"),
    ],
)
def test_bad_inputs_raise_value_errors(qrels: object, run: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate(qrels, run, "map")


def test_frame_without_columns_is_refused() -> None:
    with pytest.raises(ValueError, match="no score column"):
        load_run(pd.DataFrame({"query_id": ["q"], "doc_id": ["d"]}))


def test_importing_the_package_is_light(project_root: Path) -> None:
    code = (
        "import sys; import retrieval_pipeline; assert 'pandas' not in sys.modules, 'pandas at import'\n"
        "from retrieval_pipeline import evaluate, compare\n"
        "heavy = sorted(m for m in ('torch', 'dagster', 'sentence_transformers') if m in sys.modules); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=project_root, check=True, timeout=120)


# --------------------------------------------------------------------------------------------------
# compare: parity with ranx and scipy
# --------------------------------------------------------------------------------------------------

#: Our names and ranx's for the metrics both have with the same definition.
RANX_NAMES = {
    "ndcg@10": "ndcg@10",
    "ndcg": "ndcg",
    "precision@5": "precision@5",
    "recall@10": "recall@10",
    "mrr@10": "mrr@10",
    "mrr": "mrr",
    "map@100": "map@100",
    "map": "map",
    "hit_rate@5": "hit_rate@5",
    "r_prec": "r-precision",
}


def _systems(seed: int, n_queries: int = 30) -> tuple[dict, dict[str, dict]]:
    """Qrels and three runs with distinct scores (ranx breaks score ties its own way), the third close to the second."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels = {f"q{q}": {str(d): int(rng.integers(1, 3)) for d in rng.choice(docs, size=3, replace=False)} for q in range(n_queries)}
    runs: dict[str, dict] = {"bm25": {}, "dense": {}, "hybrid": {}}
    for qid, judged in qrels.items():
        for name, boost in (("bm25", 0.2), ("dense", 1.0), ("hybrid", 1.05)):
            scores = rng.random(len(docs)) + np.array([boost if d in judged else 0.0 for d in docs])
            runs[name][qid] = {d: float(s) for d, s in zip(docs, scores)}
    return qrels, runs


def _ranx_compare(qrels: dict, runs: dict[str, dict], stat_test: str, n_permutations: int = 1000):
    ranx = pytest.importorskip("ranx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ranx.compare(
            ranx.Qrels(qrels),
            [ranx.Run(run, name=name) for name, run in runs.items()],
            list(RANX_NAMES.values()),
            stat_test=stat_test,
            n_permutations=n_permutations,
            make_comparable=True,
        )


def test_compare_means_and_t_test_equal_ranx() -> None:
    qrels, runs = _systems(3)
    ours = compare(qrels, runs, list(RANX_NAMES), test="t-test", n_bootstrap=1000)
    report = _ranx_compare(qrels, runs, "student")
    for name, ranx_name in RANX_NAMES.items():
        for run in runs:
            assert ours.means[name][run] == pytest.approx(report.results[run][ranx_name], abs=ABS, rel=0), (name, run)
        for pair in (p for p in ours.pairs if p.metric == name):
            theirs = report.comparisons[frozenset([pair.run, pair.other])][ranx_name]["p_value"]
            if math.isnan(theirs):  # scipy's NaN when every difference is 0; core.stats defines p = 1 there
                assert pair.delta == 0 and pair.p == 1.0
            else:
                assert pair.p == pytest.approx(theirs, abs=1e-9), (name, pair.run, pair.other)


def _sampling_tolerance(p: float, *counts: int) -> float:
    """Five standard errors of the difference of two Monte Carlo estimates of ``p``, plus a little for ties."""
    return 5.0 * math.sqrt(max(p * (1 - p), 0.01) * sum(1.0 / n for n in counts)) + 1e-3


def test_compare_randomisation_p_values_agree_with_ranx_within_sampling_error() -> None:
    qrels, runs = _systems(4)
    continuous = {"ndcg@10": "ndcg@10", "map": "map"}  # no ties between permuted and observed sums (ranx has no tie tolerance)
    ours = compare(qrels, runs, list(continuous), n_permutations=10_000, n_bootstrap=1000)
    ranx = pytest.importorskip("ranx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = ranx.compare(
            ranx.Qrels(qrels),
            [ranx.Run(run, name=name) for name, run in runs.items()],
            list(continuous.values()),
            stat_test="fisher",
            n_permutations=2000,
            make_comparable=True,
        )
    for pair in ours.pairs:
        theirs = report.comparisons[frozenset([pair.run, pair.other])][continuous[pair.metric]]["p_value"]
        assert abs(pair.p - theirs) <= _sampling_tolerance(theirs, 10_000, 2000), (pair, theirs)


def _run_with_precision(counts: np.ndarray) -> dict[str, dict[str, float]]:
    """A run whose precision@10 on query ``q{i}`` is ``counts[i] / 10`` (relevant docs ``r0..r9``)."""
    return {
        f"q{i}": {**{f"r{j}": 10.0 - j for j in range(int(c))}, **{f"n{j}": 5.0 - j for j in range(10 - int(c))}}
        for i, c in enumerate(counts)
    }


@pytest.mark.parametrize("shift", [0, 2, 4])
def test_randomisation_p_matches_scipy_exact_sign_flip_test(shift: int) -> None:
    """12 queries: scipy enumerates all 4,096 sign patterns (the exact p); ours samples 20,000."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(shift)
    n = 12
    qrels = {f"q{i}": {f"r{j}": 1 for j in range(10)} for i in range(n)}
    base = rng.integers(0, 7, n)
    better = np.clip(base + shift + rng.integers(-2, 3, n), 0, 10)
    result = compare(
        qrels, {"a": _run_with_precision(base), "b": _run_with_precision(better)}, "P@10", n_permutations=20_000, n_bootstrap=1000
    )
    x, y = better / 10.0, base / 10.0
    assert list(result.per_query["precision@10"]["b"].values()) == pytest.approx(x.tolist(), abs=ABS)
    exact = scipy_stats.permutation_test(
        (x, y), lambda u, v, axis: np.mean(u - v, axis=axis), permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    ).pvalue
    pair = result.pair("P@10", "b", "a")
    assert pair.p == pytest.approx(exact, abs=_sampling_tolerance(exact, 20_000))
    assert pair.delta == pytest.approx(float(np.mean(x - y)), abs=ABS)


def test_t_test_p_equals_scipy_ttest_rel() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    qrels, runs = _systems(6, n_queries=20)
    result = compare(qrels, runs, ["ndcg@10", "hit@1"], test="t-test", n_bootstrap=1000)
    for pair in result.pairs:
        x = np.array(list(result.per_query[pair.metric][pair.run].values()))
        y = np.array(list(result.per_query[pair.metric][pair.other].values()))
        if not (x - y).any():  # scipy's NaN; core.stats defines p = 1 when the runs do not differ
            assert pair.p == 1.0
            continue
        assert pair.p == pytest.approx(float(scipy_stats.ttest_rel(x, y).pvalue), abs=1e-12)


def test_compare_reuses_core_stats_and_holm_corrects_each_metric() -> None:
    qrels, runs = _systems(8, n_queries=25)
    result = compare(qrels, runs, ["ndcg@10", "recall@5"], n_permutations=5000, n_bootstrap=1000, seed=3)
    for metric in result.metrics:
        pairs = [p for p in result.pairs if p.metric == metric]
        assert [(p.run, p.other) for p in pairs] == [("dense", "bm25"), ("hybrid", "bm25"), ("hybrid", "dense")]
        assert [p.p_holm for p in pairs] == pytest.approx(stats.holm([p.p for p in pairs]).tolist())
        for p in pairs:
            x = np.array(list(result.per_query[metric][p.run].values()))
            y = np.array(list(result.per_query[metric][p.other].values()))
            seed = stats.pair_seed(3, metric, p.run, p.other)  # the one seed of a pair
            assert p.p == stats.randomisation_test(x, y, 5000, seed)
            assert p.ci_low <= p.delta <= p.ci_high
            assert p.significant == (p.p_holm <= 0.05)
    again = compare(qrels, runs, ["ndcg@10", "recall@5"], n_permutations=5000, n_bootstrap=1000, seed=3)
    assert again.to_dict() == result.to_dict()


def test_compare_outputs() -> None:
    qrels, runs = _systems(9, n_queries=40)
    result = compare(qrels, runs, ["hit@5", "ndcg@10"], n_bootstrap=1000)
    matrix = result.matrix("hit@5")
    assert list(matrix.index) == list(matrix.columns) == ["bm25", "dense", "hybrid"]
    assert matrix.loc["dense", "bm25"] == -matrix.loc["bm25", "dense"] == result.pair("hit_rate@5", "dense", "bm25").delta
    assert np.isnan(matrix.loc["bm25", "bm25"])
    verdict = result.verdict("hit@5")
    assert verdict.startswith("dense beats bm25 on hit_rate@5 by +") or verdict.startswith("hybrid beats bm25 on hit_rate@5 by +")
    assert "hybrid and dense are indistinguishable (p = " in verdict
    text = str(result)
    assert "hit_rate@5" in text and "p Holm" in text and verdict in text
    as_dict = result.to_dict()
    assert as_dict["verdicts"]["hit_rate@5"] == verdict
    assert set(as_dict["means"]["ndcg@10"]) == {"bm25", "dense", "hybrid"}
    assert len(as_dict["comparisons"]) == 6
    import json

    assert json.loads(result.to_json())["runs"] == ["bm25", "dense", "hybrid"]


def test_compare_needs_two_runs() -> None:
    qrels, run = _small()
    with pytest.raises(ValueError, match="at least two runs"):
        compare(qrels, {"only": run}, "map")
    with pytest.raises(ValueError, match="test must be"):
        compare(qrels, {"a": run, "b": run}, "map", test="wilcoxon")  # type: ignore[arg-type]
