"""Metrics: hand-computed cases, edge cases, and parity with pytrec_eval (per query) and ranx (means).

The parity runs have strictly decreasing scores, so the references' re-sort by score (ties broken by
doc id) gives the same ranking as our list order.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.metrics import (
    METRIC_DESCRIPTIONS,
    aggregate,
    describe_metric,
    per_query_metrics,
)

TOLERANCE = 1e-9

# --------------------------------------------------------------------------------------------------
# Hand-computed cases
# --------------------------------------------------------------------------------------------------

HAND_QRELS: Qrels = {
    "one_rel_at_2": {"d1": 1},
    "graded": {"a": 3, "b": 1, "c": 2, "z": 0},  # c is never retrieved; z is judged non-relevant
    "rel_at_11": {"r": 1},
    "missing_from_run": {"m": 1},
    "empty_run": {"e": 2},
}
HAND_RUN: Run = {
    "one_rel_at_2": [("d3", 0.9), ("d1", 0.8), ("d2", 0.7)],
    "graded": [("b", 5.0), ("x", 4.0), ("a", 3.0), ("z", 2.0), ("y", 1.0), ("w", 0.5)],
    "rel_at_11": [(f"n{i}", 20.0 - i) for i in range(10)] + [("r", 1.0)],
    "empty_run": [],
    "not_in_qrels": [("d1", 1.0)],
}
GRADED_NDCG = (1 / 1 + 3 / math.log2(4)) / (3 / 1 + 2 / math.log2(3) + 1 / math.log2(4))

# query -> column -> expected value, worked out by hand from HAND_RUN / HAND_QRELS.
HAND_EXPECTED: dict[str, dict[str, float]] = {
    "one_rel_at_2": {
        "n_relevant": 1, "hit_rate@1": 0, "hit_rate@5": 1, "hit_rate@10": 1,
        "recall@1": 0, "recall@5": 1, "recall@10": 1, "precision@5": 1 / 5, "f1@5": 1 / 3,
        "mrr": 1 / 2, "ndcg@10": 1 / math.log2(3), "first_relevant_rank": 2,
    },
    "graded": {
        "n_relevant": 3, "hit_rate@1": 1, "hit_rate@5": 1, "hit_rate@10": 1,
        "recall@1": 1 / 3, "recall@5": 2 / 3, "recall@10": 2 / 3, "precision@5": 2 / 5, "f1@5": 0.5,
        "mrr": 1.0, "ndcg@10": GRADED_NDCG, "first_relevant_rank": 1,
    },
    "rel_at_11": {
        "n_relevant": 1, "hit_rate@1": 0, "hit_rate@5": 0, "hit_rate@10": 0,
        "recall@1": 0, "recall@5": 0, "recall@10": 0, "precision@5": 0, "f1@5": 0,
        "mrr": 1 / 11, "ndcg@10": 0, "first_relevant_rank": 11,
    },
}  # fmt: skip
EXPECTED_COLUMNS = [
    "query_id", "n_relevant", "hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@1", "recall@5",
    "recall@10", "precision@5", "f1@5", "mrr", "ndcg@10", "found", "first_relevant_rank",
]  # fmt: skip


@pytest.fixture(scope="module")
def hand_frame() -> pd.DataFrame:
    return per_query_metrics(HAND_RUN, HAND_QRELS)


def test_one_row_per_qrels_query_in_qrels_order(hand_frame: pd.DataFrame) -> None:
    assert list(hand_frame.columns) == EXPECTED_COLUMNS
    assert list(hand_frame["query_id"]) == list(HAND_QRELS)  # "not_in_qrels" is ignored


@pytest.mark.parametrize("query_id", sorted(HAND_EXPECTED))
def test_hand_computed_values(hand_frame: pd.DataFrame, query_id: str) -> None:
    row = hand_frame.set_index("query_id").loc[query_id]
    for column, expected in HAND_EXPECTED[query_id].items():
        assert row[column] == pytest.approx(expected, abs=TOLERANCE), column
    assert bool(row["found"]) is True


@pytest.mark.parametrize("query_id", ["missing_from_run", "empty_run"])
def test_query_without_hits_scores_zero_and_is_not_found(hand_frame: pd.DataFrame, query_id: str) -> None:
    row = hand_frame.set_index("query_id").loc[query_id]
    metric_columns = [c for c in EXPECTED_COLUMNS if "@" in c or c == "mrr"]
    assert (row[metric_columns] == 0).all()
    assert bool(row["found"]) is False
    assert math.isnan(row["first_relevant_rank"])


def test_aggregate_hand_computed(hand_frame: pd.DataFrame) -> None:
    result = aggregate(hand_frame)
    assert result["n_queries"] == 5
    assert result["not_found"] == 2
    assert result["not_found_rate"] == pytest.approx(0.4)
    assert result["avg_rank_when_found"] == pytest.approx((2 + 1 + 11) / 3)
    assert result["mrr"] == pytest.approx((1 / 2 + 1 + 1 / 11) / 5)
    assert result["hit_rate@5"] == pytest.approx(2 / 5)
    assert result["recall@5"] == pytest.approx((1 + 2 / 3) / 5)
    assert result["ndcg@10"] == pytest.approx((1 / math.log2(3) + GRADED_NDCG) / 5)
    assert "latency_mean_ms" not in result
    assert set(result) <= set(METRIC_DESCRIPTIONS)


def test_custom_cutoffs_name_the_columns() -> None:
    frame = per_query_metrics(HAND_RUN, HAND_QRELS, ks=(3,), ndcg_k=5, f1_k=10, precision_ks=(1, 10))
    assert [c for c in frame.columns if "@" in c] == [
        "hit_rate@3", "recall@3", "precision@1", "precision@10", "f1@10", "ndcg@5",
    ]  # fmt: skip
    graded = frame.set_index("query_id").loc["graded"]
    assert graded["recall@3"] == pytest.approx(2 / 3)
    assert graded["precision@10"] == pytest.approx(2 / 10)  # divisor is k even with 6 hits


# --------------------------------------------------------------------------------------------------
# Edge cases
# --------------------------------------------------------------------------------------------------


def test_empty_qrels_raises() -> None:
    with pytest.raises(ValueError, match="qrels is empty"):
        per_query_metrics({"q": [("d", 1.0)]}, {})


def test_grade_zero_is_not_relevant() -> None:
    frame = per_query_metrics({"q": [("judged_bad", 2.0), ("good", 1.0)]}, {"q": {"judged_bad": 0, "good": 1}})
    row = frame.iloc[0]
    assert row["n_relevant"] == 1
    assert row["hit_rate@1"] == 0 and row["first_relevant_rank"] == 2 and row["mrr"] == 0.5


def test_query_with_only_grade_zero_scores_zero() -> None:
    frame = per_query_metrics({"q": [("d", 1.0)]}, {"q": {"d": 0}})
    row = frame.iloc[0]
    assert row["n_relevant"] == 0 and not row["found"]
    assert row[["recall@10", "ndcg@10", "mrr", "f1@5"]].eq(0).all()


def test_duplicate_doc_in_run_raises() -> None:
    with pytest.raises(ValueError, match="more than once"):
        per_query_metrics({"q": [("d", 2.0), ("d", 1.0)]}, {"q": {"d": 1}})


@pytest.mark.parametrize("ks", [(0,), (2.5,)])
def test_bad_cutoff_raises(ks: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="cutoffs"):
        per_query_metrics(HAND_RUN, HAND_QRELS, ks=ks)  # type: ignore[arg-type]


def test_latency_mean_and_p95_linear_interpolation(hand_frame: pd.DataFrame) -> None:
    result = aggregate(hand_frame, latencies_ms=[10.0, 20.0, 30.0, 40.0, 50.0])
    assert result["latency_mean_ms"] == pytest.approx(30.0)
    assert result["latency_p95_ms"] == pytest.approx(48.0)  # rank 0.95 * 4 = 3.8: 40 + 0.8 * 10
    result = aggregate(hand_frame, latencies_ms=list(range(1, 101)))
    assert result["latency_p95_ms"] == pytest.approx(95.05)


def test_empty_latencies_or_frame_raise(hand_frame: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="latencies_ms is empty"):
        aggregate(hand_frame, latencies_ms=[])
    with pytest.raises(ValueError, match="no rows"):
        aggregate(hand_frame.iloc[:0])


def test_avg_rank_when_found_is_nan_when_nothing_found() -> None:
    result = aggregate(per_query_metrics({}, {"q": {"d": 1}}))
    assert result["not_found_rate"] == 1.0 and math.isnan(result["avg_rank_when_found"])


def test_descriptions() -> None:
    assert "recall@5" in METRIC_DESCRIPTIONS["hit_rate@5"]  # one relevant doc: hit_rate@k == recall@k
    assert "hit_rate@5" in METRIC_DESCRIPTIONS["recall@5"]
    assert describe_metric("recall@20").count("20") >= 2
    with pytest.raises(KeyError):
        describe_metric("recall")


# --------------------------------------------------------------------------------------------------
# Parity with reference implementations
# --------------------------------------------------------------------------------------------------


def _random_run_and_qrels(n_queries: int = 200, depth: int = 100, seed: int = 7) -> tuple[Run, Qrels]:
    """1-4 relevant docs per query (grades 1-3, mostly near the top, some never retrieved), a grade-0
    judgement, strictly decreasing scores, and one query in ten with a short run (1-9 hits)."""
    rng = np.random.default_rng(seed)
    run: Run = {}
    qrels: Qrels = {}
    for i in range(n_queries):
        docs = [f"doc{j:05d}" for j in rng.choice(20_000, depth + 10, replace=False)]
        length = int(rng.integers(1, 10)) if i % 10 == 0 else depth
        scores = depth - np.arange(length) + rng.random() * 0.5  # strictly decreasing: no ties
        run[f"q{i:03d}"] = [(doc, float(score)) for doc, score in zip(docs[:length], scores)]
        ranks: set[int] = set()
        while len(ranks) < int(rng.integers(1, 5)):
            ranks.add(int(rng.geometric(0.15)))  # 1-based; beyond the run -> an unretrieved doc
        judged = [docs[r - 1] if r <= length else docs[depth + k] for k, r in enumerate(ranks)]
        qrels[f"q{i:03d}"] = {doc: int(rng.integers(1, 4)) for doc in judged}
        qrels[f"q{i:03d}"].setdefault(docs[int(rng.integers(0, length))], 0)
    return run, qrels


@pytest.fixture(scope="module")
def parity_data() -> tuple[Run, Qrels]:
    run, qrels = _random_run_and_qrels()
    assert all(len({s for _, s in hits}) == len(hits) for hits in run.values())  # no tied scores
    return run, qrels


@pytest.fixture(scope="module")
def parity_frame(parity_data: tuple[Run, Qrels]) -> pd.DataFrame:
    run, qrels = parity_data
    return per_query_metrics(run, qrels).set_index("query_id")


def _as_score_dicts(run: Run) -> dict[str, dict[str, float]]:
    return {query_id: dict(hits) for query_id, hits in run.items()}


def test_parity_data_covers_the_interesting_cases(parity_frame: pd.DataFrame) -> None:
    assert (parity_frame["n_relevant"] > 1).any()
    assert (~parity_frame["found"]).any()  # relevant docs never retrieved
    assert ((parity_frame["first_relevant_rank"] > 10) & parity_frame["found"]).any()
    assert parity_frame["ndcg@10"].between(0, 1, inclusive="neither").any()


PYTREC_COLUMNS = {
    "hit_rate@1": "success_1", "hit_rate@5": "success_5", "hit_rate@10": "success_10",
    "recall@1": "recall_1", "recall@5": "recall_5", "recall@10": "recall_10",
    "precision@5": "P_5", "mrr": "recip_rank", "ndcg@10": "ndcg_cut_10",
}  # fmt: skip


def test_parity_with_pytrec_eval_per_query(parity_data: tuple[Run, Qrels], parity_frame: pd.DataFrame) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    assert "success" in pytrec_eval.supported_measures
    run, qrels = parity_data
    measures = {"success.1,5,10", "recall.1,5,10", "P.5", "recip_rank", "ndcg_cut.10"}
    reference = pd.DataFrame(pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(_as_score_dicts(run))).T
    assert sorted(reference.index) == sorted(parity_frame.index)
    reference = reference.loc[parity_frame.index]
    for ours, theirs in PYTREC_COLUMNS.items():
        np.testing.assert_allclose(parity_frame[ours], reference[theirs], rtol=0, atol=TOLERANCE, err_msg=ours)
    # f1@5, found and first_relevant_rank follow from the reference's own values.
    p, r = reference["P_5"], reference["recall_5"]
    np.testing.assert_allclose(parity_frame["f1@5"], (2 * p * r / (p + r)).fillna(0), rtol=0, atol=TOLERANCE)
    np.testing.assert_array_equal(parity_frame["found"], reference["recip_rank"] > 0)
    found = parity_frame["found"]
    np.testing.assert_allclose(parity_frame.loc[found, "first_relevant_rank"], 1 / reference.loc[found, "recip_rank"])


def test_pytrec_eval_conventions_for_missing_and_unjudgeable_queries() -> None:
    """pytrec_eval drops a query missing from the run (we score it 0) and scores 0 a query whose qrels
    hold only grade 0 (as we do)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels: Qrels = {"hit": {"d1": 1}, "all_zero": {"d1": 0}, "missing": {"d1": 1}}
    run: Run = {"hit": [("d1", 1.0)], "all_zero": [("d1", 1.0)]}
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"recall.5", "ndcg_cut.10"}).evaluate(_as_score_dicts(run))
    assert set(reference) == {"hit", "all_zero"}
    assert reference["all_zero"] == {"recall_5": 0.0, "ndcg_cut_10": 0.0}
    ours = per_query_metrics(run, qrels).set_index("query_id")
    assert ours.loc["all_zero", ["recall@5", "ndcg@10"]].eq(0).all()
    assert ours.loc["missing", ["recall@5", "ndcg@10"]].eq(0).all()


RANX_METRICS = ["hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@1", "recall@5", "recall@10",
                "precision@5", "f1@5", "mrr", "ndcg@10"]  # fmt: skip


def test_parity_with_ranx_means(parity_data: tuple[Run, Qrels]) -> None:
    """ranx's ``mrr`` has no cutoff, like ours; ``make_comparable=True`` scores a query missing from
    the run 0 and keeps it in the mean, like ours. ranx caches its Numba compilation: the first call on
    a fresh install (empty Numba cache) took ~39 s on 2 cores, later ones ~4 s."""
    ranx = pytest.importorskip("ranx")
    run, qrels = parity_data
    run = {query_id: hits for query_id, hits in run.items() if query_id != "q001"}  # q001 missing
    ours = aggregate(per_query_metrics(run, qrels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumbaTypeSafetyWarning from ranx internals
        theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(_as_score_dicts(run)), RANX_METRICS, make_comparable=True)
    for name in RANX_METRICS:
        assert ours[name] == pytest.approx(float(theirs[name]), abs=TOLERANCE), name
