"""What a sandboxed run is given: its settings, how every proof is started, and the error when it cannot run."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: How every proof runs: ``python -m pytest <these> <file>`` (alone, or in a batch).
PYTEST_ARGS = ("-q", "-p", "no:cacheprovider", "-x")
#: The environment every proof's pytest runs with, besides the sandbox's own: no plugin is loaded from the
#: environment's entry points (anyio, xdist, ...). A proof is a plain pytest file; each such plugin would cost an
#: import in every sandbox and an entry-point scan in every proof, and could change how a proof runs.
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


class SandboxError(RuntimeError):
    """The sandbox cannot be set up as required; nothing was run."""


@dataclass(frozen=True)
class SandboxSettings:
    """Where and how tightly a proof runs.

    Attributes:
        python: Interpreter of the environment that holds the library under test.
        timeout_s: Wall-clock limit for the whole run (the process group is killed after it).
        memory_mb: Address-space limit (``RLIMIT_AS``) per process, and the memory of all the run's
            processes together (a memory cgroup of the run, where one can be made; see
            :func:`~retrieval_pipeline.core.services.sandbox.cgroups.memory_cgroup_parent`), unless ``total_memory_mb`` says otherwise.
        max_processes: Processes and threads the run may have at once.
        cpu_s: CPU-seconds limit (``RLIMIT_CPU``) per process.
        file_mb: Largest file the run may write, captured output included (``RLIMIT_FSIZE``); also the
            size of the private /tmp.
        max_output_chars: Captured stdout/stderr kept per stream; the rest is cut with a marker.
        sandbox_uid: The uid/gid the code runs as: inside the sandbox, and on the host too when the
            verifier is root (65534, "nobody"/"nogroup"). Never 0.
        extra_ro_binds: More host paths to show read-only, at their own path (those that do not exist are
            skipped; permission checks inside them are made for the sandbox user).
        total_memory_mb: The memory cgroup's limit (RAM, swap allowed none), when not ``memory_mb``.
        preload: Packages of the library under test (``google.adk``) whose modules a batch's runner imports
            once before it forks the proofs: those that two or more of the batch's files name. An import
            that warns, prints, starts a thread or fails is left to each proof, as without it
            (:func:`~retrieval_pipeline.core.services.sandbox.batch.preload_names`).
    """

    python: Path = field(default_factory=lambda: Path(sys.executable))
    timeout_s: float = 20.0
    memory_mb: int = 1024
    max_processes: int = 64
    cpu_s: int = 20
    file_mb: int = 64
    max_output_chars: int = 20_000
    sandbox_uid: int = 65534
    extra_ro_binds: tuple[Path, ...] = ()
    total_memory_mb: int | None = None
    preload: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # a relative interpreter is read against the current folder here, not inside the sandbox (where bwrap
        # would fail to find it); the path is not resolved, so a venv's bin/python link keeps its venv
        object.__setattr__(self, "python", Path(os.path.abspath(self.python)))
