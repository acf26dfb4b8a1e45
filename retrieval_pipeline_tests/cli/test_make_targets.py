"""``make add-retriever``: variables validated before use, never pasted into the recipe; a failed run fails make (issue 39.5).

Before: ``RETRIEVER='bm25; touch FILE'`` ran ``touch FILE`` and make exited 0; ``RETRIEVER='bm25 --out-dir X'`` passed
``--out-dir X`` on to the runner. The Makefile tests run make on a copy of the Makefile with ``-o install`` (nothing
is installed) and a stand-in ``.venv/bin/python``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_pipeline.cli.make_targets import MakeArgumentError, add_retriever_argv, main

PROJECT = Path(__file__).resolve().parents[2]
INJECTIONS = ["bm25; touch FILE", "bm25 --out-dir X", "bm25 $(touch FILE)", "`touch FILE`", "-h", "../bm25"]


@pytest.mark.parametrize("retriever", INJECTIONS)
def test_a_retriever_that_is_not_a_name_is_refused(retriever: str) -> None:
    with pytest.raises(MakeArgumentError, match="is not a retriever name .* nothing was run"):
        add_retriever_argv({"RETRIEVER": retriever, "DATASETS": "stdlib"})


@pytest.mark.parametrize("datasets", ["stdlib --out-dir X", "stdlib;touch FILE", "-x"])
def test_datasets_that_are_not_names_are_refused(datasets: str) -> None:
    with pytest.raises(MakeArgumentError, match="nothing was run"):
        add_retriever_argv({"RETRIEVER": "bm25", "DATASETS": datasets})


def test_names_become_one_argument_each() -> None:
    argv = add_retriever_argv({"RETRIEVER": "hybrid_minmax_a0.5", "DATASETS": " stdlib  python_nq "})
    assert argv == ["--datasets", "stdlib", "python_nq", "--add-retriever", "hybrid_minmax_a0.5"]


def test_no_retriever_is_the_usage_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add-retriever"], {"DATASETS": "stdlib"}) == 2
    assert capsys.readouterr().err.startswith("error: usage: make add-retriever RETRIEVER=")


def _make_copy(tmp_path: Path, python: str) -> Path:
    """A folder with the project's Makefile and ``.venv/bin/python`` = ``python`` (a shell script)."""
    shutil.copy(PROJECT / "Makefile", tmp_path / "Makefile")
    stub = tmp_path / ".venv" / "bin" / "python"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\n" + python)
    stub.chmod(0o755)
    return tmp_path


def _make(folder: Path, *variables: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-o", "install", "add-retriever", *variables],
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("variable", ["RETRIEVER=bm25; touch FILE", "RETRIEVER=bm25 --out-dir X", "DATASETS=stdlib --out-dir X"])
def test_make_refuses_injected_variables_and_runs_nothing(tmp_path: Path, variable: str) -> None:
    folder = _make_copy(tmp_path, f'PYTHONPATH="{PROJECT}" exec "{sys.executable}" "$@"\n')
    done = _make(folder, *(["RETRIEVER=bm25"] if variable.startswith("DATASETS") else []), variable)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "nothing was run" in done.stderr and "Traceback" not in done.stderr
    assert not (folder / "FILE").exists() and not (folder / "X").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_failed_run_fails_make_and_the_variables_arrive_whole(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    folder = _make_copy(tmp_path, f'printf "%s|" "$@" > "{log}"; printf "\\n%s\\n%s\\n" "$RETRIEVER" "$DATASETS" >> "{log}"; exit 1\n')
    done = _make(folder, "RETRIEVER=bm25_code", "DATASETS=stdlib python_nq")
    assert done.returncode != 0, done.stdout + done.stderr
    assert log.read_text().splitlines() == ["-m|retrieval_pipeline.cli.make_targets|add-retriever|", "bm25_code", "stdlib python_nq"]


def test_the_readme_steps_before_add_retriever_list_it_in_the_dataset(tmp_path: Path) -> None:
    """Issue 37: the README's example failed when copied; its first step was a comment naming no file. The sed it
    shows now changes exactly stdlib's list in data/config/datasets.yaml, and the registry then lists tfidf_plugin."""
    from retrieval_pipeline.core.registry import load_registry

    readme = (PROJECT / "README.md").read_text()
    block = readme.split("make add-retriever RETRIEVER=tfidf_plugin DATASETS=stdlib")[0].rsplit("```bash", 1)[1]
    sed = next(line for line in block.splitlines() if line.startswith("sed -i "))
    (tmp_path / "data" / "config").mkdir(parents=True)
    copy = tmp_path / "data" / "config" / "datasets.yaml"
    shutil.copy(PROJECT / "data" / "config" / "datasets.yaml", copy)
    shutil.copy(PROJECT / "data" / "config" / "retrievers.yaml", copy.with_name("retrievers.yaml"))
    subprocess.run(["sh", "-c", sed], cwd=tmp_path, check=True)
    before = (PROJECT / "data" / "config" / "datasets.yaml").read_text().splitlines()
    after = copy.read_text().splitlines()
    assert sum(a != b for a, b in zip(before, after)) == 1 and len(before) == len(after)
    registry = load_registry(copy, root=PROJECT)
    assert "tfidf_plugin" in registry.get("stdlib").retrievers
    assert add_retriever_argv({"RETRIEVER": "tfidf_plugin", "DATASETS": "stdlib"})[-1] == "tfidf_plugin"
