"""judged@k: hand-computed values, its names, and parity with ir_measures' Judged@k on graded qrels with ties and missing queries."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_pipeline import evaluate, parse_metric
from retrieval_pipeline.core.evaluation.exports.trec_writer import untie_scores

QRELS = {"q1": {"a": 2, "b": 0, "c": -1, "z": 1}, "q2": {"x": 1}, "q3": {"y": 1}}
RUN = {"q1": {"a": 0.9, "u": 0.8, "b": 0.7, "c": 0.6, "v": 0.5}, "q2": {"w": 0.4, "x": 0.4}}


def test_hand_computed() -> None:
    result = evaluate(QRELS, RUN, ["judged@2", "judged@4", "judged@10"])
    # q1 ranks a u b c v: judged a, b, c (grade -1 counts); q2 ranks x then w (ties: doc id descending); q3 is missing
    assert result.per_query["judged@2"] == {"q1": 0.5, "q2": 0.5, "q3": 0.0}
    assert result.per_query["judged@4"] == {"q1": 0.75, "q2": 0.5, "q3": 0.0}
    assert result.per_query["judged@10"] == {"q1": 0.6, "q2": 0.5, "q3": 0.0}  # divided by the 5 and 2 retrieved


@pytest.mark.parametrize("name", ["judged@10", "Judged@10", "judged_10", "JUDGED.10"])
def test_names(name: str) -> None:
    assert parse_metric(name).name == "judged@10"
    with pytest.raises(ValueError, match="needs a cut-off"):
        parse_metric("judged")


def _real_ish(seed: int) -> tuple[dict, dict]:
    """Graded qrels (-1..3) and a run with tied scores, short runs and queries missing from the run."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(60):
        docs = [f"d{i}" for i in rng.choice(300, size=40, replace=False)]
        qrels[f"q{q}"] = {d: int(g) for d, g in zip(docs[:12], rng.integers(-1, 4, size=12))}
        if q % 7 == 0:
            continue  # missing from the run
        length = int(rng.integers(1, 30))
        scores = np.round(rng.random(length), 1)  # many ties
        run[f"q{q}"] = dict(zip(rng.permutation(docs)[:length].tolist(), scores.tolist()))
    return qrels, run


@pytest.mark.parametrize("seed", [1, 2])
def test_parity_with_ir_measures(seed: int) -> None:
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = _real_ish(seed)
    ours = evaluate(qrels, run, ["judged@5", "judged@20"])
    # ir_measures breaks ties its own way (doc id ascending, float64): give it our ranking as untied scores
    ranked = {q: sorted(hits, key=lambda d: (np.float32(hits[d]), d), reverse=True) for q, hits in run.items()}
    untied = {q: dict(zip(docs, untie_scores(q, sorted((run[q][d] for d in docs), reverse=True)))) for q, docs in ranked.items()}
    assert any(len(set(h.values())) < len(h) for h in run.values())  # the data has ties
    for name, measure in (("judged@5", "Judged@5"), ("judged@20", "Judged@20")):
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.parse_measure(measure)], qrels, untied)}
        assert set(theirs) >= set(run) and set(ours.per_query[name]) == set(qrels)
        for query_id, value in ours.per_query[name].items():
            assert value == pytest.approx(theirs.get(query_id, 0.0), abs=1e-12), (name, query_id)
