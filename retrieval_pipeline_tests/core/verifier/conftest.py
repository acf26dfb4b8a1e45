"""Fixtures shared by the verifier's tests."""

from __future__ import annotations

import pytest

from retrieval_pipeline_tests.core.conftest import require_sandbox
from retrieval_pipeline_tests.core.verifier import fake_adk


@pytest.fixture(scope="module")
def acme_offline(tmp_path_factory):
    """``(sandbox settings, offline prover)`` on a fresh fake ADK environment (skips without a sandbox)."""
    require_sandbox()
    return fake_adk.offline_prover(tmp_path_factory.mktemp("acme"))
