"""Sandbox availability: tests that run code in bubblewrap skip, saying why, when it cannot run here."""

from __future__ import annotations

import functools
import subprocess

import pytest

from retrieval_pipeline.core.verifier.sandbox import SandboxError, SandboxSettings, bwrap_path, run_pytest


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """None when a trivial proof runs in the sandbox; otherwise the reason it cannot."""
    if bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed: apt-get install -y bubblewrap"
    try:
        execution = run_pytest("def test_ok():\n    assert True\n", "test_probe.py", SandboxSettings(timeout_s=30))
    except (SandboxError, OSError, subprocess.SubprocessError) as exc:
        return f"the sandbox cannot start here: {exc}"
    if not execution.passed:
        return f"a trivial proof does not pass in the sandbox ({execution.outcome}): {execution.stderr[-500:]}"
    return None


@pytest.fixture
def sandbox() -> SandboxSettings:
    """Default sandbox settings; skips the test when bubblewrap cannot run."""
    problem = sandbox_problem()
    if problem:
        pytest.skip(problem)
    return SandboxSettings()
