"""Hostile YAML (alias bombs, deep nesting, huge files) fails fast with a short message naming the file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.yaml_file import (
    DEFAULT_MAX_YAML_BYTES,
    MAX_ALIAS_NODES,
    MAX_YAML_BYTES_ENV,
    read_yaml,
    read_yaml_mapping,
)
from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry

#: The classic "billion laughs": 9 levels of 9 aliases, ~543 bytes, 9**9 strings when expanded.
BOMB_ANCHORS = "\n".join(
    [' a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f" {b}: &{b} [{','.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi")]
)
SUITE_BOMB = f"lol:\n{BOMB_ANCHORS}\nbenchmarks: [{{id: x, benchmark_type: api_understanding, question: '*i'}}]\n"
REGISTRY_BOMB = f"defaults:\n thresholds:\n  x: {{min: 0.1}}\nlol:\n{BOMB_ANCHORS}\ndatasets:\n  d:\n    suites: [s.yaml]\n    junk: *i\n"
SHORT = 400  # characters: a message that names the file and the problem, never the input


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal(call, *args) -> str:
    """The message of the InputError ``call(*args)`` raises, checked to come within 2 seconds."""
    started = time.monotonic()
    with pytest.raises(InputError) as info:
        call(*args)
    assert time.monotonic() - started < 2.0
    return str(info.value)


def test_the_bombs_are_small() -> None:
    assert len(SUITE_BOMB) < 700 and len(REGISTRY_BOMB) < 700


def test_alias_bomb_in_a_suite_fails_fast_and_short(tmp_path: Path) -> None:
    path = write(tmp_path, "benchmark.yaml", SUITE_BOMB)
    message = refusal(load_suite, path)
    assert str(path) in message and "alias" in message and f"{MAX_ALIAS_NODES:,}" in message
    assert len(message) < SHORT and "lol" not in message


def test_alias_bomb_in_the_registry_fails_fast_and_short(tmp_path: Path) -> None:
    path = write(tmp_path, "datasets.yaml", REGISTRY_BOMB)
    message = refusal(load_registry, path, tmp_path)
    assert str(path) in message and "alias" in message and len(message) < SHORT and "lol" not in message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: &a [*a]\n", "recursive alias"),
        ("a: *nowhere\n", "undefined alias"),
        ("[" * 200_000 + "]" * 200_000, "nesting deeper than"),  # the C parser would overflow the stack
        ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 300)), "nesting deeper than"),
    ],
)
def test_hostile_structures_are_refused(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path, "suite.yaml", text)
    message = refusal(read_yaml, path, "suite file")
    assert str(path) in message and words in message and len(message) < SHORT


def test_a_long_token_in_a_syntax_error_is_cut_short(tmp_path: Path) -> None:
    path = write(tmp_path, "suite.yaml", "a: !!python/object:" + "x" * 100_000 + " {}\n")
    message = refusal(read_yaml, path, "suite file")
    assert str(path) in message and len(message) < SHORT + len(str(path))


def test_a_file_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:  # sparse: 30 MB that would take a while to read and parse
        handle.truncate(DEFAULT_MAX_YAML_BYTES + 10 * 1024 * 1024)
    message = refusal(load_suite, path)
    assert str(path) in message and "over the limit" in message and MAX_YAML_BYTES_ENV in message


def test_the_limit_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "suite.yaml", "benchmarks: []\n# " + "x" * 2000 + "\n")
    assert read_yaml(path, "suite file") == {"benchmarks": []}
    monkeypatch.setenv(MAX_YAML_BYTES_ENV, "1000")
    assert "over the limit of 1,000 bytes" in refusal(read_yaml, path, "suite file")
    assert read_yaml(path, "suite file", max_bytes=10_000) == {"benchmarks": []}


def test_a_device_is_not_read(tmp_path: Path) -> None:
    assert "not a regular file" in refusal(read_yaml, Path("/dev/zero"), "suite file")


def test_a_few_aliases_stay_allowed(tmp_path: Path) -> None:
    path = write(tmp_path, "datasets.yaml", "t: &t {x: {min: 0.5}}\na: *t\nb: *t\n")
    assert read_yaml_mapping(path) == {"t": {"x": {"min": 0.5}}, "a": {"x": {"min": 0.5}}, "b": {"x": {"min": 0.5}}}


def test_the_project_registry_still_loads_with_its_anchor() -> None:
    doc = read_yaml_mapping(DEFAULT_REGISTRY_PATH, "dataset registry")
    datasets = doc["datasets"]
    assert datasets["python_nq"]["thresholds"] == datasets["stdlib"]["thresholds"] == {"hit_rate@5": {"min": 0.80, "severity": "WARN"}}
    registry = load_registry(DEFAULT_REGISTRY_PATH)
    assert set(datasets) == set(registry.names)


def test_registry_validation_errors_are_short_and_never_echo_the_input(tmp_path: Path) -> None:
    junk = "J" * 50_000
    text = (
        f"datasets:\n  d:\n    suites: [s.yaml]\n    corpus: {{introspect_modules: [json]}}\n    retrieval: {{depth: {junk}}}\n"
        f"    negatives:\n      per_query_bm25: -1\n      ? {junk}\n      : 1\n"
    )  # an unknown key 50,000 characters long
    path = write(tmp_path, "datasets.yaml", text)
    registry = load_registry(path, root=tmp_path)
    message = refusal(registry.get, "d")
    assert str(path) in message and "dataset 'd'" in message and "retrieval.depth" in message
    assert junk not in message and len(message) < 1000
