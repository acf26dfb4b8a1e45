"""What a killed run leaves behind, and the sweep that removes it: only what a dead process owned.

Every run's folder (``rp_sandbox_<pid>_<start>_...`` under the temporary folder) and cgroups (``rp_sandbox_<pid>_<start>_...``
in the pids and memory hierarchies) are named by their owner: the verifier's process id and its start time (clock
ticks since boot, ``/proc/<pid>/stat``), so a process id the kernel gave again to another process is not mistaken for
the owner. A run removes them when it ends; a run killed (SIGKILL, a crash) leaves them, with the workdir's tmpfs still
mounted. :func:`sweep` (run once per process, before its first sandbox) removes those whose owner is dead: the mounts
under the folder are detached, the cgroup's processes killed, then the folder and the cgroup removed. Those of a live
process (another verifier running now) are left alone, and so is anything not named so.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: The prefix of every run's folder and cgroups.
PREFIX = "rp_sandbox_"
_OWNED = re.compile(rf"^{PREFIX}(\d+)_(\d+)_")
_MNT_DETACH = 2
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_swept = threading.Lock()
_done: list[bool] = []


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (field 22 of ``/proc/<pid>/stat``), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None


def owner_tag(pid: int | None = None) -> str:
    """``<pid>_<start>`` of ``pid`` (default: this process): what names its runs' folders and cgroups."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}_{start_time(pid) or 0}"


def owner_alive(name: str) -> bool | None:
    """Whether the process that owns ``name`` (``rp_sandbox_<pid>_<start>_...``) still runs; None: not such a name."""
    match = _OWNED.match(name)
    if match is None:
        return None
    pid, start = int(match.group(1)), int(match.group(2))
    return start_time(pid) == start


def _unmount_under(folder: Path) -> None:
    """Detach every mount at or under ``folder`` (deepest first), as /proc/self/mountinfo lists them."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")
            if point == str(folder) or point.startswith(f"{folder}/"):
                points.append(point)
    for point in sorted(points, key=len, reverse=True):
        _LIBC.umount2(os.fsencode(point), _MNT_DETACH)


def _kill_and_remove(cgroup: Path) -> bool:
    for _ in range(40):
        try:
            pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            cgroup.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.05)
    return False


def sweep(temp_dir: Path | None, cgroup_parents: Sequence[Path]) -> list[str]:
    """Remove the run folders and cgroups whose owner is dead; returns the paths removed.

    Args:
        temp_dir: Where the run folders are; None: the temporary folder.
        cgroup_parents: Where the run cgroups are (the pids and memory cgroup folders of this process).
    """
    removed: list[str] = []
    folder = Path(temp_dir or tempfile.gettempdir())
    try:
        entries = [p for p in folder.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        entries = []
    for path in entries:
        if owner_alive(path.name) is False and path.is_dir() and not path.is_symlink():
            _unmount_under(path)
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(str(path))
    for parent in cgroup_parents:
        try:
            groups = [p for p in parent.iterdir() if p.name.startswith(PREFIX) and p.is_dir()]
        except OSError:
            continue
        for group in groups:
            if owner_alive(group.name) is False and _kill_and_remove(group):
                removed.append(str(group))
    return removed


def sweep_once(cgroup_parents: Callable[[], Sequence[Path]]) -> None:
    """:func:`sweep` of the temporary folder and ``cgroup_parents()``, the first time this process asks (every
    sandboxed run asks)."""
    with _swept:
        if _done:
            return
        _done.append(True)
    sweep(None, cgroup_parents())
