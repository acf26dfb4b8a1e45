"""What a sandboxed run did: its :class:`Execution`, read back from the files it left (output, artifacts, exit status).

Output goes to files outside the sandbox and comes back truncated; which limit bound is told from the
exit status, the output and the cgroups' counters.
"""

from __future__ import annotations

import os
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Outcome = Literal["passed", "failed", "error", "timeout", "killed"]

_SIGNAL_NAMES = {getattr(signal, n): n for n in ("SIGKILL", "SIGXCPU", "SIGXFSZ", "SIGSEGV", "SIGABRT", "SIGTERM")}


@dataclass
class Execution:
    """What one sandboxed run did.

    ``outcome``: ``passed`` (exit 0), ``failed`` (pytest exit 1: a test failed), ``error`` (collection or
    usage error, or the sandbox could not start the program), ``timeout`` (wall clock), ``killed`` (ended
    by a signal, e.g. SIGXCPU for CPU time). ``limit`` names a limit that was seen to bind, if any:
    ``wall_clock``, ``cpu``, ``memory``, ``processes``, ``file_size``. The texts are raw: pass them
    through :func:`~retrieval_pipeline.core.services.sandbox.redaction.safe_text` before they go anywhere a person or a database reads them.
    ``pids_limit_hit`` says the run's process limit refused a fork, even when another limit is named.
    """

    exit_code: int | None
    passed: bool
    outcome: Outcome
    stdout: str
    stderr: str
    duration_s: float
    limit: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    pids_limit_hit: bool = False  # the run's pids cgroup refused a fork at some point, whatever the outcome
    memory_limit_hit: bool = False  # the run's memory cgroup killed a process for memory (OOM), whatever the outcome


def read_truncated(path: Path, max_chars: int) -> str:
    size = path.stat().st_size if path.exists() else 0
    with open(path, "rb") as handle:
        data = handle.read(max_chars * 4)
    return truncated_text(data, size, max_chars)


def truncated_text(data: bytes, size: int, max_chars: int) -> str:
    """The first bytes of an output (``size`` bytes in all) as text of at most ``max_chars``, with a marker when cut."""
    text = data.decode("utf-8", errors="replace")
    if len(text) > max_chars or size > len(data):
        text = text[:max_chars] + f"\n[... truncated: {size} bytes in all]"
    return text


def collect_artifacts(workdir: Path, suffix: str, max_bytes: int) -> dict[str, str]:
    """Regular files named ``*<suffix>`` in the workdir (never followed through a symlink), each capped."""
    found: dict[str, str] = {}
    for path in sorted(workdir.iterdir()):
        if not path.name.endswith(suffix):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with open(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                found[path.name] = handle.read(max_bytes).decode("utf-8", errors="replace")
    return found


def make_execution(
    returncode: int | None,
    timed_out: bool,
    stdout: str,
    stderr: str,
    duration: float,
    pids_hit: bool,
    artifacts: dict[str, str],
) -> Execution:
    limit: str | None = None
    outcome: Outcome
    if timed_out:
        outcome, limit = "timeout", "wall_clock"
    elif returncode is None or returncode < 0 or returncode >= 128:
        outcome = "killed"
        signo = -returncode if returncode is not None and returncode < 0 else (returncode or 0) - 128
        limit = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "file_size"}.get(signo)
        if limit is None and signo in _SIGNAL_NAMES:
            stderr += f"\n[sandbox: ended by {_SIGNAL_NAMES[signo]}]"
    elif returncode == 0:
        outcome = "passed"
    elif returncode == 1 and not stderr.lstrip().startswith("bwrap:"):
        outcome = "failed"
    else:
        outcome = "error"
    if limit is None and outcome in ("failed", "error"):
        if "MemoryError" in stdout or "MemoryError" in stderr:
            limit = "memory"
        elif pids_hit:
            limit = "processes"
    if limit is None and pids_hit:
        limit = "processes"
    return Execution(
        exit_code=returncode,
        passed=outcome == "passed",
        outcome=outcome,
        stdout=stdout,
        stderr=stderr,
        duration_s=round(duration, 3),
        limit=limit,
        artifacts=artifacts,
        pids_limit_hit=pids_hit,
    )
