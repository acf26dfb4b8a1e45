"""``kind: python`` plug-ins run in a worker process: an exit, a crash or a hang fails that retriever, naming it (issue 39.1).

Before, ``os._exit(0)`` in a plug-in's ``search`` ended the whole process with exit code 0, ``sys.exit(0)`` gave
``FAILED: 0``, and a ``search`` that slept held the run for as long as it slept.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs
from retrieval_pipeline.core.retrieval.runner import build_retriever, run_retriever
from retrieval_pipeline.core.retrieval.spec import RetrieverContext

DOCS = [Document("a", "alpha text"), Document("b", "beta text")]
HERE = "retrieval_pipeline_tests.fakes.plugins"  # standard library only: a worker imports it fast


def _registry(tmp_path: Path, factory: str, timeout: float | None = None) -> object:
    deadline = f", timeout_s: {timeout}" if timeout is not None else ""
    path = tmp_path / "retrievers.yaml"
    path.write_text(
        textwrap.dedent(f"""
        retrievers:
          plug: {{kind: python, factory: "{HERE}:{factory}"{deadline}}}
        """)
    )
    return load_retriever_specs(path)


def _search(tmp_path: Path, factory: str, timeout: float | None = None) -> object:
    registry = _registry(tmp_path, factory, timeout)
    build_retriever(registry, "toy", "plug", DOCS, tmp_path / "idx", tmp_path / "cache", lambda spec: None)
    return run_retriever(registry, "toy", "plug", DOCS, {"q": "alpha"}, tmp_path / "idx", tmp_path / "cache", lambda s: None, 3, 0)


def test_a_fine_plug_in_answers_through_its_worker(tmp_path: Path) -> None:
    assert _search(tmp_path, "Fine").timed.run == {"q": [("a", 1.0)]}


def test_os_exit_in_search_fails_the_retriever_naming_it(tmp_path: Path) -> None:
    with pytest.raises(
        RetrieverError, match=r"retriever 'plug' \(python\) on dataset 'toy': its worker process ended during search\(\) with exit code 0"
    ):
        _search(tmp_path, "ExitsInSearch")


def test_sys_exit_in_search_fails_the_retriever_saying_so(tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match=r"'plug' .*search\(\) failed in the plug-in: SystemExit: the plug-in called sys.exit\(0\)"):
        _search(tmp_path, "SysExitsInSearch")


def test_a_hanging_search_is_stopped_at_its_deadline(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(RetrieverError, match=r"'plug' .*search\(\) did not answer within timeout_s=1 s"):
        _search(tmp_path, "SleepsInSearch", timeout=1)
    assert time.monotonic() - start < 30


def test_an_exit_in_build_fails_the_build_naming_the_retriever(tmp_path: Path) -> None:
    registry = _registry(tmp_path, "ExitsInBuild")
    with pytest.raises(RetrieverError, match=r"'plug' .*ended during build\(\) with exit code 7"):
        build_retriever(registry, "toy", "plug", DOCS, tmp_path / "idx", tmp_path / "cache", lambda spec: None)


def test_a_hanging_factory_is_stopped_at_its_deadline(tmp_path: Path) -> None:
    registry = _registry(tmp_path, "sleeps_in_factory", timeout=1)
    with pytest.raises(RetrieverError, match=r"the factory did not answer within timeout_s=1 s"):
        build_retriever(registry, "toy", "plug", DOCS, tmp_path / "idx", tmp_path / "cache", lambda spec: None)


def test_timeout_s_has_a_default_and_must_be_positive(tmp_path: Path) -> None:
    from retrieval_pipeline.core.retrieval.kinds.python import DEFAULT_TIMEOUT_S

    assert _registry(tmp_path, "Fine").get("plug").timeout_s == DEFAULT_TIMEOUT_S
    assert "timeout_s" in _registry(tmp_path, "Fine", timeout=0).errors["plug"]


def test_the_deadline_is_not_part_of_the_index_identity(tmp_path: Path) -> None:
    registry = _registry(tmp_path, "Fine", timeout=5)
    build_retriever(registry, "toy", "plug", DOCS, tmp_path / "idx", tmp_path / "cache", lambda spec: None)
    again = _registry(tmp_path, "Fine", timeout=9)
    done = run_retriever(again, "toy", "plug", DOCS, {"q": "x"}, tmp_path / "idx", tmp_path / "cache", lambda s: None, 3, 0)
    assert done.timed.run == {"q": [("a", 1.0)]}


def test_the_load_after_a_build_reuses_the_worker_and_a_failed_one_is_not_reused(tmp_path: Path) -> None:
    from retrieval_pipeline.core.retrieval import plugin_process

    registry = _registry(tmp_path, "Fine")
    build_retriever(registry, "toy", "plug", DOCS, tmp_path / "idx", tmp_path / "cache", lambda spec: None)
    idle = [w.process.pid for w in plugin_process._IDLE.values()]
    loaded = registry.get("plug").load(RetrieverContext("toy", DOCS, tmp_path / "idx" / "plug", tmp_path, lambda s: None, lambda s: None))
    assert loaded.worker.process.pid in idle  # no second start, no second import
    loaded.close()
    with pytest.raises(RetrieverError):
        _search(tmp_path, "ExitsInSearch")
    assert all(w.alive() for w in plugin_process._IDLE.values())
