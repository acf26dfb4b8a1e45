"""``benchmarks/finetune_select.py``'s fusion sweep: held-out anchors ranked by ``minmax_fuse([lexical, dense])``.

Weight 0 must rank as the dense scores alone, weight 1 as the lexical run alone, and a weight between them
can rescue an anchor that neither ranks first on its own, exactly as a ``kind: hybrid`` entry would.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from retrieval_pipeline.core.common.types import Document


@pytest.fixture(scope="module")
def select(load_benchmark) -> ModuleType:
    return load_benchmark("finetune_select.py")


IDS = ["a", "b", "c"]
# two anchors whose golds are "a" and "b"
HELD = [["first anchor", "a", "docstring"], ["second anchor", "b", "member"]]
DENSE = np.array([[0.2, 0.9, 0.1], [0.5, 0.4, 0.0]])  # dense ranks a 2nd for anchor 1 and b 2nd for anchor 2
LEXICAL = [[("a", 3.0), ("c", 2.0), ("b", 0.0)], [("c", 5.0), ("b", 4.0), ("a", 0.0)]]  # a 1st; b 2nd


def _row(rows: list[dict], weight: float) -> dict:
    return next(r for r in rows if r["lexical_weight"] == weight)


def test_the_end_weights_rank_as_each_run_alone_and_a_middle_one_fuses_them(select: ModuleType) -> None:
    rows = select.fusion_scores(DENSE, IDS, LEXICAL, HELD)
    assert [r["lexical_weight"] for r in rows] == list(select.FUSION_WEIGHTS)
    dense_only, lexical_only, half = _row(rows, 0.0), _row(rows, 1.0), _row(rows, 0.5)
    assert dense_only == {"lexical_weight": 0.0, "hit@1": 0.0, "hit@5": 1.0, "mrr": 0.5}
    assert lexical_only == {"lexical_weight": 1.0, "hit@1": 0.5, "hit@5": 1.0, "mrr": 0.75}
    # at 0.5: anchor 1 -> a: 0.5*1 + 0.5*0.125 = .5625 against b: 0 + 0.5 = .5 (a first);
    #         anchor 2 -> b: 0.5*0.8 + 0.5*0.8 = .8 against c: 0.5 + 0 = .5 and a: 0 + 0.5 = .5 (b first)
    assert half["hit@1"] == 1.0 and half["mrr"] == 1.0


def test_a_gold_outside_both_runs_counts_as_not_found(select: ModuleType) -> None:
    held = [["anchor", "d", "docstring"]]
    rows = select.fusion_scores(np.array([[0.3, 0.2, 0.1, 0.0]]), IDS + ["x"], [[("a", 1.0)]], held)
    assert all(r["mrr"] == 0.0 and r["hit@5"] == 0.0 for r in rows)


def test_the_weight_grid_is_every_vector_of_tenths_that_sums_to_one(select: ModuleType) -> None:
    two = select.weight_grid(2)
    assert two == [(round(0.1 * i, 10), round(1 - 0.1 * i, 10)) for i in range(11)]
    three = select.weight_grid(3)
    assert len(three) == 66 and len(set(three)) == 66  # C(12, 2) points of the 0.1 simplex
    assert all(abs(sum(v) - 1.0) < 1e-9 and min(v) >= 0 for v in three)
    assert (0.0, 0.0, 1.0) in three and (1.0, 0.0, 0.0) in three and (0.1, 0.3, 0.6) in three


def test_a_three_way_sweep_reduces_to_the_two_way_one_and_a_third_run_can_decide(select: ModuleType) -> None:
    two_way = select.fusion_scores(DENSE, IDS, LEXICAL, HELD)
    # a third retriever with weight 0 changes nothing: each (w, 0, 1 - w) row equals the two-way row at w
    silent = [[("c", 1.0)], [("a", 1.0)]]
    three = select.fusion_grid_scores(DENSE, IDS, [LEXICAL, silent], HELD)
    for row in two_way:
        w = row["lexical_weight"]
        match = next(r for r in three if r["weights"] == [w, 0.0, round(1 - w, 10)])
        assert {k: v for k, v in match.items() if k != "weights"} == {k: v for k, v in row.items() if k != "lexical_weight"}
    # the third run alone ranks each gold first: its corner scores 1.0, the lexical corner does not
    oracle = [[("a", 1.0), ("b", 0.0)], [("b", 1.0), ("c", 0.0)]]
    rows = select.fusion_grid_scores(DENSE, IDS, [LEXICAL, oracle], HELD)
    corner = next(r for r in rows if r["weights"] == [0.0, 1.0, 0.0])
    assert corner["mrr"] == 1.0 and next(r for r in rows if r["weights"] == [1.0, 0.0, 0.0])["mrr"] == 0.75


def _api(fqn: str) -> Document:
    name = fqn.rsplit(".", 1)[-1]
    return Document(fqn, f"{name}\n{fqn}", title=name, kind="class")


API = [_api("pkg.loop.LoopAgent"), _api("pkg.loop.LoopAgentConfig"), _api("pkg.run.Runner")]
API_IDS = [d.doc_id for d in API]


def test_code_lexical_over_the_model_ranks_a_named_identifier_first_and_is_split_by_naming(select: ModuleType) -> None:
    held = [
        ["Which parameter limits the iterations of a `LoopAgent`?", "pkg.loop.LoopAgent", "docstring"],  # names its gold
        ["The config for the YAML schema of a LoopAgent.", "pkg.loop.LoopAgentConfig", "docstring"],  # names another object
        ["Runs agents in a session.", "pkg.run.Runner", "docstring"],  # names nothing
    ]
    scores = np.array([[0.5, 0.6, 0.1], [0.5, 0.6, 0.1], [0.1, 0.2, 0.9]])  # the model ranks the golds 2nd, 1st, 1st
    row = select.code_lexical_over_scores(API, scores, API_IDS, held)
    assert row["anchors_naming_an_identifier"] == 2
    assert row["naming_an_identifier:model_alone_mrr"] == 0.75  # ranks 2 and 1
    assert row["naming_an_identifier:mrr"] == 0.75  # the named LoopAgent moves up (1st), and misleads the other (2nd)
    assert row["naming_an_identifier:hit@1"] == 0.5 and row["naming_an_identifier:model_alone_hit@1"] == 0.5
    assert row["naming_none:mrr"] == row["naming_none:model_alone_mrr"] == 1.0  # no identifier: the model's order
    assert (row["names_its_own_object"], row["names_other_objects_only"]) == (1, 1)


def test_named_what_tells_own_enclosing_and_other_objects_apart(select: ModuleType) -> None:
    held = [
        ["Returns the `run_async` result.", "pkg.run.Runner.run_async", "member"],
        ["A helper of `Runner`.", "pkg.run.Runner.helper", "member"],
        ["Builds a `LoopAgent`.", "pkg.run.make", "docstring"],
        ["No identifier here.", "pkg.run.Runner", "docstring"],
    ]
    assert select.named_what(held) == {"names_its_own_object": 1, "names_an_enclosing_object": 1, "names_other_objects_only": 1}
