"""Qwen2.5-Coder-1.5B joined from its 22 packages and served by llama.cpp: opt-in (``make test-local-qwen``).

Skips, saying why, when llama.cpp's server or a part is missing. The joined file is kept in
``data/cache/models`` (``RETRIEVAL_PIPELINE_MODEL_CACHE`` moves it), so only the first run joins it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.services.llm.local_models import (
    QWEN_CODER_1_5B,
    local_model_path,
    local_model_unavailable_reason,
    serve_local_model,
)
from retrieval_pipeline.core.services.llm.local_server import LocalLlamaServer
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.services.split_packages import default_cache_dir, file_sha256
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.llm_prover import GeneratedCheck, LLMProver, as_check
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.verify import verify_question

# the question the LLM prover's tests put to the scripted fake, here put to the real model
from retrieval_pipeline_tests.core.verifier.proofs.test_llm_prover import OPTIONS, QUESTION

pytestmark = [pytest.mark.local_llm, pytest.mark.integration]

MODEL = "qwen2.5-coder-1.5b"
CACHE = default_cache_dir()


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLlamaServer]:
    reason = local_model_unavailable_reason(MODEL)
    if reason:
        pytest.skip(f"local model unavailable: {reason}")
    with serve_local_model(MODEL, CACHE, startup_timeout_s=300) as running:
        yield running


def client_for(server: LocalLlamaServer, tmp_path: Path) -> LLMClient:
    settings = LLMSettings(
        base_url=server.base_url, model=server.model or MODEL, timeout_s=900, max_retries=1, max_concurrency=1, max_tokens=1024
    )
    return LLMClient(settings, LLMCache(tmp_path / "llm.sqlite"))


def test_the_joined_model_is_the_pinned_one_and_answers_json(server, tmp_path):
    path = local_model_path(MODEL, CACHE)
    assert file_sha256(path) == QWEN_CODER_1_5B.sha256 and server.model == path.stem
    with client_for(server, tmp_path) as client:
        call = client.complete_json(LLMProver(client).messages(decompose("counter", QUESTION, OPTIONS)[0]), GeneratedCheck)
    assert call.ok, call.error
    # the JSON's code is a check(), or a script that asserts at top level, which becomes one (as_check)
    assert "def check" in as_check(call.value["test_code"])  # type: ignore[index]


def test_the_real_model_as_prover_never_contradicts_the_standard_library(server, sandbox: SandboxSettings, tmp_path):
    """Whatever the 1.5B model writes, the check + refutation guard keeps it from making A false or B, C true."""
    with client_for(server, tmp_path) as client:
        prover = LLMProver(client, library="the Python standard library")
        verdict = verify_question("counter", QUESTION, OPTIONS, "A", OfflineProver(), sandbox, fallback=prover)
    states = {e.letter: e.state for e in verdict.evidence}
    assert states["A"] != "false" and states["B"] != "true" and states["C"] != "true", verdict.evidence
    # asked about the open options: its result where it settled one, else a note of its try beside the first prover's
    asked = [e.letter for e in verdict.evidence if e.prover == prover.name or f"{prover.name} did not settle" in (e.note or "")]
    assert asked, [(e.letter, e.prover, e.state, e.note) for e in verdict.evidence]
    assert verdict.verdict in ("Valid", "Unverifiable"), verdict.reasons
