"""The runner on bad registries and failing steps: one clear line, the summary always, the other datasets still run.

* a dataset whose settings the registry refuses is reported up front and left out; the others run and the
  summary is printed (not a traceback after the datasets before it and nothing after it);
* a registry refused as a whole (a duplicate key) is one ``error:`` line naming the file, exit 2, no traceback;
* a failed step shows the exception the step raised (``Error occurred while executing op "raw_cases":`` said
  nothing) and the case counts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from retrieval_pipeline.cli.run import main
from retrieval_pipeline_tests.defs.conftest import API_SUITE, VOCAB
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

PROJECT = Path(__file__).resolve().parents[2]
NO_VALID_CASE = """
benchmarks:
- id: api_understanding:no_question
  benchmark_type: api_understanding
  answers:
  - fully_qualified_class_name: [json.dumps]
- id: api_understanding:no_question_either
  benchmark_type: api_understanding
  answers:
  - fully_qualified_class_name: [json.loads]
"""


def _registry(root: Path, datasets: str) -> Path:
    (root / "suites").mkdir(parents=True, exist_ok=True)
    (root / "suites" / "api_understanding.yaml").write_text(API_SUITE)
    (root / "suites" / "no_valid_case.yaml").write_text(NO_VALID_CASE)
    path = root / "datasets.yaml"
    head = "root: .\ndefaults:\n  filter: {judge: none}\n  retrievers: [bm25]\n  thresholds: {hit_rate@5: {min: 0.0, severity: ERROR}}\ndatasets:\n"
    path.write_text(head + textwrap.indent(textwrap.dedent(datasets).strip() + "\n", "  "))
    return path


def _main(tmp_path: Path, registry: Path, capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), registry)
    code = main([*args, "--log", str(tmp_path / "run.log")], resources=resources, instance=dg.DagsterInstance.ephemeral())
    captured = capfd.readouterr()
    return code, captured.out, captured.err


GOOD = """
{name}:
  suites: [suites/api_understanding.yaml]
  corpus: {{introspect_modules: [json, csv]}}
"""


def test_an_invalid_dataset_is_reported_and_the_others_still_run(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    registry = _registry(
        tmp_path / "in",
        GOOD.format(name="stdlib")
        + "python_nq:\n  suites: [suites/api_understanding.yaml]\n  corpus: {introspect_modules: [json]}\n  gate: [no_such_retriever]\n"
        + GOOD.format(name="python_reference_qa"),
    )
    code, out, err = _main(
        tmp_path, registry, capfd, "--datasets", "stdlib", "python_nq", "python_reference_qa", "--select", "raw_cases,case_rejects"
    )
    assert "Traceback" not in out + err
    why = f"file {registry}: dataset 'python_nq' is invalid: gate: ['no_such_retriever'] are not among the dataset's retrievers"
    assert out.startswith(f"error: {why}") and ": not run\n" in out.splitlines()[0] + "\n"  # up front, before any run
    assert "== stdlib: succeeded" in out and "== python_reference_qa: succeeded" in out  # the one after it ran too
    assert "python_nq: FAILED in 0.0 s\n  error: " + why in out
    assert out.rstrip().splitlines()[-1] == "FAILED: 1 of 3 run(s): python_nq (did not run). Exit code 1"
    assert code == 1


def test_a_failed_step_shows_its_own_message_and_the_case_counts(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    registry = _registry(tmp_path / "in", "stdlib:\n  suites: [suites/no_valid_case.yaml]\n  corpus: {introspect_modules: [json]}\n")
    code, out, err = _main(tmp_path, registry, capfd, "--datasets", "stdlib", "--select", "raw_cases,case_rejects")
    assert code == 1, out + err
    step = next(line for line in out.splitlines() if "case_rejects, raw_cases" in line and "FAILED" in line)
    assert "Error occurred while executing" not in out
    assert "no valid case: 2 read, 2 rejected; first reject: " in step and "missing or empty 'question'" in step
    failed = "failed step raw_cases (case_rejects, raw_cases):"  # the step key, then its assets, as the progress line
    assert f"{failed} file " in out and "no valid case: 2 read, 2 rejected" in out.split(failed)[1]


def test_a_refused_registry_is_one_line_naming_the_file(tmp_path: Path) -> None:
    registry = _registry(tmp_path / "in", GOOD.format(name="stdlib") + GOOD.format(name="stdlib"))  # one key twice
    env = {**os.environ, "RETRIEVAL_PIPELINE_REGISTRY": str(registry), "DAGSTER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "retrieval_pipeline.cli.run", "--datasets", "stdlib"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines() == [
        f"error: file {registry}: dataset registry refused: duplicate key 'stdlib' at line 11, column 3 (first at line 7): "
        "the second would silently replace the first"
    ]


@pytest.mark.integration
def test_a_plug_in_that_exits_fails_its_dataset_and_the_invocation(tmp_path: Path) -> None:
    """Issue 39.1: ``os._exit(0)`` in a plug-in's search ended the whole invocation with exit code 0 and no summary."""
    root = tmp_path / "in"
    registry = _registry(
        root,
        GOOD.format(name="stdlib").replace("corpus:", "retrievers: [bm25, exits]\n  corpus:") + GOOD.format(name="python_nq"),
    )
    (root / "retrievers.yaml").write_text(
        'retrievers:\n  bm25: {kind: bm25}\n  exits: {kind: python, factory: "retrieval_pipeline_tests.fakes.plugins:ExitsInSearch"}\n'
    )
    env = {**os.environ, "RETRIEVAL_PIPELINE_REGISTRY": str(registry), "DAGSTER_HOME": str(tmp_path / "home")}
    command = ["--datasets", "stdlib", "python_nq", "--select", "*retrieval_runs,case_rejects,corpus_rejects"]
    command += ["--out-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
    done = subprocess.run(
        [sys.executable, "-m", "retrieval_pipeline.cli.run", *command], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600
    )
    out = done.stdout
    assert "Traceback" not in out + done.stderr, out + done.stderr
    assert done.returncode == 1, out + done.stderr
    assert "== stdlib: FAILED" in out and "== python_nq: succeeded" in out  # the dataset after it still ran
    step = next(line for line in out.splitlines() if "retrievers__exits_runs " in line and "FAILED" in line)
    assert "retriever 'exits' (python) on dataset 'stdlib': its worker process ended during search() with exit code 0" in step
    assert out.rstrip().splitlines()[-1].startswith("FAILED: 1 of 2 run(s): stdlib (a step failed)")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--log", "/proc/self/mem", "--log /proc/self"),
        ("--log", "{tmp}", "is a folder"),
        ("--log", "{tmp}/a_file/run.log", "cannot create it"),
        ("--out-dir", "{tmp}/a_file", "cannot create it"),
        ("--cache-dir", "/proc/self/x", "cannot create it"),
    ],
)
def test_a_bad_output_path_is_one_line_and_exit_2(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    """Issue 39.3: an unwritable output path gave an OSError traceback (after the work, for --json)."""
    (tmp_path / "a_file").write_text("not a folder")
    code = main(["--datasets", "stdlib", option, value.format(tmp=tmp_path)], instance=dg.DagsterInstance.ephemeral())
    captured = capfd.readouterr()
    assert code == 2 and "Traceback" not in captured.out + captured.err
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"error: {option} ") and message in captured.err
