"""The registry is parsed once per process: partitions and assets share one copy until its files change."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, DEFAULT_RETRIEVERS_PATH, registry_at
from retrieval_pipeline.core.registry import load as registry_module


def _copy(tmp_path: Path) -> Path:
    shutil.copy(DEFAULT_RETRIEVERS_PATH, tmp_path / "retrievers.yaml")
    path = tmp_path / "datasets.yaml"
    shutil.copy(DEFAULT_REGISTRY_PATH, path)
    return path


def test_one_copy_per_process_while_the_files_are_unchanged(tmp_path: Path, monkeypatch) -> None:
    path = _copy(tmp_path)
    calls = []
    real = registry_module.load_registry
    monkeypatch.setattr(registry_module, "load_registry", lambda p: calls.append(p) or real(p))
    first = registry_at(path)
    assert registry_at(str(path)) is first and registry_at(path) is first
    assert len(calls) == 1


def test_a_changed_registry_or_retrievers_file_is_read_again(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    first = registry_at(path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n# a comment\n")
    second = registry_at(path)
    assert second is not first and second.names == first.names
    retrievers = tmp_path / "retrievers.yaml"
    stat = retrievers.stat()
    os.utime(retrievers, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert registry_at(path) is not second


def test_partitions_and_assets_read_the_same_copy() -> None:
    from retrieval_pipeline.defs import partitions
    from retrieval_pipeline.defs.resources import PipelineSettings

    assert PipelineSettings().registry() is partitions.REGISTRY
