"""Tests for loading ADK-style suite YAML files into cases and rejects."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.sources.suites import SuiteLoad, load_suite

API_OK = """
  - id: api:ok
    benchmark_type: api_understanding
    question: Which class runs agents?
    category: Core
    answers:
      - answer: Runner
        fully_qualified_class_name: [a.b.Runner, a.Runner, a.b.Runner]
"""
MC_OK = """
  - id: mc:ok
    benchmark_type: multiple_choice
    question: Pick one
    options: {A: first, B: second}
    correct_answer: B
    explanation: because
"""


def write_suite(tmp_path: Path, rows: str, *, folder: str = "my_suite") -> Path:
    """Write ``benchmarks:`` + rows into ``tmp_path/folder/benchmark.yaml``."""
    directory = tmp_path / folder
    directory.mkdir(exist_ok=True)
    path = directory / "benchmark.yaml"
    path.write_text("benchmarks:\n" + textwrap.indent(textwrap.dedent(rows).strip("\n"), "  ") + "\n")
    return path


def assert_consistent(load: SuiteLoad) -> None:
    """Every row is either a case or a reject."""
    assert len(load.cases) + len(load.rejects) == load.total


def single_reject(load: SuiteLoad, path: Path) -> str:
    """The only reject's reason, checked to name the file."""
    assert_consistent(load)
    assert len(load.rejects) == 1, load.rejects
    reason = load.rejects[0].reason
    assert str(path) in reason
    return reason


def test_valid_api_and_mc_cases_load(tmp_path: Path) -> None:
    path = write_suite(tmp_path, API_OK + MC_OK)
    load = load_suite(path)
    assert_consistent(load)
    assert [c.case_id for c in load.cases] == ["api:ok", "mc:ok"]
    api, mc = load.cases
    assert api.suite == "my_suite" and api.index == 0 and api.source_file == str(path)
    assert api.gold_fqns == ["a.b.Runner", "a.Runner"]  # order kept, duplicate dropped
    assert api.extra["category"] == "Core" and api.extra["answers"][0]["answer"] == "Runner"
    assert mc.options == {"A": "first", "B": "second"} and mc.correct_answer == "B" and mc.explanation == "because"


def test_explicit_suite_name_and_string_gold(tmp_path: Path) -> None:
    rows = """
    - id: api:one
      benchmark_type: api_understanding
      question: Q?
      answers: [{fully_qualified_class_name: x.Y}]
    """
    load = load_suite(write_suite(tmp_path, rows), suite="named")
    assert load.cases[0].suite == "named" and load.cases[0].gold_fqns == ["x.Y"]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("- {benchmark_type: api_understanding, question: Q}", "'id'"),
        ("- {id: '  ', benchmark_type: api_understanding, question: Q}", "'id'"),
        ("- {id: c1, benchmark_type: api_understanding, answers: [{fully_qualified_class_name: a.B}]}", "'question'"),
        ("- {id: c1, benchmark_type: fix_error, question: not a description}", "'description'"),
        ("- {id: c1, benchmark_type: api_understanding, question: Q, answers: [{answer: x}]}", "fully_qualified"),
        ("- {id: c1, benchmark_type: multiple_choice, question: Q, options: {A: a}, correct_answer: A}", "'options'"),
        ("- {id: c1, benchmark_type: multiple_choice, question: Q, options: {A: a, B: b}, correct_answer: C}", "'correct_answer'"),
        ("- {id: c1, benchmark_type: essay, question: Q}", "'benchmark_type'"),
        ("- just a string", "not a mapping"),
    ],
)
def test_each_reject_reason_names_field_file_and_case(tmp_path: Path, row: str, expected: str) -> None:
    path = write_suite(tmp_path, row)
    reason = single_reject(load_suite(path), path)
    assert expected in reason
    if "id: c1" in row:  # the case is named by id, else by position
        assert "'c1'" in reason
    else:
        assert "index 0" in reason


def test_duplicate_id_rejects_later_rows_naming_first_position(tmp_path: Path) -> None:
    path = write_suite(tmp_path, API_OK + MC_OK + API_OK)
    load = load_suite(path)
    reason = single_reject(load, path)
    assert "duplicate 'id' 'api:ok'" in reason and "first seen at index 0" in reason
    assert load.rejects[0].index == 2 and load.rejects[0].case_id == "api:ok"


def test_fix_error_files_resolved_against_files_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "cases").mkdir(parents=True)
    (root / "cases" / "fixed.py").write_text("x = 1\n")
    rows = """
    - id: fix:1
      benchmark_type: fix_error
      name: '01: something'
      description: Create a `LlmAgent`.
      fixed_file: cases/fixed.py
      test_file: cases/test_agent.py
    """
    load = load_suite(write_suite(tmp_path, rows), files_root=root)
    case = load.cases[0]
    assert case.query == "Create a `LlmAgent`."
    assert case.files == {"fixed": str((root / "cases" / "fixed.py").resolve())}
    assert case.extra["missing_files"] == [{"role": "test", "path": str((root / "cases" / "test_agent.py").resolve())}]
    assert case.extra["name"] == "01: something" and "fixed_file" not in case.extra


def test_fix_error_files_default_to_yaml_directory(tmp_path: Path) -> None:
    rows = "- id: fix:1\n  benchmark_type: fix_error\n  description: D\n  fixed_file: fixed.py"
    path = write_suite(tmp_path, rows)
    (path.parent / "fixed.py").write_text("")
    assert load_suite(path).cases[0].files == {"fixed": str((path.parent / "fixed.py").resolve())}


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("benchmarks:\n  - id: a\n    question: [unclosed\n  - id: b\n")
    with pytest.raises(InputError) as info:
        load_suite(path)
    message = str(info.value)
    assert str(path) in message and "line 4, column" in message


@pytest.mark.parametrize("content", ["- a\n- b\n", "benchmarks: {a: 1}\n", "other: []\n", ""])
def test_wrong_top_level_raises(tmp_path: Path, content: str) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(content)
    with pytest.raises(InputError, match="benchmarks"):
        load_suite(path)


def test_unreadable_file_raises_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="nope.yaml"):
        load_suite(missing)


def test_empty_benchmarks_list_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text("benchmarks: []\n")
    assert load_suite(path) == SuiteLoad(cases=[], rejects=[], total=0)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("suite", "benchmark_type"),
    [
        ("api_understanding", "api_understanding"),
        ("fix_errors", "fix_error"),
        ("configure_adk_features_mc", "multiple_choice"),
    ],
)
def test_real_adk_suites_load_without_rejects(shared_data: Path, suite: str, benchmark_type: str) -> None:
    load = load_suite(shared_data / "adk" / "benchmark_definitions" / suite / "benchmark.yaml")
    assert load.rejects == []
    assert load.total > 0 and len(load.cases) == load.total
    assert {c.benchmark_type for c in load.cases} == {benchmark_type}
    assert all(c.suite == suite and c.query for c in load.cases)
    if benchmark_type == "api_understanding":
        assert all(c.gold_fqns for c in load.cases)
    if benchmark_type == "fix_error":  # solution files are not shipped with the data
        assert all(c.extra.get("missing_files") and not c.files for c in load.cases)
