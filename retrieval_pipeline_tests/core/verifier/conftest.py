"""Fixtures shared by the verifier's tests."""

from __future__ import annotations

import pytest

from retrieval_pipeline_tests.core.conftest import require_sandbox
from retrieval_pipeline_tests.core.verifier import fake_adk


@pytest.fixture(scope="session")
def acme_offline(tmp_path_factory):
    """``(sandbox settings, offline prover)`` on a fresh fake ADK environment (skips without a sandbox).

    Session-scoped: four modules built this same environment and probed it (test_doc_claims,
    test_list_parameter_claims, test_library_probe, test_snippet_observation); nothing changes it."""
    require_sandbox()
    return fake_adk.offline_prover(tmp_path_factory.mktemp("acme"))
