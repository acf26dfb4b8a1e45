"""Sandbox availability: tests that run code in bubblewrap skip, saying why, when it cannot run here.

In CI (``CI=true``) they fail instead: a CI job that cannot start bubblewrap must not pass by skipping
every sandbox test.
"""

from __future__ import annotations

import functools
import os
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


def in_ci() -> bool:
    """True when the ``CI`` environment variable says so (``true``, ``1``, ``yes``; any case)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_sandbox(problem: str | None = None, *, ci: bool | None = None) -> None:
    """Skip the calling test when the sandbox cannot run here; in CI, fail it.

    Args:
        problem: Why the sandbox cannot run; defaults to :func:`sandbox_problem`.
        ci: Whether this is CI; defaults to :func:`in_ci`.
    """
    problem = sandbox_problem() if problem is None else problem
    if not problem:
        return
    if in_ci() if ci is None else ci:
        pytest.fail(f"CI=true, and the sandbox cannot run: {problem}", pytrace=False)
    pytest.skip(problem)


@pytest.fixture
def sandbox() -> SandboxSettings:
    """Default sandbox settings; skips the test when bubblewrap cannot run (fails it in CI)."""
    require_sandbox()
    return SandboxSettings()
