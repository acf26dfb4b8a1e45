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


# --------------------------------------------------------------------------------------------------
# Files and options as other tools write them (issue 37), bad output paths and silent zeros (issue 39)
# --------------------------------------------------------------------------------------------------


def test_gzip_files_and_three_column_qrels(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    qrels, run = tmp_path / "qrels.3col.txt.gz", tmp_path / "dense.run.gz"
    qrels.write_bytes(gzip.compress("".join(" ".join(line.split()[i] for i in (0, 2, 3)) + "\n" for line in QRELS.splitlines()).encode()))
    run.write_bytes(gzip.compress(DENSE.encode()))
    assert main([str(qrels), str(run), "-m", "P@1"]) == 0
    assert main([str(files["qrels"]), str(files["dense"]), "-m", "P@1"]) == 0
    first, second = capsys.readouterr().out.split("runid")[1:]
    assert first.split()[1:] == second.split()[1:] and "precision@1 all 1.0000" in " ".join(first.split())


def test_per_query_lines_in_trec_eval_layout(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(files["qrels"]), str(files["bm25"]), "-q", "-m", "P.1", "-m", "recip_rank"]) == 0
    lines = capsys.readouterr().out.splitlines()
    per_query = [line for line in lines if "\tall\t" not in line and not line.startswith("runid")]
    assert per_query == [
        f"{'precision@1':<22}\tq1\t1.0000",
        f"{'mrr':<22}\tq1\t1.0000",
        f"{'precision@1':<22}\tq2\t0.0000",
        f"{'mrr':<22}\tq2\t0.5000",
        f"{'precision@1':<22}\tq3\t0.0000",
        f"{'mrr':<22}\tq3\t0.0000",
    ]
    assert f"{'mrr':<22}\tall\t0.5000" in lines


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["-m", "P.1,2"], ["precision@1", "precision@2"]),
        (["-m", "ndcg_cut.10,20"], ["ndcg@10", "ndcg@20"]),
        (["-m", "map ndcg@10"], ["map", "ndcg@10"]),
        (["-m", "map,recall.1,2", "-m", "P_1"], ["map", "recall@1", "recall@2", "precision@1"]),
    ],
)
def test_metric_lists_as_trec_eval_takes_them(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], arguments: list[str], expected: list[str]
) -> None:
    assert main([str(files["qrels"]), str(files["dense"]), *arguments]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]]
    assert names == expected


def test_a_bare_cut_off_is_refused(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(files["qrels"]), str(files["dense"]), "-m", "map,10"]) == 2
    assert "cut-off 10 follows no metric with a cut-off" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("/proc/self/mem", "--json /proc/self/mem"),
        ("{tmp}/no/such/folder/out.json", "does not exist"),
        ("{tmp}", "is a folder"),
        ("/dev/full", "is not a regular file"),
    ],
)
def test_a_bad_json_path_is_one_line_and_exit_2(
    files: dict[str, Path], tmp_path: Path, project_root: Path, target: str, message: str
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrieval_pipeline.cli.evaluate",
            str(files["qrels"]),
            str(files["dense"]),
            "--json",
            target.format(tmp=tmp_path),
        ],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1 and message in done.stderr


def test_an_unwritable_folder_is_one_line_and_exit_2(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root ignores the mode bits
        pytest.skip("running as root: every folder is writable")
    assert main([str(files["qrels"]), str(files["dense"]), "--json", str(locked / "out.json")]) == 2
    assert "is not writable" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("run_text", "warning"),
    [("", "is empty (no hit for any query)"), ("x1 Q0 d1 1 1.0 t\n", "shares no query id with the qrels")],
)
def test_a_run_that_scores_zero_for_nothing_warns_on_stderr(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], run_text: str, warning: str
) -> None:
    files["dense"].write_text(run_text)
    assert main([str(files["qrels"]), str(files["dense"]), "-m", "map"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: run ") and warning in err and "dense.run" in err


def test_statistics_parameters_out_of_range_exit_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(files["qrels"]), str(files["bm25"]), str(files["dense"]), "--permutations", str(10**10)]) == 2
    assert "n_permutations must be an integer from 1 to 1,000,000" in capsys.readouterr().err
