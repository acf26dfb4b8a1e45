"""bpref, infAP, ERR@k and RBP(p): parity with pytrec_eval (bpref, infAP) and ir_measures (ERR@k via gdeval, RBP via
cwl_eval) per query, on graded qrels with negative grades, tied and float32-tied scores, short runs and queries missing
from the run; their names; and infAP = AP under complete judgements."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_pipeline import evaluate, parse_metric
from retrieval_pipeline.core.evaluation.exports.trec_writer import untie_scores


def _real_ish(seed: int, grades: tuple[int, int] = (-1, 4), n_queries: int = 80) -> tuple[dict, dict]:
    """Qrels graded in ``grades`` (negative: pooled but unjudged) and a run with ties, float32 near-ties and gaps."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(n_queries):
        docs = [f"d{i}" for i in rng.choice(400, size=60, replace=False)]
        qrels[str(q + 1)] = {d: int(g) for d, g in zip(docs[:15], rng.integers(*grades, size=15))}
        if q % 9 == 0:
            continue  # missing from the run: scores 0
        length = int(rng.integers(1, 50))
        scores = np.round(rng.random(length), 2)  # ties
        scores[: length // 4] += 1e-9  # ties in float32 only
        run[str(q + 1)] = dict(zip(rng.permutation(docs)[:length].tolist(), scores.tolist()))
    return qrels, run


def _untied(run: dict) -> dict:
    """The run re-scored so that every tool reads our (trec_eval's) ranking: strictly decreasing scores."""
    result = {}
    for query_id, hits in run.items():
        ranked = sorted(hits, key=lambda d: (np.float32(hits[d]), d), reverse=True)
        result[query_id] = dict(zip(ranked, untie_scores(query_id, [float(np.float32(hits[d])) for d in ranked])))
    return result


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_bpref_and_infap_equal_pytrec_eval_per_query(seed: int) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _real_ish(seed)
    assert any(g < 0 for j in qrels.values() for g in j.values()) and any(len(set(h.values())) < len(h) for h in run.values())
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"bpref", "infAP"}).evaluate(run)  # ranks ties as trec_eval does
    ours = evaluate(qrels, run, ["bpref", "infAP"]).per_query
    assert set(theirs) == set(run) and set(ours["bpref"]) == set(qrels)
    for query_id in qrels:
        expected = theirs.get(query_id, {"bpref": 0.0, "infAP": 0.0})  # pytrec_eval leaves missing queries out
        assert ours["bpref"][query_id] == pytest.approx(expected["bpref"], abs=1e-12), query_id
        assert ours["infap"][query_id] == pytest.approx(expected["infAP"], abs=1e-12), query_id


def test_infap_equals_ap_with_complete_judgements() -> None:
    qrels, run = _real_ish(6, grades=(0, 3))
    complete = {q: {d: qrels[q].get(d, 0) for d in hits} | qrels[q] for q, hits in run.items()}
    complete |= {q: judged for q, judged in qrels.items() if q not in run}
    result = evaluate(complete, run, ["infAP", "map"]).per_query
    assert any(v > 0 for v in result["map"].values())
    for query_id, ap in result["map"].items():
        assert result["infap"][query_id] == pytest.approx(ap, abs=1e-4)  # trec_eval's epsilon of 1e-5 shifts it slightly


@pytest.mark.parametrize("seed", [7, 8])
def test_err_equals_ir_measures_gdeval(seed: int) -> None:
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = _real_ish(seed, grades=(0, 5))
    untied = _untied(run)
    for cutoff in (5, 20):
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.parse_measure(f"ERR@{cutoff}")], qrels, untied)}
        ours = evaluate(qrels, run, [f"ERR@{cutoff}"]).per_query[f"err@{cutoff}"]
        assert len(theirs) > 50 and any(v > 0 for v in theirs.values())
        for query_id, value in ours.items():
            assert value == pytest.approx(theirs.get(query_id, 0.0), abs=5.1e-6), (
                cutoff,
                query_id,
            )  # gdeval prints 5 decimals, half rounded up


def test_err_refuses_grades_beyond_gdevals_scale() -> None:
    with pytest.raises(ValueError, match="grades up to 4"):
        evaluate({"q": {"d": 5}}, {"q": {"d": 1.0}}, ["err@10"])


@pytest.mark.parametrize("p", [0.5, 0.8, 0.95])
def test_rbp_equals_ir_measures_cwl_eval(p: float) -> None:
    ir_measures = pytest.importorskip("ir_measures")
    pytest.importorskip("cwl", reason="cwl-eval is not installed: pip install -e '.[peers]'")
    qrels, run = _real_ish(9)
    measure = ir_measures.parse_measure(f"RBP(p={p},rel=1)")
    theirs = {m.query_id: float(m.value) for m in ir_measures.iter_calc([measure], qrels, _untied(run))}
    ours = evaluate(qrels, run, [f"RBP(p={p})"]).per_query[f"rbp(p={p})"]
    assert any(v > 0 for v in theirs.values())
    for query_id, value in ours.items():
        assert value == pytest.approx(theirs.get(query_id, 0.0), abs=1e-12), query_id


@pytest.mark.parametrize(
    ("name", "canonical", "trec_eval"),
    [
        ("bpref", "bpref", "bpref"), ("BPREF", "bpref", "bpref"), ("infAP", "infap", "infAP"), ("inf_ap", "infap", "infAP"),
        ("ERR@10", "err@10", None), ("err_20", "err@20", None), ("RBP(p=0.8)", "rbp(p=0.8)", None), ("RBP", "rbp(p=0.8)", None),
        ("rbp(p=0.95)", "rbp(p=0.95)", None),
    ],
)  # fmt: skip
def test_names(name: str, canonical: str, trec_eval: str | None) -> None:
    parsed = parse_metric(name)
    assert (parsed.name, parsed.trec_eval_measure) == (canonical, trec_eval)


@pytest.mark.parametrize(
    ("name", "message"),
    [("bpref@10", "takes no cut-off"), ("err", "needs a cut-off"), ("RBP(p=1.5)", "in \\(0, 1\\)"), ("rbp@10", "persistence")],
)
def test_bad_names(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_metric(name)
