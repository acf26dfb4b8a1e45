"""The regression gate: alerts on a real drop, not on tie-order noise or a tiny drop; flipped queries exact.

The frames come from :func:`per_query_metrics` on synthetic runs whose gold ranks are set by
construction, so which queries flip, and their old and new ranks, are known independently of the gate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.checks.regression import FLIPPED_COLUMNS, REGRESSION_COLUMNS, DriftSettings, regression_gate
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics

SETTINGS = DriftSettings()  # hit_rate@5, alpha 0.05, min_drop 0.05, 10,000 permutations
DEPTH = 10


def _qrels(n: int) -> Qrels:
    return {f"q{i:03d}": {f"gold{i}": 1} for i in range(n)}


def _run(gold_ranks: dict[str, float], scores: dict[str, list[float]] | None = None) -> Run:
    """A run of DEPTH hits per query with the gold at ``gold_ranks[q]`` (NaN: not retrieved)."""
    run: Run = {}
    for query_id, rank in gold_ranks.items():
        i = int(query_id[1:])
        hits = [f"other{i}_{j}" for j in range(DEPTH)]
        if not math.isnan(rank):
            hits[int(rank) - 1] = f"gold{i}"
        query_scores = (scores or {}).get(query_id, [float(DEPTH - j) for j in range(DEPTH)])
        run[query_id] = list(zip(hits, query_scores))
    return run


def _frame(runs: dict[str, Run], qrels: Qrels) -> pd.DataFrame:
    return pd.concat([per_query_metrics(run, qrels).assign(retriever=name) for name, run in runs.items()], ignore_index=True)


def _base_ranks(n: int, seed: int = 0) -> dict[str, float]:
    """Gold ranks: 1..5 for about 80% of the queries, 6..10 or not found for the rest."""
    rng = np.random.default_rng(seed)
    ranks = {}
    for i in range(n):
        u = rng.random()
        ranks[f"q{i:03d}"] = float(rng.integers(1, 6)) if u < 0.8 else (float(rng.integers(6, 11)) if u < 0.9 else math.nan)
    return ranks


N = 60
QRELS = _qrels(N)
BASE = _base_ranks(N)
BLESSED = _frame({"bm25": _run(BASE), "dense": _run(BASE)}, QRELS)


def test_a_degraded_run_alerts_and_lists_exactly_the_flipped_queries():
    """30% of the queries lose their gold from the top 5 (moved to rank 8, or dropped from the run)."""
    in_top5 = [q for q, r in BASE.items() if r <= 5]
    moved = {q: (8.0 if j % 2 else math.nan) for j, q in enumerate(in_top5[: int(0.3 * N)])}
    current = _frame({"bm25": _run(BASE | moved), "dense": _run(BASE)}, QRELS)
    report = regression_gate(current, BLESSED, ["bm25", "dense"], SETTINGS)

    assert not report.passed and report.alerting == ["bm25"]
    bm25 = report.frame.set_index("retriever").loc["bm25"]
    before = sum(r <= 5 for r in BASE.values()) / N
    assert bm25["before"] == pytest.approx(before) and bm25["after"] == pytest.approx(before - len(moved) / N)
    assert bm25["drop"] == pytest.approx(len(moved) / N) and bm25["significant"] and bm25["practical"]
    assert bm25["p"] < 1e-3  # 18 drops, no gain: one-sided exact p = 2**-18

    expected = pd.DataFrame(
        {"retriever": "bm25", "query_id": list(moved), "old_rank": [BASE[q] for q in moved], "new_rank": list(moved.values())}
    )
    got = report.flipped.sort_values("query_id", ignore_index=True)
    pd.testing.assert_frame_equal(got, expected.sort_values("query_id", ignore_index=True), check_dtype=False)
    assert list(report.flipped.columns) == list(FLIPPED_COLUMNS)
    assert bm25["n_flipped"] == len(moved) and bm25["n_gained"] == 0

    assert f"bm25 {before:.3f} -> {before - len(moved) / N:.3f}" in report.description
    assert sum(q in report.description for q in moved) == 10 and "and 8 more" in report.description  # 18 flipped, 10 named
    dense = report.frame.set_index("retriever").loc["dense"]
    assert not dense["alert"] and dense["drop"] == 0 and dense["p"] == 1.0


def test_flipped_query_ranks_are_written_in_the_description():
    moved = {q: 9.0 for q in [q for q, r in BASE.items() if r <= 5][:6]}
    lost = {q: math.nan for q in [q for q, r in BASE.items() if r <= 5][6:12]}
    current = _frame({"bm25": _run(BASE | moved | lost)}, QRELS)
    report = regression_gate(current, BLESSED, ["bm25"], SETTINGS)
    assert not report.passed
    for q in moved:
        assert f"{q} ({int(BASE[q])} -> 9)" in report.description
    for q in list(lost)[:4]:  # the first 10 flipped are named
        assert f"{q} ({int(BASE[q])} -> not found)" in report.description


def test_a_run_equal_up_to_tie_order_does_not_alert():
    """Two queries have the gold at rank 5 tied in score with rank 6; the current run breaks the tie the
    other way, so those two leave the top 5. Every other query is unchanged: no alert."""
    tied = [q for q, r in BASE.items() if r == 5][:2]
    assert len(tied) == 2
    scores = {q: [10.0, 9.0, 8.0, 7.0, 6.0, 6.0, 4.0, 3.0, 2.0, 1.0] for q in tied}
    blessed = _frame({"bm25": _run(BASE, scores)}, QRELS)
    current = _frame({"bm25": _run(BASE | dict.fromkeys(tied, 6.0), scores)}, QRELS)
    report = regression_gate(current, blessed, ["bm25"], SETTINGS)
    row = report.frame.iloc[0]
    assert report.passed and not row["alert"] and not row["significant"] and not row["practical"]
    assert row["p"] == pytest.approx(0.25, abs=4 * math.sqrt(0.25 * 0.75 / SETTINGS.n_permutations))  # exact: P(both flips +) = 1/4
    assert sorted(report.flipped["query_id"]) == sorted(tied) and (report.flipped["new_rank"] == 6).all()


def test_a_significant_but_tiny_drop_does_not_alert():
    """2,000 queries, 60 lose their hit and none gain: p ~ 2**-60 (significant), drop 0.03 < min_drop 0.05."""
    n = 2000
    ids = [f"q{i:04d}" for i in range(n)]
    before = pd.DataFrame({"retriever": "bm25", "query_id": ids, "hit_rate@5": 1.0, "first_relevant_rank": 1.0})
    after = before.assign(**{"hit_rate@5": [0.0] * 60 + [1.0] * (n - 60), "first_relevant_rank": [7.0] * 60 + [1.0] * (n - 60)})
    report = regression_gate(after, before, ["bm25"], SETTINGS)
    row = report.frame.iloc[0]
    assert row["significant"] and row["p"] == 0.0 and row["drop"] == pytest.approx(0.03)
    assert not row["practical"] and not row["alert"] and report.passed
    assert "drop below 0.05" in report.description


def test_an_improvement_never_alerts_the_test_is_one_sided():
    better = {q: 1.0 for q in BASE}
    current = _frame({"bm25": _run(better)}, QRELS)
    report = regression_gate(current, BLESSED, ["bm25"], DriftSettings(min_drop=0.0))
    row = report.frame.iloc[0]
    assert row["drop"] < 0 and row["p"] == 1.0 and report.passed and row["n_gained"] > 0 and row["n_flipped"] == 0


def test_lower_is_better_metric_alerts_on_a_rise():
    """not_found_rate: more not-found queries is the drop; 20 queries lose their gold entirely."""
    found = [q for q, r in BASE.items() if not math.isnan(r)][:20]
    current = _frame({"bm25": _run(BASE | dict.fromkeys(found, math.nan))}, QRELS)
    report = regression_gate(current, BLESSED, ["bm25"], DriftSettings(metric="not_found_rate"))
    row = report.frame.iloc[0]
    assert row["after"] - row["before"] == pytest.approx(20 / N) and row["drop"] == pytest.approx(20 / N)
    assert row["alert"] and row["k"] == 1  # no cut-off: "in the top k" is rank 1


def test_disjoint_blessed_is_compared_on_the_intersection_and_counts_are_stated():
    current = BLESSED[BLESSED["query_id"] < "q040"]
    blessed = BLESSED[BLESSED["query_id"] >= "q010"]
    current = current.assign(**{"hit_rate@5": np.where(current["query_id"] < "q025", 0.0, current["hit_rate@5"])})
    report = regression_gate(current, blessed, ["bm25"], SETTINGS)
    row = report.frame.iloc[0]
    assert (row["n_common"], row["n_only_current"], row["n_only_blessed"]) == (30, 10, 20)
    common = BLESSED[(BLESSED["retriever"] == "bm25") & BLESSED["query_id"].between("q010", "q039")]
    assert row["before"] == pytest.approx(common["hit_rate@5"].mean())
    assert row["after"] == pytest.approx(common.loc[common["query_id"] >= "q025", "hit_rate@5"].sum() / 30)
    assert "Compared on 30 common queries (10 only in current, 20 only in blessed): bm25." in report.description


def test_few_common_queries_give_no_p_and_no_alert():
    current = BLESSED[BLESSED["query_id"] < "q004"].assign(**{"hit_rate@5": 0.0})
    report = regression_gate(current, BLESSED, ["bm25"], SETTINGS)
    row = report.frame.iloc[0]
    assert math.isnan(row["p"]) and not row["alert"] and report.passed
    assert row["note"] == "not enough queries for a test (n=4 < 6)" and row["status"] == "too few queries"


def test_new_retriever_and_missing_blessed_are_not_alerts():
    current = pd.concat([BLESSED, BLESSED[BLESSED["retriever"] == "bm25"].assign(retriever="fresh")], ignore_index=True)
    report = regression_gate(current, BLESSED, ["bm25", "fresh"], SETTINGS)
    fresh = report.frame.set_index("retriever").loc["fresh"]
    assert report.passed and fresh["status"] == "new" and fresh["note"] == "new: nothing to compare"
    assert fresh["n_only_current"] == N and math.isnan(fresh["p"])
    first = regression_gate(current, None, ["bm25"], SETTINGS)
    assert first.passed and first.frame.iloc[0]["note"] == "new: no blessed evaluation to compare with"


def test_holm_across_checked_retrievers():
    """Two retrievers with the same small drop: Holm doubles the smaller p (one-sided exact p = 1/32 each)."""
    moved = {q: 9.0 for q in [q for q, r in BASE.items() if r <= 5][:5]}
    current = _frame({"bm25": _run(BASE | moved), "dense": _run(BASE | moved)}, QRELS)
    report = regression_gate(current, BLESSED, ["bm25", "dense"], DriftSettings(min_drop=0.0))
    frame = report.frame
    bound = 4 * math.sqrt((1 / 32) * (31 / 32) / SETTINGS.n_permutations)
    assert all(abs(p - 1 / 32) <= bound for p in frame["p"])
    assert frame["p_holm"].max() == pytest.approx(max(2 * frame["p"].min(), frame["p"].max()))
    assert list(frame.columns) == list(REGRESSION_COLUMNS)


def test_metadata_is_plain():
    in_top5 = [q for q, r in BASE.items() if r <= 5][:18]
    current = _frame({"bm25": _run(BASE | dict.fromkeys(in_top5, 8.0)), "dense": _run(BASE)}, QRELS)
    current = pd.concat([current, current[current["retriever"] == "dense"].assign(retriever="fresh")], ignore_index=True)
    meta = regression_gate(current, BLESSED, ["bm25", "dense", "fresh"], SETTINGS).metadata()
    assert meta["passed"] == 0 and meta["alerting"] == "bm25" and meta["bm25_n_flipped"] == 18
    assert all(type(v) in (int, float, str) for v in meta.values())
    assert not any(isinstance(v, float) and math.isnan(v) for v in meta.values()) and "fresh_p" not in meta


def test_bad_input_names_the_frame():
    with pytest.raises(ValueError, match="blessed evaluation.*duplicate"):
        regression_gate(BLESSED, pd.concat([BLESSED, BLESSED.head(1)]), ["bm25"], SETTINGS)
    with pytest.raises(ValueError, match="current evaluation.*no rows for retrievers \\['ghost'\\]"):
        regression_gate(BLESSED, BLESSED, ["ghost"], SETTINGS)
    with pytest.raises(ValueError, match="current evaluation.*'recall@5'"):
        regression_gate(BLESSED.drop(columns="recall@5"), BLESSED, ["bm25"], DriftSettings(metric="recall@5"))
    with pytest.raises(ValueError, match="unknown metric"):
        regression_gate(BLESSED, BLESSED, ["bm25"], DriftSettings(metric="nope@5"))
