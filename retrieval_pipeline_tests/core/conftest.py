"""Sandbox availability: tests that run code in bubblewrap skip, saying why, when it cannot run here.

In CI (``CI=true``) they fail instead: a CI job that cannot start bubblewrap must not pass by skipping
every sandbox test. :func:`require_sandbox` fails them itself; :func:`pytest_runtest_makereport` catches the
skips that do not go through it (a ``skipif`` on ``shutil.which("bwrap")``, a security test that needs
root): in CI, any skip in a security module, or any skip in this folder whose reason names the sandbox or
bubblewrap, is reported as a failure with the skip's reason.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.services.sandbox.bubblewrap import bwrap_path, run_pytest
from retrieval_pipeline.core.services.sandbox.settings import SandboxError, SandboxSettings


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


#: Modules whose every test is a security test: none of them may skip in CI.
SECURITY_MODULES = frozenset({"test_sandbox_security.py"})
#: A skip reason that says the sandbox could not run.
SANDBOX_REASON = re.compile(r"bubblewrap|bwrap|sandbox", re.IGNORECASE)


def ci_failure(nodeid: str, reason: str, ci: bool) -> str | None:
    """The failure a skipped test becomes in CI, or None when its skip may stand.

    Args:
        nodeid: The test's node id (``path/to/test_x.py::test_y[param]``).
        reason: Why it was skipped.
        ci: Whether this is CI.
    """
    if not ci:
        return None
    if Path(nodeid.split("::", 1)[0]).name in SECURITY_MODULES or SANDBOX_REASON.search(reason):
        return f"CI=true, and a sandbox security test was skipped instead of run: {reason}"
    return None


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason of a skipped report (``longrepr`` is ``(path, line, "Skipped: reason")`` for skips)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """In CI, turn the skip of a sandbox or security test in this folder into a failure (see :func:`ci_failure`)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    message = ci_failure(item.nodeid, _skip_reason(report), in_ci())
    if message:
        report.outcome = "failed"
        report.longrepr = message


@pytest.fixture(scope="module")
def helpers() -> dict[str, object]:
    """The proof-side helpers (the prelude and :data:`ATOM_SOURCE` every atom proof runs), executed in this process."""
    from retrieval_pipeline.core.verifier.proofs.atom_proofs import ATOM_SOURCE
    from retrieval_pipeline.core.verifier.proofs.proof_source import PRELUDE_SOURCE

    namespace: dict[str, object] = {"__name__": "atoms_under_test"}
    exec(compile(PRELUDE_SOURCE + "\n" + ATOM_SOURCE, "<atoms>", "exec"), namespace)
    return namespace
