"""Shared fixtures: where the real data lives, and skips that say why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RETRIEVAL_PIPELINE_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# ranx, the reference the parity tests hold our metrics, fusion and tests to, runs its Numba kernels as the plain
# Python they are written in. Compiling them costs about 105 s of CPU on a fresh venv (Numba's cache is empty
# there), more than every parity test takes interpreted; the numbers are the same code's. Set
# NUMBA_DISABLE_JIT=0 to compare against the compiled kernels.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")
# The verdict cache's HMAC key goes where `make test` puts it (the project's DAGSTER_HOME), also when pytest is run
# without make: never into the user's ~/.config (tests that name a key of their own still set RP_VERDICT_CACHE_KEY).
if not os.environ.get("RP_VERDICT_CACHE_KEY") and not os.environ.get("DAGSTER_HOME"):
    os.environ["RP_VERDICT_CACHE_KEY"] = str(PROJECT_ROOT / ".dagster_home" / "verdict_cache.key")
# Parallel workers share the cores: each gets its share of threads for onnxruntime (RETRIEVAL_PIPELINE_THREADS)
# and for torch, FAISS and BLAS (OMP_NUM_THREADS), set before any of them is imported. With every library's
# default (a thread per core in each worker) the threads spin against each other: two workers embedding on two
# cores spent about 1.5x the CPU time of one thread each.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").isdigit():
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    os.environ.setdefault("RETRIEVAL_PIPELINE_THREADS", _share)
    os.environ.setdefault("OMP_NUM_THREADS", _share)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``heavy`` (a minute or more on 2 cores) start first, the rest keep their order.

    ``make test`` runs the suite on every core, a file per worker at a time, in this order (pytest-xdist,
    ``-n auto --dist loadfile --no-loadscope-reorder``); a long test that started last would leave the
    other workers idle while it runs alone.
    """
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable sort


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data beside the project (``../shared/data``); skips when a fresh clone lacks it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (clone the project beside shared/ to run this test)")
    return SHARED_DATA
