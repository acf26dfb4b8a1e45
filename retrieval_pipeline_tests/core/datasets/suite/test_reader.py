"""Tests for loading ADK-style suite YAML files into cases and rejects."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.datasets.suite.reader import SuiteLoad, load_snippet, load_suite

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


# --------------------------------------------------------------------------------------------------
# Questions about code: code_snippet_ref

SNIPPETS = '''\
"""Sections for the snippet questions."""

def outer():
    # --8<-- [start:count]
    total = 0
    # --8<-- [start:inner]
    for n in (1, 2):
        total += n
    # --8<-- [end:inner]
    # --8<-- [end:count]

# --8<-- [start:open_only]
x = 1
# --8<-- [start:twice]
# --8<-- [start:twice]
# --8<-- [end:twice]
'''


def snippet_row(file: str = "code/snippets.py", section: str = "count") -> str:
    return f"""
      - id: mc:code
        benchmark_type: multiple_choice
        question: What is `total` after this code runs?
        code_snippet_ref: {{file: {file}, section: {section}}}
        options: {{A: '`total` is `3`', B: '`total` is `2`'}}
        correct_answer: A
    """


@pytest.fixture
def snippet_root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "code").mkdir(parents=True)
    (tmp_path / "root" / "code" / "snippets.py").write_text(SNIPPETS)
    return tmp_path / "root"


def test_a_snippet_section_is_loaded_dedented_without_nested_markers(tmp_path: Path, snippet_root: Path) -> None:
    load = load_suite(write_suite(tmp_path, snippet_row()), files_root=snippet_root)
    assert load.rejects == [] and len(load.cases) == 1
    case = load.cases[0]
    assert case.extra["code_snippet"] == "total = 0\nfor n in (1, 2):\n    total += n\n"
    assert case.extra["code_snippet_ref"] == {"file": "code/snippets.py", "section": "count"}
    namespace: dict = {}
    exec(case.extra["code_snippet"], namespace)  # the dedented snippet runs as it stands
    assert namespace["total"] == 3


def test_load_snippet_reads_one_section(snippet_root: Path) -> None:
    assert load_snippet(snippet_root / "code/snippets.py", "inner") == "for n in (1, 2):\n    total += n\n"


def test_a_section_without_an_end_marker_runs_to_the_next_marker_or_test(tmp_path: Path, snippet_root: Path) -> None:
    assert load_snippet(snippet_root / "code/snippets.py", "open_only") == "x = 1\n"  # up to the next marker
    (tmp_path / "open.py").write_text(
        "import os\n# --8<-- [start:cut]\ndef code_under_test():\n    return os.sep\n\n\ndef test_cut():\n    assert 0\n"
    )
    assert load_snippet(tmp_path / "open.py", "cut") == "def code_under_test():\n    return os.sep\n"  # not the suite's test


@pytest.mark.parametrize(
    ("file", "section", "expected"),
    [
        ("code/missing.py", "count", r"file 'code/missing\.py' section 'count': the file .*missing\.py does not exist"),
        ("code/snippets.py", "nope", r"file 'code/snippets\.py' section 'nope': no section 'nope'"),
        ("code/snippets.py", "twice", r"section 'twice' starts 2 times .*lines 14, 15"),
        ("../outside.py", "count", r"outside"),
    ],
)
def test_a_missing_file_or_section_rejects_the_case_naming_both(
    tmp_path: Path, snippet_root: Path, file: str, section: str, expected: str
) -> None:
    (tmp_path / "outside.py").write_text("# --8<-- [start:count]\nx = 1\n# --8<-- [end:count]\n")
    path = write_suite(tmp_path, snippet_row(file, section))
    reason = single_reject(load_suite(path, files_root=snippet_root), path)
    assert "mc:code" in reason and re.search(expected, reason), reason


@pytest.mark.parametrize("ref", ["code/snippets.py", "{file: code/snippets.py}", "{file: '', section: count}"])
def test_a_malformed_snippet_ref_is_a_reject(tmp_path: Path, snippet_root: Path, ref: str) -> None:
    row = snippet_row().replace("{file: code/snippets.py, section: count}", ref)
    path = write_suite(tmp_path, row)
    reason = single_reject(load_suite(path, files_root=snippet_root), path)
    assert "'code_snippet_ref' must be a mapping with non-empty 'file' and 'section'" in reason


def test_the_stdlib_sample_snippet_questions_load(project_root: Path) -> None:
    load = load_suite(project_root / "data/samples/stdlib/multiple_choice.yaml")
    snippets = [c for c in load.cases if "code_snippet" in c.extra]
    assert load.rejects == [] and len(snippets) == 7
    for case in snippets:
        compile(case.extra["code_snippet"], case.case_id, "exec")  # each section is code on its own
