"""TREC run/qrels files: round trips, validation, tie handling, and parity with ranx and pytrec_eval.

The key test writes a random graded run *with tied scores* and checks that ranx (reading our files with
its own TREC reader) and pytrec_eval (``parse_run``/``parse_qrel`` on the file handles) score it exactly as
:func:`per_query_metrics` scores the in-memory run in list order. A control shows that, without our tie
handling, trec_eval's doc-id tie-break would have scored a different ranking.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Qrels, Run
from retrieval_pipeline.core.evaluation.exports.trec import read_trec_qrels, read_trec_run
from retrieval_pipeline.core.evaluation.exports.trec_writer import untie_scores, write_trec_qrels, write_trec_run
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics

TOLERANCE = 1e-9

RUN: Run = {
    "q1": [("d3", 12.5), ("d1", 0.30000000000000004), ("d2", -1e-07)],
    "q2": [("a", 1.0), ("b", 0.5)],
}
QRELS: Qrels = {"q1": {"d1": 2, "d9": 0}, "q2": {"b": 3}}


# --------------------------------------------------------------------------------------------------
# Round trips and file layout
# --------------------------------------------------------------------------------------------------


def test_run_round_trip_is_exact_and_lines_are_trec(tmp_path: Path) -> None:
    path = write_trec_run(RUN, tmp_path / "out" / "run.trec", tag="bm25")
    assert read_trec_run(path) == RUN
    lines = path.read_text().splitlines()
    assert lines[0] == "q1 Q0 d3 1 12.5 bm25"
    assert lines[2] == "q1 Q0 d2 3 -1e-07 bm25"
    assert [line.split()[3] for line in lines] == ["1", "2", "3", "1", "2"]


def test_qrels_round_trip_is_exact(tmp_path: Path) -> None:
    path = write_trec_qrels(QRELS, tmp_path / "qrels.txt")
    assert read_trec_qrels(path) == QRELS
    assert path.read_text().splitlines() == ["q1 0 d1 2", "q1 0 d9 0", "q2 0 b 3"]


def test_empty_hit_lists_and_empty_judgements_write_nothing(tmp_path: Path) -> None:
    run_path = write_trec_run({"q1": [], "q2": [("a", 1.0)]}, tmp_path / "run", tag="t")
    qrels_path = write_trec_qrels({"q1": {}, "q2": {"a": 1}}, tmp_path / "qrels")
    assert read_trec_run(run_path) == {"q2": [("a", 1.0)]}
    assert read_trec_qrels(qrels_path) == {"q2": {"a": 1}}


def test_ties_are_written_strictly_decreasing_and_read_back_in_our_order(tmp_path: Path) -> None:
    run: Run = {"q": [("a", 1.0), ("c", 1.0), ("b", 1.0), ("z", 0.0), ("y", 0.0), ("x", -2.0)]}
    back = read_trec_run(write_trec_run(run, tmp_path / "run", tag="t"))
    assert [doc for doc, _ in back["q"]] == ["a", "c", "b", "z", "y", "x"]
    scores = [score for _, score in back["q"]]
    assert all(high > low for high, low in zip(scores, scores[1:]))
    assert all(abs(new - old) < 1e-6 for new, (_, old) in zip(scores, run["q"]))
    assert (scores[0], scores[3], scores[5]) == (1.0, 0.0, -2.0)  # the first of each tie block is unchanged


# --------------------------------------------------------------------------------------------------
# untie_scores
# --------------------------------------------------------------------------------------------------


def test_untie_keeps_strictly_decreasing_scores_bit_identical() -> None:
    scores = [3.5, 2.0, 0.1 + 0.2, 1e-300, -4.0]
    assert untie_scores("q", scores) == scores


def next_float32_below(value: float) -> float:
    return float(np.nextafter(np.float32(value), np.float32(-np.inf)))


def test_untie_steps_one_float32_below_the_score_above() -> None:
    step = next_float32_below(1.0)
    written = untie_scores("q", [1.0, 1.0, 1.0, 0.5])
    assert written == [1.0, step, next_float32_below(step), 0.5]


def test_untie_separates_scores_that_only_differ_past_float32() -> None:
    """trec_eval stores scores as C float: 0.5 and 0.5 - 1e-9 would tie there."""
    written = untie_scores("q", [0.5, 0.5 - 1e-9, 0.25 + 1e-12, 0.25])
    assert written == [0.5, next_float32_below(0.5), 0.25 + 1e-12, next_float32_below(0.25 + 1e-12)]
    as_float32 = [np.float32(score) for score in written]
    assert all(high > low for high, low in zip(as_float32, as_float32[1:]))
    assert untie_scores("q", []) == []


def test_untie_accepts_numpy_and_int_scores() -> None:
    assert untie_scores("q", [np.float32(2.0), 1, np.float64(0.5)]) == [2.0, 1.0, 0.5]


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([1.0, 2.0], "score 2.0 at rank 2 is higher than 1.0"),
        ([1.0, math.nan], "score nan at rank 2 is not finite"),
        ([math.inf], "score inf at rank 1 is not finite"),
        ([1.0, "high"], "score 'high' at rank 2 is not a number"),
        ([1e39], "beyond float32 range"),
    ],
)
def test_untie_rejects_unsorted_and_non_finite_scores(scores: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        untie_scores("q7", scores)


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "tag", "message"),
    [
        ({"my query": [("d", 1.0)]}, "t", "query id 'my query' contains whitespace"),
        ({"q": [("doc\t1", 1.0)]}, "t", r"doc id \(query 'q'\) 'doc\\t1' contains whitespace"),
        ({"": [("d", 1.0)]}, "t", "query id '' must be a non-empty string"),
        ({"q": [("d", 1.0)]}, "my run", "run tag 'my run' contains whitespace"),
        ({"q": [("d", 1.0), ("d", 0.5)]}, "t", "lists the same doc id more than once"),
    ],
)
def test_write_run_rejects_bad_ids(tmp_path: Path, run: Run, tag: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_trec_run(run, tmp_path / "run", tag=tag)
    assert not (tmp_path / "run").exists()
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ({"q 1": {"d": 1}}, "query id 'q 1' contains whitespace"),
        ({"q": {"d\n": 1}}, "contains whitespace"),
        ({"q": {"d": 1.0}}, "grade 1.0 for query 'q', doc 'd' must be an int"),
        ({"q": {"d": True}}, "grade True"),
    ],
)
def test_write_qrels_rejects_bad_ids_and_grades(tmp_path: Path, qrels: Qrels, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_trec_qrels(qrels, tmp_path / "qrels")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q Q0 d 1 1.0 t\nq Q0 e 2 0.5\n", "line 2: expected 6 fields"),
        ("q Q0 d first 1.0 t\n", "line 1: rank 'first' is not an integer"),
        ("q Q0 d 1 high t\n", "line 1: score 'high' is not a number"),
        ("q Q0 d 1 nan t\n", "line 1: score 'nan' is not finite"),
        ("q Q0 d 1 1.0 t\n\nq Q0 d 2 0.5 t\n", "line 3: doc id 'd' appears twice for query 'q'"),
    ],
)
def test_read_run_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "run.trec"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        read_trec_run(path)
    assert caught.value.path == str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q 0 d 1 x\n", "line 1: expected 4 or 3 fields"),
        ("q d\n", "line 1: expected 4 or 3 fields"),
        ("q 0 d 1\nq 0 e x\n", "line 2: grade 'x' is not an integer"),
        ("q 0 d 1\nq 0 d 2\n", "line 2: doc id 'd' appears twice"),
    ],
)
def test_read_qrels_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_trec_qrels(path)


def test_read_foreign_run_ranks_like_trec_eval(tmp_path: Path) -> None:
    """Rank column ignored; by score, ties by doc id descending."""
    path = tmp_path / "foreign.trec"
    path.write_text("q Q0 a 1 1.0 x\nq Q0 c 2 1.0 x\nq Q0 b 3 2.0 x\n")
    assert read_trec_run(path) == {"q": [("b", 2.0), ("c", 1.0), ("a", 1.0)]}


# --------------------------------------------------------------------------------------------------
# Parity with reference tools reading our files unchanged
# --------------------------------------------------------------------------------------------------


def random_graded_example(seed: int = 7) -> tuple[Run, Qrels]:
    """Graded qrels (0..3) and a best-first run whose scores tie often (rounded to one decimal).

    Within each tie block the list order is random, so it is usually not trec_eval's doc-id order.
    Query ``tie_trap`` is built so that trec_eval's tie-break would move its only relevant doc from
    rank 1 to rank 3; ``float32_trap`` does the same with scores that differ only past float32. Every
    qrels query has at least one relevant doc and appears in the run.
    """
    rng = random.Random(seed)
    run: Run = {
        "tie_trap": [("d1", 0.5), ("d2", 0.5), ("d3", 0.5), ("d0", 0.0)],
        "float32_trap": [("e1", 0.5), ("e2", 0.5 - 1e-9), ("e3", 0.5 - 2e-9)],
    }
    qrels: Qrels = {"tie_trap": {"d1": 3, "d0": 0}, "float32_trap": {"e1": 2}}
    for q in range(30):
        pool = [f"doc{n:03d}" for n in rng.sample(range(200), 40)]
        judged = rng.sample(pool, 12)
        qrels[f"q{q}"] = {doc: rng.randint(0, 3) for doc in judged} | {judged[0]: rng.randint(1, 3)}
        scored = [(doc, round(rng.uniform(0.0, 1.0), 1)) for doc in rng.sample(pool, 25)]
        rng.shuffle(scored)
        run[f"q{q}"] = sorted(scored, key=lambda hit: hit[1], reverse=True)  # stable: ties stay shuffled
    return run, qrels


Example = tuple[Run, Qrels, Path, Path]


@pytest.fixture(scope="module")
def written_example(tmp_path_factory: pytest.TempPathFactory) -> Example:
    run, qrels = random_graded_example()
    folder = tmp_path_factory.mktemp("trec")
    run_path = write_trec_run(run, folder / "run.trec", tag="ours")
    return run, qrels, run_path, write_trec_qrels(qrels, folder / "qrels.trec")


def ours_per_query(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """per_query_metrics on the in-memory run (list order), keyed like the references."""
    frame = per_query_metrics(run, qrels, ks=(5,), ndcg_k=10).set_index("query_id")
    return {metric: frame[metric].astype(float).to_dict() for metric in ("ndcg@10", "recall@5", "mrr")}


def pytrec_eval_per_query(run: dict[str, dict[str, float]], qrels: Qrels) -> dict[str, dict[str, float]]:
    """pytrec_eval per query, renamed to our metric names."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    names = {"ndcg_cut_10": "ndcg@10", "recall_5": "recall@5", "recip_rank": "mrr"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.5", "recip_rank"})
    by_query = evaluator.evaluate(run)
    return {ours: {q: values[theirs] for q, values in by_query.items()} for theirs, ours in names.items()}


def assert_close(left: dict[str, dict[str, float]], right: dict[str, dict[str, float]]) -> None:
    assert left.keys() == right.keys()
    for metric in left:
        assert left[metric].keys() == right[metric].keys(), metric
        for query_id, value in left[metric].items():
            assert value == pytest.approx(right[metric][query_id], abs=TOLERANCE), (metric, query_id)


def test_example_really_has_ties_in_a_non_trec_eval_order() -> None:
    run, _ = random_graded_example()
    tie_blocks = 0
    for hits in run.values():
        for (doc_a, score_a), (doc_b, score_b) in zip(hits, hits[1:]):
            tie_blocks += score_a == score_b and doc_a < doc_b  # trec_eval would swap this pair
    assert tie_blocks > 50


def test_files_match_per_query_metrics_through_pytrec_eval_parsers(written_example: Example) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run, qrels, run_path, qrels_path = written_example
    with run_path.open() as run_file, qrels_path.open() as qrels_file:
        file_run, file_qrels = pytrec_eval.parse_run(run_file), pytrec_eval.parse_qrel(qrels_file)
    assert file_qrels == qrels
    assert {query_id: dict(hits) for query_id, hits in read_trec_run(run_path).items()} == file_run
    assert_close(pytrec_eval_per_query(file_run, file_qrels), ours_per_query(run, qrels))


def test_files_match_per_query_metrics_through_ranx_readers(written_example: Example) -> None:
    ranx = pytest.importorskip("ranx")
    run, qrels, run_path, qrels_path = written_example
    ranx_run = ranx.Run.from_file(str(run_path), kind="trec")
    ranx_qrels = ranx.Qrels.from_file(str(qrels_path), kind="trec")
    metrics = ["ndcg@10", "recall@5", "mrr"]
    means = ranx.evaluate(ranx_qrels, ranx_run, metrics, threads=1)  # per query results land in ranx_run.scores
    theirs = {metric: {q: float(v) for q, v in ranx_run.scores[metric].items()} for metric in metrics}
    ours = ours_per_query(run, qrels)
    assert_close(theirs, ours)
    for metric in metrics:
        assert means[metric] == pytest.approx(sum(ours[metric].values()) / len(qrels), abs=TOLERANCE)


def test_control_without_untying_trec_eval_scores_a_different_ranking() -> None:
    """The raw tied scores, handed to pytrec_eval directly, are re-sorted by doc id and disagree with us."""
    run, qrels = random_graded_example()
    raw = {q: dict(hits) for q, hits in run.items()}
    theirs, ours = pytrec_eval_per_query(raw, qrels), ours_per_query(run, qrels)
    for trap in ("tie_trap", "float32_trap"):
        assert ours["mrr"][trap] == 1.0 and theirs["mrr"][trap] == pytest.approx(1 / 3)
    differing = [q for q in qrels if abs(theirs["ndcg@10"][q] - ours["ndcg@10"][q]) > TOLERANCE]
    assert len(differing) > 5
