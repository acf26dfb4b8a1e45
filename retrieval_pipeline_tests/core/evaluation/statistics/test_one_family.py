"""One story in the statistics: a pair of runs has ONE p-value and ONE Holm family everywhere.

The significance table (the ▲/▼ marks of the report, the console and the UI), the all-pairs table (``retriever_pairs``,
the report's "every retriever against every other") and ``retrieval_pipeline.compare`` seed a pair's randomisation
test with ``stats.pair_seed`` alone and correct it in the all-pairs family. Before, the significance table seeded
``(metric, retriever, baseline)`` and the all-pairs table ``(metric, later, earlier)``: with the baseline listed
after the other retriever the same pair got two p-values (p = 0.003 in the report, 0.0018 from ``compare()``), and
▲ (Holm over the pairs with the baseline) could sit beside "indistinguishable" (Holm over all pairs).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from retrieval_pipeline.api import compare
from retrieval_pipeline.core.evaluation.exports.trec_writer import write_trec_qrels, write_trec_run
from retrieval_pipeline.core.evaluation.statistics import stats
from retrieval_pipeline.core.evaluation.statistics.pairwise import PairwiseSettings, compare_all
from retrieval_pipeline.core.evaluation.statistics.significance import significance_table, wide_values
from retrieval_pipeline_tests.core.evaluation.statistics.test_stats import SETTINGS, _query_results, _synthetic

METRICS = ["hit_rate@5", "mrr", "ndcg@10"]
#: The baseline (a) is listed after another run: the order in which the old seeds disagreed.
ORDER = ["b", "a", "c"]


@pytest.fixture(scope="module")
def synthetic():
    qrels, runs = _synthetic()
    return qrels, runs, _query_results(qrels, runs)


def test_pair_seed_does_not_depend_on_the_order_of_the_pair():
    assert stats.pair_seed(13, "mrr", "bm25", "dense") == stats.pair_seed(13, "mrr", "dense", "bm25")
    assert stats.pair_seed(13, "mrr", "bm25", "dense") != stats.pair_seed(13, "ndcg@10", "bm25", "dense")


def test_significance_table_all_pairs_and_compare_give_a_pair_one_p_and_one_verdict(synthetic, tmp_path: Path):
    qrels, runs, frame = synthetic
    table = significance_table(frame, ORDER, "a", SETTINGS, metrics=METRICS).set_index(["metric", "retriever"])
    settings = PairwiseSettings.of(SETTINGS)
    pairs = compare_all({m: wide_values(frame, m, ORDER) for m in METRICS}, settings).pairs
    write_trec_qrels(qrels, tmp_path / "qrels.txt")
    paths = []
    for name in ORDER:
        write_trec_run(runs[name], tmp_path / f"{name}.run", tag=name)
        paths.append(tmp_path / f"{name}.run")
    api = compare(tmp_path / "qrels.txt", paths, METRICS, n_permutations=SETTINGS.n_permutations, seed=SETTINGS.seed)
    checked = 0
    for row in pairs.itertuples():
        if "a" not in (row.a, row.b):
            continue
        other = row.b if row.a == "a" else row.a
        ours = table.loc[(row.metric, other)]
        assert ours["p_randomisation"] == row.p  # the same seed, the same sign flips: equal, not close
        assert ours["p_randomisation_holm"] == pytest.approx(row.p_holm, abs=1e-12)  # the same family
        assert isinstance(ours["direction"], str) == bool(row.significant)  # ▲/▼ exactly where the pair is significant
        assert api.pair(row.metric, other, "a").p == row.p  # and compare() on the TREC files says the same
        checked += 1
    assert checked == 2 * len(METRICS)
    assert pd.Series([p for p in pairs["p"]]).notna().all()
