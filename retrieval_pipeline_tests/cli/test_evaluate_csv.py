"""The evaluate_csv command, run in-process on the embedded NQ-format sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_pipeline.cli.evaluate_csv import main

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_CSV = PROJECT_ROOT / "data" / "samples" / "nq" / "nq_sample.csv"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_keyword_search_writes_both_files_and_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    cache = tmp_path / "cache"
    code, stdout, err = run(
        ["--csv", str(SAMPLE_CSV), "--out", str(out_dir), "--cache", str(cache), "--search-types", "keyword"],
        capsys,
    )
    assert code == 0, err
    assert not (cache / "embeddings.sqlite").exists()  # keyword search needs no embeddings
    chunks = json.loads((out_dir / "chunks.json").read_text(encoding="utf-8"))
    assert len(chunks) == 52 and chunks[0]["chunk_id"] == "nq_000000"
    results = json.loads((out_dir / "evaluation_results.json").read_text(encoding="utf-8"))
    assert list(results) == ["keyword"]
    metrics = results["keyword"]["metrics"]
    assert metrics["total_questions"] == 60 and len(results["keyword"]["results"]) == 60
    assert metrics["recall_at_5"] >= 0.8  # the questions share words with their passages
    assert "52 chunks from 60 long answers (8 duplicates merged)" in stdout
    table_header = next(line for line in stdout.splitlines() if line.startswith("metric"))
    assert table_header.split() == ["metric", "keyword"]
    assert f"recall@5 {metrics['recall_at_5']:.3f}" in " ".join(stdout.split())
    for step in ("load", "dedupe", "index keyword (bm25)", "evaluate keyword", "total"):
        assert any(line.startswith(step) for line in stdout.splitlines()), step


def test_sample_size_limits_the_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run(["--csv", str(SAMPLE_CSV), "--out", str(tmp_path), "--search-types", "keyword", "--sample-size", "10"], capsys)
    assert code == 0 and "loaded 10 of 10 rows" in stdout
    results = json.loads((tmp_path / "evaluation_results.json").read_text(encoding="utf-8"))
    assert results["keyword"]["metrics"]["total_questions"] == 10
    whole = run(["--csv", str(SAMPLE_CSV), "--out", str(tmp_path / "all"), "--search-types", "keyword"], capsys)[1]
    corpus_line = next(line for line in stdout.splitlines() if line.startswith("corpus:"))
    assert corpus_line.split("->")[0] == next(line for line in whole.splitlines() if line.startswith("corpus:")).split("->")[0]


def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"question,long_answer,short_answer\nq1,caf\xe9,a\n")
    code, stdout, err = run(["--csv", str(bad), "--out", str(tmp_path / "out"), "--search-types", "keyword"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and str(bad) in err and "row 2" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_missing_column_and_no_usable_rows_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_column = tmp_path / "no_column.csv"
    no_column.write_text("question,answer\nq,a\n", encoding="utf-8")
    assert run(["--csv", str(no_column), "--search-types", "keyword"], capsys)[0] == 2
    no_rows = tmp_path / "no_rows.csv"
    no_rows.write_text("question,long_answer,short_answer\n,p,a\n", encoding="utf-8")
    code, _, err = run(["--csv", str(no_rows), "--search-types", "keyword"], capsys)
    assert code == 2 and "no usable rows" in err and "empty 'question'" in err


@pytest.mark.integration
@pytest.mark.heavy
def test_semantic_and_hybrid_with_the_real_model_then_warm_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--csv", str(SAMPLE_CSV), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]
    args += ["--search-types", "semantic", "hybrid"]
    code, cold, err = run(args, capsys)
    assert code == 0, err
    assert "52 chunks embedded now, 0 from cache" in cold
    results = json.loads((tmp_path / "out" / "evaluation_results.json").read_text(encoding="utf-8"))
    assert list(results) == ["semantic", "hybrid"]
    assert results["semantic"]["metrics"]["recall_at_5"] >= 0.8
    code, warm, err = run(args, capsys)
    assert code == 0, err
    assert "0 chunks embedded now, 52 from cache" in warm
    warm_results = json.loads((tmp_path / "out" / "evaluation_results.json").read_text(encoding="utf-8"))
    assert warm_results == results
