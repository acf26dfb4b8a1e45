"""The regression gate, checked to the character: the exact report text, rows, metadata and errors.

Written against the mutants ``benchmarks/mutation.py`` found alive in :mod:`retrieval_pipeline.core.evaluation.checks.regression`.
Every frame here is built by hand from gold ranks, so hit_rate@5 (1 when the rank is <= 5),
the means, the drops and the flipped queries are known without running the gate. p-values are either
exact by construction (no difference at all: p = 1; 30 drops and no gain: p = 2**-30, which 10,000
sign-flip draws estimate as 0) or recomputed with the documented test and seed.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.evaluation.checks.regression import DriftSettings, regression_gate
from retrieval_pipeline.core.evaluation.statistics.stats import derive_seed, randomisation_test

SETTINGS = DriftSettings()  # hit_rate@5, alpha 0.05, min_drop 0.05, 10,000 permutations, seed 13
N = 40
IDS = [f"q{i:02d}" for i in range(N)]


def _rows(retriever: str, ranks: dict[str, float]) -> pd.DataFrame:
    """Per-query rows of one retriever: hit_rate@5, mrr, found and first_relevant_rank from the gold ranks."""
    values = list(ranks.values())
    return pd.DataFrame(
        {
            "retriever": retriever,
            "query_id": list(ranks),
            "hit_rate@5": [1.0 if r <= 5 else 0.0 for r in values],  # NaN <= 5 is False: not found
            "mrr": [0.0 if math.isnan(r) else 1.0 / r for r in values],
            "found": [not math.isnan(r) for r in values],
            "first_relevant_rank": values,
        }
    )


def _frame(*parts: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True)


ALL_AT_1 = dict.fromkeys(IDS, 1.0)
# bm25 loses q00..q29 from the top 5: even ones leave the run, odd ones drop to rank 7
BM25_NOW = {q: (math.nan if i % 2 == 0 else 7.0) if i < 30 else 1.0 for i, q in enumerate(IDS)}
BLESSED = _frame(
    _rows("bm25", ALL_AT_1),
    _rows("dense", {q: 1.0 for q in IDS[:38]}),  # dense: q38, q39 only in current
    _rows("sparse", ALL_AT_1),
)
# the current frame lists queries last to first: flipped queries are reported in the current frame's order
CURRENT = _frame(
    _rows("fresh", ALL_AT_1),
    _rows("bm25", dict(reversed(BM25_NOW.items()))),
    _rows("dense", ALL_AT_1),
    _rows("sparse", {q: 1.0 for q in IDS[:39]}),  # sparse: q39 only in blessed
)
RETRIEVERS = ["fresh", "bm25", "dense", "sparse"]


@pytest.fixture
def report():  # per test, not per module: mutmut maps each mutant to the tests that call the gate themselves
    return regression_gate(CURRENT, BLESSED, RETRIEVERS, SETTINGS)


def test_the_description_is_exactly_the_documented_paragraph(report):
    flipped = [f"q{i:02d}" for i in range(29, -1, -1)]  # current order: q29 first
    named = ", ".join(f"{q} (1 -> {'not found' if int(q[1:]) % 2 == 0 else 7})" for q in flipped[:10])
    expected = (
        "hit_rate@5 against the blessed evaluation (one-sided paired randomisation test, Holm across 3 tested retrievers; "
        "alert when Holm p <= 0.05 and drop >= 0.05): REGRESSION for "
        f"bm25 1.000 -> 0.250 (drop 0.750, p < 0.0001, Holm p < 0.0001, 40 common queries; lost from the top 5: {named} and 20 more; 0 gained)."
        " Others: fresh: new: nothing to compare; dense 1.000 -> 1.000 (Holm p 1.0000; drop not significant);"
        " sparse 1.000 -> 1.000 (Holm p 1.0000; drop not significant)."
        " Compared on 38 common queries (2 only in current, 0 only in blessed): dense."
        " Compared on 39 common queries (0 only in current, 1 only in blessed): sparse."
    )
    assert report.description == expected


def test_rows_hold_the_hand_computed_figures(report):
    frame = report.frame.set_index("retriever")
    bm25 = frame.loc["bm25"]
    assert (bm25["status"], bm25["n_common"], bm25["n_only_current"], bm25["n_only_blessed"], bm25["n_paired"]) == ("checked", 40, 0, 0, 40)
    assert (bm25["before"], bm25["after"], bm25["drop"], bm25["p"], bm25["p_holm"]) == (1.0, 0.25, 0.75, 0.0, 0.0)
    assert (bm25["k"], bm25["n_flipped"], bm25["n_gained"], bm25["note"]) == (5, 30, 0, "")
    assert bool(bm25["significant"]) and bool(bm25["practical"]) and bool(bm25["alert"])
    for name, counts in {"dense": (38, 2, 0), "sparse": (39, 0, 1)}.items():
        row = frame.loc[name]
        assert (row["n_common"], row["n_only_current"], row["n_only_blessed"], row["n_paired"]) == (*counts, counts[0])
        assert (row["drop"], row["p"], row["p_holm"], row["n_flipped"], row["n_gained"]) == (0.0, 1.0, 1.0, 0, 0)
        assert not row["significant"] and not row["practical"] and not row["alert"]
    assert report.alerting == ["bm25"] and not report.passed and report.settings == SETTINGS and report.metric == "hit_rate@5"


def test_a_new_retriever_row_is_complete(report):
    fresh = report.frame.set_index("retriever").loc["fresh"].to_dict()
    for figure in ("before", "after", "drop", "p", "p_holm"):
        assert math.isnan(fresh.pop(figure)), figure
    assert fresh == {
        "status": "new",
        "n_common": 0,
        "n_only_current": 40,
        "n_only_blessed": 0,
        "n_paired": 0,
        "significant": False,
        "practical": False,
        "alert": False,
        "k": 5,
        "n_flipped": 0,
        "n_gained": 0,
        "note": "new: nothing to compare",
    }


def test_flipped_frame_has_a_fresh_index_and_the_current_order(report):
    flipped = report.flipped
    assert flipped["query_id"].tolist() == [f"q{i:02d}" for i in range(29, -1, -1)]
    assert flipped.index.equals(pd.RangeIndex(30))
    two = regression_gate(
        _frame(_rows("a", BM25_NOW), _rows("b", BM25_NOW)), _frame(_rows("a", ALL_AT_1), _rows("b", ALL_AT_1)), ["a", "b"], SETTINGS
    )
    assert two.flipped.index.equals(pd.RangeIndex(60)) and two.flipped["retriever"].tolist() == ["a"] * 30 + ["b"] * 30


def test_metadata_lists_every_figure_by_retriever(report):
    meta = report.metadata()
    assert {k: meta[k] for k in ("rule", "metric", "alpha", "min_drop", "passed", "n_alerts", "alerting")} == {
        "rule": "significance",
        "metric": "hit_rate@5",
        "alpha": 0.05,
        "min_drop": 0.05,
        "passed": 0,
        "n_alerts": 1,
        "alerting": "bm25",
    }
    assert {k.removeprefix("bm25_"): v for k, v in meta.items() if k.startswith("bm25_")} == {
        "n_common": 40,
        "n_only_current": 0,
        "n_only_blessed": 0,
        "before": 1.0,
        "after": 0.25,
        "drop": 0.75,
        "p": 0.0,
        "p_holm": 0.0,
        "alert": 1,
        "n_flipped": 30,
        "n_gained": 0,
        "status": "checked",
    }
    assert {k for k in meta if k.startswith("fresh_")} == {
        f"fresh_{k}" for k in ("n_common", "n_only_current", "n_only_blessed", "alert", "n_flipped", "n_gained", "status")
    }


def test_two_alerts_are_joined_in_the_metadata():
    current = _frame(_rows("a", BM25_NOW), _rows("b", BM25_NOW))
    report = regression_gate(current, _frame(_rows("a", ALL_AT_1), _rows("b", ALL_AT_1)), ["a", "b"], SETTINGS)
    meta = report.metadata()
    assert meta["alerting"] == "a, b" and meta["n_alerts"] == 2
    assert "20 more; 0 gained); b 1.000 -> 0.250 (drop 0.750" in report.description  # the alerts joined by "; "


def test_no_regression_text_groups_retrievers_with_the_same_counts():
    blessed = _frame(_rows("bm25", ALL_AT_1), _rows("few", ALL_AT_1), _rows("few2", ALL_AT_1))
    three = {q: 1.0 for q in IDS[:3]}
    current = _frame(_rows("bm25", ALL_AT_1), _rows("few", three), _rows("few2", three))
    report = regression_gate(current, blessed, ["bm25", "few", "few2"], SETTINGS)
    assert report.description == (
        "hit_rate@5 against the blessed evaluation (one-sided paired randomisation test, Holm across 1 tested retrievers; "
        "alert when Holm p <= 0.05 and drop >= 0.05): no regression."
        " Checked: bm25 1.000 -> 1.000 (Holm p 1.0000; drop not significant);"
        " few: not enough queries for a test (n=3 < 6); few2: not enough queries for a test (n=3 < 6)."
        " Compared on 3 common queries (0 only in current, 37 only in blessed): few, few2."
    )


def test_exactly_ten_flipped_are_all_named_with_no_more():
    now = {q: (7.0 if i < 10 else 1.0) for i, q in enumerate(IDS)}
    report = regression_gate(_rows("bm25", now), _rows("bm25", ALL_AT_1), ["bm25"], SETTINGS)
    named = ", ".join(f"q{i:02d} (1 -> 7)" for i in range(10))
    assert f"lost from the top 5: {named}; 0 gained)." in report.description and " more" not in report.description


def test_a_few_flipped_are_named_without_a_tail():
    now = {q: (7.0 if i < 3 else 1.0) for i, q in enumerate(IDS)}
    report = regression_gate(_rows("bm25", now), _rows("bm25", ALL_AT_1), ["bm25"], DriftSettings(alpha=0.4, min_drop=0.0))  # exact p 1/8
    assert "lost from the top 5: q00 (1 -> 7), q01 (1 -> 7), q02 (1 -> 7); 0 gained)" in report.description


def test_an_alert_with_nothing_lost_from_the_top_k_says_so():
    """mrr: every gold moves from rank 2 to rank 5 (rr 0.5 -> 0.2); none was at rank 1, so none left the top 1."""
    report = regression_gate(
        _rows("bm25", dict.fromkeys(IDS, 5.0)), _rows("bm25", dict.fromkeys(IDS, 2.0)), ["bm25"], DriftSettings(metric="mrr")
    )
    row = report.frame.iloc[0]
    assert row["alert"] and row["drop"] == pytest.approx(0.3) and row["k"] == 1
    assert "(drop 0.300, p < 0.0001, Holm p < 0.0001, 40 common queries; none lost from the top 1; 0 gained)" in report.description


def _mixed() -> tuple[pd.DataFrame, pd.DataFrame, list[float], list[float]]:
    """12 queries, 5 lose their hit and 2 gain one; current rows in reverse order. Returns the paired values in that order."""
    old = {q: 1.0 if i < 10 else 9.0 for i, q in enumerate(IDS[:12])}
    new = {q: 7.0 if i < 5 else (1.0 if i >= 10 else r) for i, (q, r) in enumerate(old.items())}
    order = list(reversed(list(new)))
    before = [1.0 if old[q] <= 5 else 0.0 for q in order]
    after = [1.0 if new[q] <= 5 else 0.0 for q in order]
    return _rows("bm25", {q: new[q] for q in order}), _rows("bm25", old), before, after


def test_p_is_the_one_sided_test_with_the_derived_seed_in_current_order():
    current, blessed, before, after = _mixed()
    current = _frame(_rows("bm25", {"zz": 1.0}), current)  # a query the blessed evaluation lacks is left out of the pairing
    report = regression_gate(current, blessed, ["bm25"], SETTINGS)
    seed = derive_seed(SETTINGS.seed, "regression", "hit_rate@5", "bm25")
    expected = randomisation_test(np.array(before), np.array(after), SETTINGS.n_permutations, seed, "greater")
    row = report.frame.iloc[0]
    assert row["p"] == expected and 0.0 < expected < 1.0
    assert (row["before"], row["after"], row["drop"], row["n_gained"], row["n_flipped"]) == (10 / 12, 7 / 12, pytest.approx(3 / 12), 2, 5)
    assert (row["n_paired"], row["n_only_current"]) == (12, 1)


def test_significance_and_practicality_include_their_bounds():
    current, blessed, _, _ = _mixed()
    p = regression_gate(current, blessed, ["bm25"], SETTINGS).frame.iloc[0]["p"]
    at_bounds = DriftSettings(alpha=p, min_drop=0.25)  # drop is 10/12 - 7/12 = 0.25 exactly in binary
    report = regression_gate(current, blessed, ["bm25"], at_bounds)
    row = report.frame.iloc[0]
    assert report.settings == at_bounds and row["drop"] == 0.25 and row["p_holm"] == p
    assert row["significant"] and row["practical"] and row["alert"]


def test_six_paired_queries_are_enough_for_a_test():
    six = {q: 1.0 for q in IDS[:6]}
    row = regression_gate(_rows("bm25", six), _rows("bm25", six), ["bm25"], SETTINGS).frame.iloc[0]
    assert row["status"] == "checked" and row["p"] == 1.0 and row["note"] == ""


def test_a_new_retriever_does_not_stop_the_others_being_checked():
    current = _frame(_rows("fresh", ALL_AT_1), _rows("bm25", BM25_NOW))
    report = regression_gate(current, _rows("bm25", ALL_AT_1), ["fresh", "bm25"], SETTINGS)
    assert report.frame["status"].tolist() == ["new", "checked"] and report.alerting == ["bm25"]


def _message(label: str, rest: str) -> str:
    return "^" + re.escape(f"query_results of the {label} evaluation: {rest}")


def test_errors_name_the_frame_exactly():
    good = _rows("bm25", ALL_AT_1)
    with pytest.raises(ValueError, match=_message("current", "no rows for retrievers ['ghost']")):
        regression_gate(good, good, ["ghost"], SETTINGS)
    with pytest.raises(ValueError, match=_message("blessed", "1 duplicate (retriever, query_id) rows")):
        regression_gate(good, _frame(good, good.head(1)), ["bm25"], SETTINGS)
    with pytest.raises(ValueError, match=_message("current", "no per-query column 'mrr' for the drift metric 'mrr'")):
        regression_gate(good.drop(columns="mrr"), good, ["bm25"], DriftSettings(metric="mrr"))
    with pytest.raises(ValueError, match=_message("blessed", "no per-query column 'mrr' for the drift metric 'mrr'")):
        regression_gate(good, good.drop(columns="mrr"), ["bm25"], DriftSettings(metric="mrr"))
    for label, current, blessed in (
        ("current", good.drop(columns="first_relevant_rank"), good),
        ("blessed", good, good.drop(columns="first_relevant_rank")),
    ):
        with pytest.raises(ValueError, match=_message(label, "no column 'first_relevant_rank' (needed to list flipped queries)")):
            regression_gate(current, blessed, ["bm25"], SETTINGS)
    words = good.assign(**{"hit_rate@5": "high"})
    for label, current, blessed in (("current", words, good), ("blessed", good, words)):
        with pytest.raises(ValueError, match=_message(label, "column 'hit_rate@5' does not hold numbers")):
            regression_gate(current, blessed, ["bm25"], SETTINGS)
