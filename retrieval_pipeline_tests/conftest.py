"""Shared fixtures: where the real data lives, and skips that say why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RETRIEVAL_PIPELINE_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data beside the project (``../shared/data``); skips when a fresh clone lacks it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (clone the project beside shared/ to run this test)")
    return SHARED_DATA
