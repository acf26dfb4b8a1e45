"""Run a generated proof (a pytest file) under bubblewrap, with resource limits.

Every run gets a fresh temporary directory, the only writable place the code can see. The layout:

* ``bwrap --unshare-all --unshare-user``: new user, mount, pid, network (loopback only, no route out),
  ipc, uts and cgroup namespaces; ``--uid/--gid 65534`` inside; ``--cap-drop ALL`` and
  ``--disable-userns`` so the code can neither remount anything nor build a nested namespace to get
  capabilities back. (Without ``--cap-drop ALL``, bwrap started by root keeps every capability inside
  its user namespace and the code can ``mount -o remount,bind,rw /`` and write the host's files.)
* ``--ro-bind / /`` (the interpreter and the library under test are read-only), ``--dev /dev``,
  ``--proc /proc``, a private ``--tmpfs /tmp``, then ``--bind <workdir> <workdir>``;
* ``--clearenv`` plus a minimal PATH/HOME/LANG: no variable of the parent (tokens, keys) is inherited;
* ``--die-with-parent --new-session``.

Limits, applied in the child before ``exec`` of bwrap (inherited by everything inside):
``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` (soft, then SIGKILL a second later), ``RLIMIT_FSIZE`` (files and
captured output) and a process limit. ``RLIMIT_NPROC`` does not bind root (the kernel exempts uid 0,
and a user namespace maps the sandbox's uid back to the caller's), so as root the process limit is a
``pids`` cgroup made for the run (``pids.max``); as another user it is ``RLIMIT_NPROC`` counted on top
of the processes that user already has. A wall-clock timeout kills the process group (and bwrap's
``--die-with-parent`` takes the pid namespace with it); whatever is left in the run's cgroup is
killed too. Output goes to files outside the sandbox and comes back truncated.

No fallback: without bwrap (``apt-get install bubblewrap``) or without a way to enforce the process
limit, :class:`SandboxError` is raised and nothing runs.
"""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Outcome = Literal["passed", "failed", "error", "timeout", "killed"]

_SIGNAL_NAMES = {getattr(signal, n): n for n in ("SIGKILL", "SIGXCPU", "SIGXFSZ", "SIGSEGV", "SIGABRT", "SIGTERM")}
_INSTALL_HINT = "apt-get install -y bubblewrap"
_counter = itertools.count()


class SandboxError(RuntimeError):
    """The sandbox cannot be set up as required; nothing was run."""


@dataclass(frozen=True)
class SandboxSettings:
    """Where and how tightly a proof runs.

    Attributes:
        python: Interpreter of the environment that holds the library under test.
        timeout_s: Wall-clock limit for the whole run (the process group is killed after it).
        memory_mb: Address-space limit (``RLIMIT_AS``) per process.
        max_processes: Processes and threads the run may have at once.
        cpu_s: CPU-seconds limit (``RLIMIT_CPU``) per process.
        file_mb: Largest file the run may write, captured output included (``RLIMIT_FSIZE``).
        max_output_chars: Captured stdout/stderr kept per stream; the rest is cut with a marker.
        sandbox_uid: The uid/gid the code sees inside (65534, "nobody").
        extra_ro_binds: More host paths to show read-only (e.g. an environment living under /tmp,
            which the private /tmp would otherwise hide).
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


@dataclass
class Execution:
    """What one sandboxed run did.

    ``outcome``: ``passed`` (exit 0), ``failed`` (pytest exit 1: a test failed), ``error`` (collection or
    usage error, or the sandbox could not start the program), ``timeout`` (wall clock), ``killed`` (ended
    by a signal, e.g. SIGXCPU for CPU time). ``limit`` names a limit that was seen to bind, if any:
    ``wall_clock``, ``cpu``, ``memory``, ``processes``, ``file_size``.
    """

    exit_code: int | None
    passed: bool
    outcome: Outcome
    stdout: str
    stderr: str
    duration_s: float
    limit: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    return shutil.which("bwrap")


def require_bwrap() -> str:
    """The bubblewrap binary; raises :class:`SandboxError` with the install command when absent."""
    path = bwrap_path()
    if path is None:
        raise SandboxError(
            f"bubblewrap (bwrap) is not installed; proofs never run unsandboxed. Install it: {_INSTALL_HINT}"
        )
    return path


def run_pytest(test_source: str, filename: str, settings: SandboxSettings | None = None) -> Execution:
    """Run one pytest file in a fresh sandbox: ``python -m pytest -q -p no:cacheprovider -x <file>``.

    Files named ``*.evidence.json`` that the test writes in its working directory come back in
    ``Execution.artifacts``.
    """
    settings = settings or SandboxSettings()
    _check_filename(filename)
    argv = [str(settings.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", filename]
    return run_in_sandbox({filename: test_source}, argv, settings, collect_suffix=".evidence.json")


def run_python(
    source: str,
    filename: str,
    settings: SandboxSettings | None = None,
    *,
    collect_suffix: str = ".json",
    max_artifact_bytes: int = 16 * 2**20,
) -> Execution:
    """Run one Python script in a fresh sandbox (used for the once-per-suite environment probe)."""
    settings = settings or SandboxSettings()
    _check_filename(filename)
    argv = [str(settings.python), filename]
    return run_in_sandbox(
        {filename: source}, argv, settings, collect_suffix=collect_suffix, max_artifact_bytes=max_artifact_bytes
    )


def run_in_sandbox(
    files: Mapping[str, str],
    argv: Sequence[str],
    settings: SandboxSettings,
    *,
    collect_suffix: str | None = None,
    max_artifact_bytes: int = 256 * 1024,
) -> Execution:
    """Write ``files`` into a fresh working directory and run ``argv`` there under bubblewrap."""
    bwrap = require_bwrap()
    base = Path(tempfile.mkdtemp(prefix="rp_sandbox_"))
    cgroup: _PidsCgroup | None = None
    try:
        workdir = base / "work"
        workdir.mkdir()
        for name, text in files.items():
            _check_filename(name)
            (workdir / name).write_text(text, encoding="utf-8")
        cgroup, nproc_limit = _process_limit(settings.max_processes)
        command = _bwrap_command(bwrap, workdir, argv, settings)
        out_path, err_path = base / "stdout.txt", base / "stderr.txt"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            started = time.monotonic()
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=str(workdir),
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                start_new_session=True,
                preexec_fn=_limits_preexec(settings, nproc_limit, cgroup),
            )
            timed_out = False
            try:
                process.wait(timeout=settings.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process.pid)
                process.wait(timeout=10)
            duration = time.monotonic() - started
        if cgroup is not None:
            cgroup.kill_all()
        pids_hit = cgroup.limit_hit() if cgroup is not None else False
        stdout = _read_truncated(out_path, settings.max_output_chars)
        stderr = _read_truncated(err_path, settings.max_output_chars)
        artifacts = _collect(workdir, collect_suffix, max_artifact_bytes) if collect_suffix else {}
        return _execution(process.returncode, timed_out, stdout, stderr, duration, pids_hit, artifacts)
    finally:
        if cgroup is not None:
            cgroup.remove()
        shutil.rmtree(base, ignore_errors=True)


def _check_filename(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or "\x00" in name:
        raise ValueError(f"sandbox file names must be plain names, got {name!r}")


def _bwrap_command(bwrap: str, workdir: Path, argv: Sequence[str], settings: SandboxSettings) -> list[str]:
    """The bwrap argv: namespaces, read-only root, private /tmp, writable workdir, cleared env."""
    uid = str(settings.sandbox_uid)
    python_bin = str(Path(settings.python).parent)
    command = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid", uid,
        "--gid", uid,
        "--disable-userns",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
    ]
    for path in _hidden_by_tmp(settings):
        command += ["--ro-bind", str(path), str(path)]
    command += [
        "--bind", str(workdir), str(workdir),
        "--chdir", str(workdir),
        "--clearenv",
        "--setenv", "PATH", f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "--setenv", "HOME", str(workdir),
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "PYTHONHASHSEED", "0",
        "--setenv", "PYTHONNOUSERSITE", "1",
        "--",
    ]  # fmt: skip
    return command + list(argv)


def _hidden_by_tmp(settings: SandboxSettings) -> list[Path]:
    """Host paths under /tmp the run needs (the private /tmp hides them): the env of ``python``, extras."""
    needed: list[Path] = list(settings.extra_ro_binds)
    python = Path(settings.python)
    for candidate in (python, python.resolve()):
        if str(candidate).startswith("/tmp/"):
            needed.append(candidate.parent.parent)  # <env>/bin/python -> <env>
    unique: list[Path] = []
    for path in needed:
        if path.exists() and path not in unique:
            unique.append(path)
    return unique


def _limits_preexec(settings: SandboxSettings, nproc_limit: int | None, cgroup: _PidsCgroup | None):
    """Return the function the child runs before exec: join the run's cgroup, set the rlimits.

    It only makes system calls (no locks, no imports), so it is safe in the forked child.
    """
    memory = settings.memory_mb * 2**20
    cpu = (settings.cpu_s, settings.cpu_s + 1)
    fsize = settings.file_mb * 2**20
    procs_file = cgroup.procs_file if cgroup is not None else None

    def preexec() -> None:
        if procs_file is not None:
            fd = os.open(procs_file, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, cpu)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc_limit is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))

    return preexec


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --------------------------------------------------------------------------------------------------
# The process limit


class _PidsCgroup:
    """A ``pids`` cgroup (v1 or v2) made for one run, with ``pids.max`` set."""

    def __init__(self, path: Path, max_processes: int) -> None:
        self.path = path
        self.procs_file = str(path / "cgroup.procs")
        path.mkdir()
        (path / "pids.max").write_text(str(max_processes))

    def limit_hit(self) -> bool:
        """True when a fork was refused because of ``pids.max``."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max" and int(value or 0) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

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


def _pids_cgroup_parent() -> Path | None:
    """The writable directory where this process may create a child ``pids`` cgroup, if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:  # cgroup v1: "N:pids:/path"
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/pids") / rel.lstrip("/")
            if (candidate / "cgroup.procs").exists() and os.access(candidate, os.W_OK):
                return candidate
    for line in lines:  # cgroup v2: "0::/path", with pids enabled for children
        if line.startswith("0::"):
            candidate = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                enabled = (candidate / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in enabled and os.access(candidate, os.W_OK):
                return candidate
    return None


def _process_limit(max_processes: int) -> tuple[_PidsCgroup | None, int | None]:
    """Choose how the process limit is enforced: a pids cgroup, else RLIMIT_NPROC (not as root)."""
    parent = _pids_cgroup_parent()
    if parent is not None:
        name = f"rp_sandbox_{os.getpid()}_{next(_counter)}_{time.monotonic_ns()}"
        try:
            return _PidsCgroup(parent / name, max_processes), None
        except OSError:
            pass
    if os.geteuid() == 0:
        raise SandboxError(
            "cannot enforce the process limit: running as root, where RLIMIT_NPROC does not apply, "
            "and no writable pids cgroup was found (/sys/fs/cgroup/pids or a cgroup v2 with +pids)"
        )
    return None, _user_process_count(os.getuid()) + max_processes


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


# --------------------------------------------------------------------------------------------------
# Results


def _read_truncated(path: Path, max_chars: int) -> str:
    size = path.stat().st_size if path.exists() else 0
    with open(path, "rb") as handle:
        data = handle.read(max_chars * 4)
    text = data.decode("utf-8", errors="replace")
    if len(text) > max_chars or size > len(data):
        text = text[:max_chars] + f"\n[... truncated: {size} bytes in all]"
    return text


def _collect(workdir: Path, suffix: str, max_bytes: int) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(workdir.iterdir()):
        if path.name.endswith(suffix) and path.is_file() and not path.is_symlink():
            with open(path, "rb") as handle:
                found[path.name] = handle.read(max_bytes).decode("utf-8", errors="replace")
    return found


def _execution(
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
    )
