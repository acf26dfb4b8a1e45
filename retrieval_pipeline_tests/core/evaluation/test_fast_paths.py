"""The fast paths of evaluate and compare give what the plain ones give: the bulk TREC run reader against the
line-by-line one, the bulk check of a score dict against the per-hit one, and the randomisation test's byte-table
sums (numpy or Numba) against the unpacked-bits product they replace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline import evaluate
from retrieval_pipeline.api_inputs import load_run
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation.exports import trec
from retrieval_pipeline.core.evaluation.metrics import judging
from retrieval_pipeline.core.evaluation.statistics import stats


def _line_by_line(path: Path) -> dict[str, dict[str, float]]:
    """The reader without its bulk path."""
    original = trec._bulk_run_scores
    trec._bulk_run_scores = lambda _: None  # type: ignore[assignment]
    try:
        return trec.read_trec_run_scores(path)
    finally:
        trec._bulk_run_scores = original  # type: ignore[assignment]


@pytest.mark.parametrize(
    "text",
    [
        "q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.25 t\n\nq2 Q0 a 1 1e-3 t\n",
        "q1 Q0 a 1 0.1 t\r\nq1 0 b 2 -0.30000000000000004 t\r\n   \nq3 Q0 c 7 3 t",
        "",
    ],
)
def test_bulk_reader_equals_the_line_reader(tmp_path: Path, text: str) -> None:
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8", newline="")
    assert (trec._bulk_run_scores(path) is not None) == bool(text)  # an empty file is the line reader's
    fast = trec.read_trec_run_scores(path)
    assert fast == _line_by_line(path)
    assert [list(h) for h in fast.values()] == [list(h) for h in _line_by_line(path).values()]  # file order kept


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 a 1 0.5 t\nq2 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t\n", None),  # a query on lines apart: read line by line
        ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", "line 2: doc id 'a' appears twice"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b x 0.4 t\n", "line 2: rank 'x' is not an integer"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 nan t\n", "line 2: score 'nan' is not finite"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4\n", "line 2: expected 6 fields"),
        ("q1 Q0 a 1 0.5 t x\nq1 Q0 b 2 0.4 t\n", "line 1: expected 6 fields"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2.0 0.4 t\n", "line 2: rank '2.0' is not an integer"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 1e400 t\n", "line 2: score '1e400' is not finite"),
    ],
)
def test_bulk_reader_leaves_odd_files_to_the_line_reader(tmp_path: Path, text: str, message: str | None) -> None:
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8")
    assert trec._bulk_run_scores(path) is None
    if message is None:
        assert trec.read_trec_run_scores(path) == {"q1": {"a": 0.5, "b": 0.4}, "q2": {"a": 0.5}}
    else:
        with pytest.raises(InputError, match=message):
            trec.read_trec_run_scores(path)


def test_bulk_reader_parses_scores_exactly_as_float_does(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    scores = (rng.random(20_000) * 10.0 ** rng.integers(-30, 30, 20_000) * rng.choice([-1, 1], 20_000)).tolist()
    scores += [0.1 + 0.2, 5e-324, 1.7976931348623157e308, -0.0, 0.30000000000000004]
    path = tmp_path / "run.txt"
    path.write_text("".join(f"q Q0 d{i} {i} {v!r} t\n" for i, v in enumerate(scores)), encoding="utf-8")
    assert trec._bulk_run_scores(path) == {"q": {f"d{i}": v for i, v in enumerate(scores)}}


@pytest.mark.parametrize(
    ("text", "single_spaced"),
    [
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.25 t\n\nq2 Q0 a 1 1e-3 t\n", True),
        ("q1 Q0 a 1 1. t\nq1 Q0 b 2 .5 t\nq1 Q0 c 3 +2 t\nq1 Q0 d 4 1E5 t\nq1 Q0 e 5 -0 t\nq2 Q0 a 1 7 t", True),
        ("q1 Q0 a 1 1_0 t\n", False),  # float() reads 10; pyarrow refuses it, the other readers take it
        ("q1 Q0 a 1 0x10 t\n", False),
        ("q1 Q0 a 1 inf t\nq1 Q0 b 2 0.4 t\n", False),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b +2 0.4 t\n", False),  # int() reads +2: not digits only
        ("q1\tQ0 a 1 0.5 t\n", False),
        ("q1  Q0 a 1 0.5 t\n", False),
        (" q1 Q0 a 1 0.5 t\n", False),
        ("q1 Q0 a 1 0.5 t \n", False),
        ("q1 Q0 a\xa0b 1 0.5 t\n", False),  # a non-ASCII space: str.split splits there (pandas' tokenizer did not)
        ("q1 Q0 a\u2003b 1 0.5 t\n", False),
        ("q1 Q0 a\x0bb 1 0.5 t\n", False),
        ("q1 Q0 a\x1cb 1 0.5 t\n", False),
        ("q1 Q0 é 1 0.5 t\nq1 Q0 b 2 0.4 t\n", False),  # non-ASCII without a space: pandas reads it
        ("q1 Q0 a 1 0.5 t\r\n", False),
        ("q1 Q0 a 1 0.5 t\nq2 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t\n", False),  # a query on lines apart
        ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", False),  # a doc twice
        ("q1 Q0 " + "a" * 70_000 + " 1 0.5 t\n", False),  # a line over the limit
        ("q1 Q0 a 1 0." + "0" * 70_000 + "1 t\n", False),
        ("q1 Q0 " + "a" * 30_000 + " 1 0.5 " + "t" * 30_000 + "\nq1 Q0 b 1 0.5 t\n", True),  # long, within it
    ],
)
def test_single_spaced_reader_equals_the_line_reader_or_declines(tmp_path: Path, text: str, single_spaced: bool) -> None:
    """pyarrow's reader takes only what the line reader reads the same way; everything else it leaves to the others."""
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8", newline="")
    fast = trec._arrow_run_scores(path.read_bytes())
    assert (fast is not None) == single_spaced
    try:
        expected = _line_by_line(path)
    except InputError as error:
        assert fast is None
        with pytest.raises(InputError, match=str(error).split(": ", 1)[-1][:30].replace("(", r"\(")):
            trec.read_trec_run_scores(path)
        return
    if fast is not None:
        assert fast == expected and [list(h) for h in fast.values()] == [list(h) for h in expected.values()]
    assert trec.read_trec_run_scores(path) == expected


def test_single_spaced_reader_parses_scores_exactly_as_float_does() -> None:
    rng = np.random.default_rng(1)
    scores = (rng.random(20_000) * 10.0 ** rng.integers(-300, 300, 20_000) * rng.choice([-1, 1], 20_000)).tolist()
    scores += [0.1 + 0.2, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, 0.30000000000000004]
    text = "".join(f"q Q0 d{i} {i} {v!r} t\n" for i, v in enumerate(scores))
    text += "".join(f"q Q0 e{i} {i} {v:.17e} t\n" for i, v in enumerate(scores))
    expected = {f"d{i}": v for i, v in enumerate(scores)} | {f"e{i}": float(f"{v:.17e}") for i, v in enumerate(scores)}
    fast = trec._arrow_run_scores(text.encode())
    assert fast is not None and list(fast) == ["q"]
    assert all(fast["q"][d] == v and np.signbit(fast["q"][d]) == np.signbit(v) for d, v in expected.items())


def test_a_file_is_read_whole_in_pieces_within_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.txt"
    path.write_bytes(b"q Q0 d 1 0.5 t\n" * 100)
    monkeypatch.setattr(trec, "READ_PIECE_BYTES", 7)
    with trec.open_trec(path) as handle:
        assert handle.read() == path.read_bytes()
    monkeypatch.setenv(trec.MAX_TREC_BYTES_ENV, "1500")
    path.write_bytes(b"q Q0 d 1 0.5 t\n" * 100 + b"x" * 1000)
    with pytest.raises(trec.PathRefused, match="over the limit"):
        trec.open_trec(path)
    import gzip

    packed = tmp_path / "run.txt.gz"
    packed.write_bytes(gzip.compress(b"q Q0 d 1 0.5 t\n" * 200))
    with trec.open_trec(packed) as handle, pytest.raises(trec.PathRefused, match="once decompressed"):
        handle.read()


def test_bulk_checked_score_dicts_are_used_as_they_are_and_odd_ones_are_still_refused() -> None:
    run = {"q": {"a": 0.5, "b": np.float32(0.25), "c": 3, "d": np.float64(1.0)}}
    assert load_run(run) == run and load_run(run)["q"] is run["q"]
    assert load_run({1: {2: 0.5}}) == {"1": {"2": 0.5}}  # ids that are not strings: converted, per hit
    with pytest.raises(ValueError, match="score True of query 'q', doc 'a' is not a finite number"):
        load_run({"q": {"a": True}})
    with pytest.raises(ValueError, match="score inf of query 'q', doc 'b' is not a finite number"):
        load_run({"q": {"a": 1.0, "b": float("inf")}})


def _unpacked_bits_p(diffs: np.ndarray, n_permutations: int, seed: int) -> float:
    """The two-sided randomisation p-value as it was computed before the byte table: unpacked bits times the differences."""
    observed, tol = float(diffs.sum()), stats._TIE_TOLERANCE * float(np.abs(diffs).sum())
    rng, extreme = np.random.default_rng(seed), 0
    for size in stats._chunks(n_permutations, diffs.size):
        draws = rng.integers(0, 256, size=(size, (diffs.size + 7) // 8), dtype=np.uint8)
        permuted = 2.0 * (np.unpackbits(draws, axis=1, count=diffs.size) @ diffs) - observed
        extreme += int((np.abs(permuted) >= abs(observed) - tol).sum())
    return extreme / n_permutations


@pytest.mark.parametrize("compiled_from", [10**12, 0])  # numpy's gather, then the Numba kernel
@pytest.mark.parametrize(("n", "seed"), [(3, 1), (61, 2), (1000, 3), (2003, 4)])
def test_byte_table_p_values_equal_the_unpacked_bits_product(
    monkeypatch: pytest.MonkeyPatch, compiled_from: int, n: int, seed: int
) -> None:
    if compiled_from == 0:
        pytest.importorskip("numba")
    monkeypatch.setattr(stats, "_COMPILED_FROM", compiled_from)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 4, n) / 3, rng.integers(0, 4, n) / 3  # discrete: many zero differences and ties
    b[: n // 3] = a[: n // 3]
    for shift in (0.0, 0.05):
        p = stats.randomisation_test(a + shift, b, 3000, seed=seed)
        assert p == _unpacked_bits_p(a + shift - b, 3000, seed)


def test_the_compiled_ranking_counts_equal_the_sorted_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numba")
    rng = np.random.default_rng(11)
    docs = [f"d{i}" for i in range(300)]
    qrels = {f"q{q}": {d: int(g) for d, g in zip(rng.choice(docs, 12, replace=False).tolist(), rng.integers(-1, 4, 12))} for q in range(80)}
    run = {
        q: {d: float(s) for d, s in zip(rng.choice(docs, 150, replace=False).tolist(), np.round(rng.normal(size=150), 1))}
        for q in list(qrels)[5:]
    }
    run["q6"] = {d: -0.0 if i % 2 else 0.0 for i, d in enumerate(docs[:40])}  # -0.0 ties 0.0, as in C
    names = ["ndcg@10", "map", "mrr", "recall@20", "bpref", "infAP", "judged@10"]
    monkeypatch.setattr(judging, "_COMPILED_FROM", 10**12)
    sorted_ = evaluate(qrels, run, names).per_query
    monkeypatch.setattr(judging, "_COMPILED_FROM", 0)
    assert evaluate(qrels, run, names).per_query == sorted_
