"""Benchmark scripts are files, not modules of the project: ``load_benchmark`` imports one for its tests."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="session")
def load_benchmark() -> Callable[[str], ModuleType]:
    """``load("name.py")``: that script of ``benchmarks/`` as module ``name_benchmark`` (registered in
    ``sys.modules``, for its dataclasses), with ``benchmarks/`` on ``sys.path`` while it loads (for ``dev_eval``)."""

    def load(filename: str) -> ModuleType:
        name = f"{Path(filename).stem}_benchmark"
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / filename)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(BENCHMARKS))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(BENCHMARKS))
        return module

    return load
