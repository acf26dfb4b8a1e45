"""A key given twice in one YAML mapping is refused with the file and both lines (YAML loaders keep the last silently)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.yaml_file import read_yaml
from retrieval_pipeline.core.registry import load_registry


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_a_case_with_question_twice_is_refused_with_file_and_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "suite.yaml",
        """
        benchmarks:
        - id: a
          question: How do I parse JSON?
          benchmark_type: api_understanding
          question: How do I write CSV?
        """,
    )
    with pytest.raises(InputError) as refused:
        read_yaml(path, "suite file")
    message = str(refused.value)
    assert message.startswith(f"file {path}: suite file refused: duplicate key 'question' at line 5, column 3 (first at line 3)")


def test_two_datasets_of_one_name_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "datasets.yaml",
        """
        datasets:
          same:
            suites: [a.yaml]
            corpus: {introspect_modules: [json]}
          same:
            suites: [b.yaml]
            corpus: {introspect_modules: [csv]}
        """,
    )
    with pytest.raises(InputError, match=r"dataset registry refused: duplicate key 'same' at line 5, column 3 \(first at line 2\)") as e:
        load_registry(path, root=tmp_path)
    assert str(path) in str(e.value)


def test_anchors_aliases_merge_overrides_and_equal_keys_in_different_mappings_stay_allowed(tmp_path: Path) -> None:
    path = write(
        tmp_path / "ok.yaml",
        """
        base: &base {min: 0.5, severity: WARN}
        a: *base
        b: {<<: *base, min: 0.7}
        c: {min: 0.1}
        """,
    )
    assert read_yaml(path, "x") == {
        "base": {"min": 0.5, "severity": "WARN"},
        "a": {"min": 0.5, "severity": "WARN"},
        "b": {"min": 0.7, "severity": "WARN"},
        "c": {"min": 0.1},
    }
