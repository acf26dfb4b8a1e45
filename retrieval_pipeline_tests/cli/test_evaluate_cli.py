"""``python -m retrieval_pipeline.cli.evaluate``: tables, JSON, and errors naming the file and line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_pipeline.cli.evaluate import main

QRELS = "q1 0 d1 1\nq1 0 d2 2\nq2 0 d3 1\nq3 0 d5 1\nq3 0 d6 0\n"
BM25 = "q1 Q0 d1 1 1.2 bm25\nq1 Q0 d9 2 0.8 bm25\nq1 Q0 d2 3 0.5 bm25\nq2 Q0 d4 1 2.0 bm25\nq2 Q0 d3 2 1.0 bm25\nq3 Q0 d7 1 3.0 bm25\n"
DENSE = "q1 Q0 d2 1 0.9 dense\nq1 Q0 d1 2 0.8 dense\nq2 Q0 d3 1 0.7 dense\nq3 Q0 d5 1 0.6 dense\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"qrels": tmp_path / "qrels.txt", "bm25": tmp_path / "bm25.run", "dense": tmp_path / "dense.run"}
    for path, text in zip(paths.values(), (QRELS, BM25, DENSE)):
        path.write_text(text)
    return paths


def test_one_run_prints_trec_eval_like_means(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(files["qrels"]), str(files["dense"]), "-m", "P@1", "-m", "map"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [["runid", "all", "dense"], ["num_q", "all", "3"], ["precision@1", "all", "1.0000"], ["map", "all", "1.0000"]]


def test_two_runs_print_the_comparison_and_write_json(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    argv = [str(files["qrels"]), str(files["bm25"]), str(files["dense"]), "-m", "ndcg@10", "-m", "hit@1", "--json", str(out)]
    assert main([*argv, "--permutations", "2000", "--bootstrap", "1000"]) == 0
    text = capsys.readouterr().out
    assert "dense - bm25" in text and "p Holm" in text and "dense and bm25 are indistinguishable on ndcg@10" in text
    payload = json.loads(out.read_text())
    assert payload["runs"] == ["bm25", "dense"] and payload["metrics"] == ["ndcg@10", "hit_rate@1"]
    assert payload["means"]["hit_rate@1"]["dense"]["mean"] == 1.0


def test_malformed_run_file_exits_2_naming_file_and_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    files["dense"].write_text("q1 Q0 d2 1 0.9 dense\nq1 Q0 d1 2 0.8\n")
    assert main([str(files["qrels"]), str(files["bm25"]), str(files["dense"])]) == 2
    err = capsys.readouterr().err
    assert "dense.run" in err and "line 2: expected 6 fields" in err


def test_unknown_metric_exits_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(files["qrels"]), str(files["bm25"]), "-m", "ndgc@10"]) == 2
    assert "unknown metric 'ndgc@10'" in capsys.readouterr().err


def test_runs_as_a_module(files: dict[str, Path], project_root: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "retrieval_pipeline.cli.evaluate", str(files["qrels"]), str(files["dense"]), "-m", "mrr"],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines()[-1].split() == ["mrr", "all", "1.0000"]
