"""A run file read as flat arrays (``read_trec_run_flat``, what ``evaluate`` and ``compare`` read a path with) judges to
the same numbers as the same file read into dicts, ties and float32 included; a file it cannot take is left to the
dict reader, which names the file and line."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline import api
from retrieval_pipeline.api_inputs import load_scores
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation.exports.trec import read_trec_run_flat, read_trec_run_scores
from retrieval_pipeline.core.evaluation.metrics import judging
from retrieval_pipeline.core.evaluation.metrics.judging import FlatScores, judge_scores, lists_a_doc_twice
from retrieval_pipeline.core.evaluation.metrics.names import parse_metrics
from retrieval_pipeline.core.evaluation.metrics.ranked import per_query_values

METRICS = parse_metrics(["ndcg@10", "map", "recall@100", "P@5", "mrr", "bpref", "R-prec", "ndcg"])


def _random_files(tmp_path: Path, seed: int) -> tuple[dict[str, dict[str, int]], Path]:
    """Qrels and a run file with the hard cases: float32 ties (scores 1e-9 apart), exact ties broken by doc id, queries
    of the qrels missing from the run, run queries the qrels lack, doc ids shared between queries, unjudged documents."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(60)]
    qrels = {
        f"q{q}": {str(d): int(rng.integers(-1, 4)) for d in rng.choice(docs, int(rng.integers(1, 8)), replace=False)} for q in range(25)
    }
    lines = []
    for q in rng.permutation([*range(3, 25), 30, 31]).tolist():  # q0-q2 are not in the run, q30 and q31 not in the qrels; any order
        chosen = rng.choice(docs, int(rng.integers(1, 40)), replace=False)
        base = rng.choice([1.0, 2.0, 0.5, 3.25], len(chosen))  # exact ties
        scores = base + rng.choice([0.0, 1e-9, -1e-9], len(chosen))  # equal in float32, not in float64
        lines += [f"q{q} Q0 {d} {rank} {float(s)!r} run\n" for rank, (d, s) in enumerate(zip(chosen.tolist(), scores.tolist()), start=1)]
    path = tmp_path / f"run{seed}.txt"
    path.write_text("".join(lines))
    return qrels, path


@pytest.mark.parametrize("seed", range(8))
def test_flat_arrays_judge_to_the_dict_readers_numbers(tmp_path: Path, seed: int) -> None:
    qrels, path = _random_files(tmp_path, seed)
    flat = read_trec_run_flat(path)
    assert isinstance(flat, FlatScores)
    from_dicts = per_query_values(read_trec_run_scores(path), qrels, METRICS)
    from_flat = per_query_values(flat, qrels, METRICS)
    for name in from_dicts:
        np.testing.assert_array_equal(from_flat[name], from_dicts[name], err_msg=name)
    a, b = judge_scores(read_trec_run_scores(path), qrels), judge_scores(flat, qrels)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.n_retrieved, b.n_retrieved)


def test_evaluate_and_compare_of_paths_equal_those_of_the_same_runs_as_dicts(tmp_path: Path) -> None:
    qrels, one = _random_files(tmp_path, 1)
    _, two = _random_files(tmp_path, 2)
    assert api.evaluate(qrels, one, ["ndcg@10", "map"]).means == api.evaluate(qrels, read_trec_run_scores(one), ["ndcg@10", "map"]).means
    by_path = api.compare(qrels, {"a": one, "b": two}, ["ndcg@10"], n_permutations=200, n_bootstrap=50)
    by_dict = api.compare(
        qrels, {"a": read_trec_run_scores(one), "b": read_trec_run_scores(two)}, ["ndcg@10"], n_permutations=200, n_bootstrap=50
    )
    assert by_path.to_dict(per_query=True) == by_dict.to_dict(per_query=True)


def test_a_gzip_run_is_read_flat_too(tmp_path: Path) -> None:
    qrels, path = _random_files(tmp_path, 3)
    packed = tmp_path / "run.txt.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert isinstance(read_trec_run_flat(packed), FlatScores)
    assert api.evaluate(qrels, packed, "map").means == api.evaluate(qrels, path, "map").means


def test_a_doc_listed_twice_is_left_to_the_line_reader_which_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq1 Q0 d1 3 0.5 t\n")
    assert read_trec_run_flat(path) is None
    with pytest.raises(InputError, match=r"run\.txt.*line 3"):
        load_scores(path)


def test_files_the_flat_reader_cannot_take_are_read_by_the_dict_reader(tmp_path: Path) -> None:
    tabbed, apart = tmp_path / "tabbed.txt", tmp_path / "apart.txt"
    tabbed.write_text("q1\tQ0\td1\t1\t2.0\tt\n")
    apart.write_text("q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")  # q1 on lines apart
    assert read_trec_run_flat(tabbed) is None and read_trec_run_flat(apart) is None
    assert load_scores(tabbed) == {"q1": {"d1": 2.0}}
    assert load_scores(apart) == {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d1": 2.0}}


@pytest.mark.parametrize("compiled", [False, True])
def test_a_repeated_doc_is_found_by_the_sort_and_by_the_compiled_pass(monkeypatch, compiled: bool) -> None:
    monkeypatch.setattr(judging, "_COMPILED_FROM", 0 if compiled else 10**12)
    starts = np.array([0, 3, 5])
    assert not lists_a_doc_twice(starts, np.array([0, 1, 2, 0, 1]), 3)  # the same docs in two queries: fine
    assert lists_a_doc_twice(starts, np.array([0, 1, 0, 2, 1]), 3)  # doc 0 twice in query 0
    assert lists_a_doc_twice(starts, np.array([0, 1, 2, 1, 1]), 3)  # doc 1 twice in query 1


def test_a_file_the_flat_reader_declines_is_read_from_disk_once(tmp_path: Path, monkeypatch) -> None:
    from retrieval_pipeline.core.evaluation.exports import trec

    reads = []
    original = trec._run_bytes
    monkeypatch.setattr(trec, "_run_bytes", lambda path: reads.append(path) or original(path))
    tabbed = tmp_path / "tabbed.txt"
    tabbed.write_text("q1\tQ0\td1\t1\t2.0\tt\n")
    assert load_scores(tabbed) == {"q1": {"d1": 2.0}}
    assert reads == [tabbed]
