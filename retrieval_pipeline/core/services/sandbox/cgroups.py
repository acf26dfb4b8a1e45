"""The limits on all of a run's processes together: a ``pids`` cgroup and a memory cgroup made for the run.

The process limit is a ``pids`` cgroup made for the run (``pids.max``): the child writes its own pid to
``cgroup.procs`` while it is still root, and every process of the run inherits the cgroup. Without a
writable pids cgroup it is ``RLIMIT_NPROC`` counted on top of the processes the run's user (the sandbox
user, or the non-root caller) already has; as root without a way to drop privileges no limit could
bind, and nothing runs. Whatever is left in the run's cgroups after the run is killed.

The memory of all the run's processes together is limited too, by a memory cgroup of the run
(``memory_mb``, or ``total_memory_mb``; no swap): on cgroup v1 a directory of its own in the memory
hierarchy, joined as the pids cgroup is; on cgroup v2 the run's pids cgroup itself, where its parent
enables ``+memory``. Past the limit the kernel's OOM killer ends a process of the run
(``Execution.memory_limit_hit``, ``limit`` "memory"). Where no memory cgroup can be made (not root, a
read-only or absent memory controller) only ``RLIMIT_AS`` binds, per process: n processes may then use n
times ``memory_mb``.

Concurrent runs share no cgroup: each is named by pid, a counter and the clock, and removed after the run.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

from retrieval_pipeline.core.services.sandbox.settings import SandboxError

_counter = itertools.count()


def _counted(events: Path, key: str) -> bool:
    """True when the cgroup file ``events`` (``key value`` lines) counts ``key`` above 0; False when unreadable."""
    try:
        for line in events.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and int(value or 0) > 0:
                return True
    except (OSError, ValueError):
        pass
    return False


class PidsCgroup:
    """A ``pids`` cgroup (v1 or v2) made for one run, with ``pids.max`` set."""

    def __init__(self, path: Path, max_processes: int) -> None:
        self.path = path
        self.procs_file = str(path / "cgroup.procs")
        path.mkdir()
        (path / "pids.max").write_text(str(max_processes))

    def limit_hit(self) -> bool:
        """True when a fork was refused because of ``pids.max``."""
        return _counted(self.path / "pids.events", "max")

    def members(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, rounds: int = 50) -> None:
        """SIGKILL whatever is still in the cgroup (bounded: ``rounds`` × 0.05 s)."""
        for _ in range(rounds):
            pids = self.members()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(40):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


class MemoryCgroup(PidsCgroup):
    """The memory limit of all of a run's processes together: ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1).

    On cgroup v2 it is the run's pids cgroup itself (a process is in one v2 cgroup; ``procs_file`` is
    None, the run joins it as its pids cgroup); on v1 a cgroup of its own in the memory hierarchy. Swap
    is allowed none (``memory.swap.max`` 0, or ``memory.memsw.limit_in_bytes`` equal to the limit where
    the kernel accounts swap). Past the limit the kernel reclaims, then its OOM killer ends a process of
    the run (the largest), never one outside it.
    """

    def __init__(self, path: Path, limit_bytes: int, *, v2: bool, own: bool) -> None:
        self.path = path
        self.v2 = v2
        self.own = own
        self.procs_file = str(path / "cgroup.procs") if own else None
        if own:
            path.mkdir()
        try:
            if v2:
                (path / "memory.max").write_text(str(limit_bytes))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                if (path / "memory.memsw.limit_in_bytes").exists():
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        except OSError:
            if own:
                path.rmdir()
            raise

    def limit_hit(self) -> bool:
        """True when the kernel killed a process of the run for want of memory (``oom_kill`` > 0)."""
        return _counted(self.path / ("memory.events" if self.v2 else "memory.oom_control"), "oom_kill")

    def remove(self) -> None:
        if self.own:
            super().remove()


def _writable_cgroup(controller: str, marker: str) -> tuple[Path, bool] | None:
    """Where this process may make a child cgroup of ``controller``: (its writable v1 directory, False), or
    (its v2 directory with ``+<controller>`` for its children, True); None when neither is there.

    A v1 directory counts where it holds ``marker`` (a file that only that controller's hierarchy has).
    """
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:  # cgroup v1: "N:<controller>:/path"
        _, controllers, rel = line.split(":", 2)
        if controller in controllers.split(","):
            candidate = Path("/sys/fs/cgroup") / controller / rel.lstrip("/")
            if (candidate / marker).exists() and os.access(candidate, os.W_OK):
                return candidate, False
    for line in lines:  # cgroup v2: "0::/path", with the controller enabled for children
        if line.startswith("0::"):
            candidate = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                enabled = (candidate / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if controller in enabled and os.access(candidate, os.W_OK):
                return candidate, True
    return None


def memory_cgroup_parent() -> tuple[Path, bool] | None:
    """Where a run's memory cgroup can be made: (the writable v1 ``memory`` directory of this process, False),
    or (a v2 directory with ``+memory`` for its children, True); None when neither is there.

    The v2 case only counts where the run's pids cgroup is made in that same directory.
    """
    return _writable_cgroup("memory", "memory.limit_in_bytes")


def pids_cgroup_parent() -> Path | None:
    """The writable directory where this process may create a child ``pids`` cgroup, if any."""
    found = _writable_cgroup("pids", "cgroup.procs")
    return None if found is None else found[0]


def memory_cgroup(pids: PidsCgroup | None, limit_bytes: int) -> MemoryCgroup | None:
    """The run's memory cgroup, or None where none can be made (then RLIMIT_AS binds per process only)."""
    found = memory_cgroup_parent()
    if found is None:
        return None
    parent, v2 = found
    try:
        if v2:
            if pids is None or pids.path.parent != parent:
                return None
            return MemoryCgroup(pids.path, limit_bytes, v2=True, own=False)
        name = f"rp_sandbox_{os.getpid()}_{next(_counter)}_{time.monotonic_ns()}"
        return MemoryCgroup(parent / name, limit_bytes, v2=False, own=True)
    except OSError:
        return None


def process_limit(max_processes: int, drop_to: int | None) -> tuple[PidsCgroup | None, int | None]:
    """Choose how the process limit is enforced: a pids cgroup, else RLIMIT_NPROC of the run's user.

    The run's user is ``drop_to`` (the sandbox user) when we are root, else the caller. RLIMIT_NPROC
    does not bind uid 0, so it is refused for a run that would stay root.
    """
    parent = pids_cgroup_parent()
    if parent is not None:
        name = f"rp_sandbox_{os.getpid()}_{next(_counter)}_{time.monotonic_ns()}"
        try:
            return PidsCgroup(parent / name, max_processes), None
        except OSError:
            pass
    run_uid = drop_to if drop_to is not None else os.getuid()
    if run_uid == 0:
        raise SandboxError(
            "cannot enforce the process limit: the run would stay root, where RLIMIT_NPROC does not apply, "
            "and no writable pids cgroup was found (/sys/fs/cgroup/pids or a cgroup v2 with +pids)"
        )
    return None, _user_process_count(run_uid) + max_processes


def _user_process_count(uid: int) -> int:
    """Processes (thread-group leaders) the user has now; RLIMIT_NPROC counts them too."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count
