"""A dataset name is one safe folder name, and outputs stay under the out dir whatever the name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import PathRefused, check_name
from retrieval_pipeline.core.registry import load_registry

BAD_NAMES = [
    "../../escape",
    "../../../../escape",
    "evil/sub/part",
    "a..b",
    "..",
    ".",
    ".hidden",
    "",
    " ",
    "a b",
    "back\\slash",
    "nul\0",
    "-flag",
    "x" * 101,
]
GOOD_NAMES = ["stdlib", "adk_v1.24.1", "nq-open", "_private", "A1"]


def registry_with(tmp_path: Path, key: str) -> Path:
    """A registry with one dataset under the YAML key ``key`` (written as is)."""
    path = tmp_path / "datasets.yaml"
    path.write_text(f"datasets:\n  {key}:\n    suites: [s.yaml]\n    corpus: {{introspect_modules: [json]}}\n")
    return path


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_dataset_name_refuses_the_registry_naming_file_and_name(tmp_path: Path, name: str) -> None:
    path = registry_with(tmp_path, json.dumps(name))  # a JSON string is a YAML string
    with pytest.raises(InputError) as info:
        load_registry(path, root=tmp_path)
    message = str(info.value)
    assert str(path) in message and "dataset name" in message and len(message) < 400
    assert repr(name[:120]).strip("'\"")[:20] in message


@pytest.mark.parametrize(("key", "kind"), [("123", "int"), ("~", "NoneType"), ("1.5", "float"), ("true", "bool")])
def test_a_dataset_name_that_is_not_a_string_is_refused(tmp_path: Path, key: str, kind: str) -> None:
    path = registry_with(tmp_path, key)
    with pytest.raises(InputError, match=f"must be a string, got {kind}"):
        load_registry(path, root=tmp_path)


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names_load(tmp_path: Path, name: str) -> None:
    assert load_registry(registry_with(tmp_path, name), root=tmp_path).names == [name]
    assert check_name(name) == name


@pytest.fixture()
def settings(tmp_path: Path):
    from retrieval_pipeline.defs.resources import PipelineSettings

    return PipelineSettings(out_dir=str(tmp_path / "out"))


@pytest.mark.parametrize("name", ["../../escape", "../../../../escape", "evil/sub/part", "..", "", "/abs"])
def test_output_paths_refuse_a_name_that_slipped_through(settings, name: str) -> None:
    with pytest.raises(PathRefused):
        settings.export_path(name, "qrels.txt")
    with pytest.raises(PathRefused):
        settings.index_dir(name, "bm25")
    with pytest.raises(PathRefused):
        settings.export_path("stdlib", name or "..")


def test_output_paths_of_good_names_stay_under_the_out_dir(settings, tmp_path: Path) -> None:
    out = (tmp_path / "out").resolve()
    assert settings.export_path("adk_v1.24.1", "hybrid_minmax_a0.5.run") == out / "exports" / "adk_v1.24.1" / "hybrid_minmax_a0.5.run"
    assert settings.index_dir("stdlib", "bm25") == out / "indexes" / "stdlib" / "bm25"


def test_an_out_dir_symlinked_elsewhere_is_fine_but_a_planted_symlink_inside_is_refused(tmp_path: Path) -> None:
    from retrieval_pipeline.defs.resources import PipelineSettings

    real, elsewhere = tmp_path / "big_disk", tmp_path / "elsewhere"
    real.mkdir()
    elsewhere.mkdir()
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    settings = PipelineSettings(out_dir=str(tmp_path / "out"))
    assert settings.export_path("stdlib", "qrels.txt") == real / "exports" / "stdlib" / "qrels.txt"
    (real / "exports").mkdir()
    (real / "exports" / "planted").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(PathRefused, match="outside the allowed root"):
        settings.export_path("planted", "qrels.txt")
