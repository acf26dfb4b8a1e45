"""Run a generated proof (a pytest file) under bubblewrap, as an unprivileged user, with resource limits.

**Who runs it.** When the verifier runs as root, the forked child leaves root before it executes bwrap:
it clears its groups and switches to the host user ``sandbox_uid``/gid (65534, "nobody"/"nogroup"), so
every permission check the kernel makes for the proof is made for that user, never for root (a 0600 file
of root's stays unreadable even where it is visible). bwrap then runs unprivileged:
``--unshare-all --unshare-user`` (new user, mount, pid, network (loopback only, no route out), ipc, uts and
cgroup namespaces) with ``--uid/--gid 65534`` inside, which maps to host 65534, and ``--cap-drop ALL`` plus
``--disable-userns`` (no remounting, no nested namespace to get capabilities back). When the verifier
is not root, bwrap runs as the caller and the sandbox uid maps back to the caller; then only the file
layout keeps the caller's other files out. ``sandbox_uid`` 0 is refused.

**What it sees.** Nothing of the host but the explicit read-only layout of
:mod:`~retrieval_pipeline.core.services.sandbox.layout` (the system, a minimal /etc, the interpreter's environment,
a private /tmp and the run's working directory), with a seccomp filter; the root is a tmpfs remounted
read-only.

An environment path the sandbox user cannot reach on the host (a base Python under root's 0700 home)
is bind-mounted by the still-root child, inside a private mount namespace of its own, onto a staging
folder of the run; bwrap shows it from there. The host's mount table is never changed, and permission
checks inside that tree are still made for the sandbox user.

**Limits**, set in the child before it drops root and executes bwrap (inherited by everything inside):
``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` (soft, then SIGKILL a second later), ``RLIMIT_FSIZE`` (files and
captured output) and a process limit, with the run's pids and memory cgroups
(:mod:`~retrieval_pipeline.core.services.sandbox.cgroups`). A wall-clock timeout kills the process group (and
bwrap's ``--die-with-parent`` takes the pid namespace with it); whatever is left in the run's cgroups is
killed too. Output goes to files outside the sandbox and comes back truncated
(:mod:`~retrieval_pipeline.core.services.sandbox.results`).

**Batches.** :func:`run_pytest_batch` runs the proofs of one question in one such sandbox
(:mod:`~retrieval_pipeline.core.services.sandbox.batch`: the runner, its settings, the results it sends back).

**Output hygiene.** What a proof printed or recorded passes through
:func:`~retrieval_pipeline.core.services.sandbox.redaction.safe_text` before it becomes evidence.

No fallback: without bwrap (``apt-get install bubblewrap``) or without a way to enforce the process
limit, :class:`SandboxError` is raised and nothing runs.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from retrieval_pipeline.core.services.sandbox.batch import BATCH_CONFIG_FILE, BATCH_RUNNER_FILE, batch_files, batch_results
from retrieval_pipeline.core.services.sandbox.cgroups import MemoryCgroup, PidsCgroup, memory_cgroup, process_limit
from retrieval_pipeline.core.services.sandbox.layout import bwrap_command, environment_paths, reachable, seccomp_program
from retrieval_pipeline.core.services.sandbox.results import Execution, collect_artifacts, make_execution, read_truncated
from retrieval_pipeline.core.services.sandbox.settings import PYTEST_ARGS, PYTEST_ENV, SandboxError, SandboxSettings

_INSTALL_HINT = "apt-get install -y bubblewrap"
_counter = itertools.count()
#: bwrap's own environment: nothing of the pipeline's (bwrap is pid 1 of the sandbox, /proc/1/environ).
_BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_LIBC.unshare.argtypes = [ctypes.c_int]


@dataclass(frozen=True)
class _RunPlan:
    """How one run is set up: who runs bwrap, what is staged, how the process limit binds."""

    drop_to: int | None  # host uid/gid to switch to before exec (None: stay the caller, who is not root)
    staged: tuple[tuple[Path, Path], ...]  # (host path, staging mount point), mounted by the root child
    cgroup: PidsCgroup | None
    nproc_limit: int | None
    memory: MemoryCgroup | None = None  # the run's memory cgroup (None: only RLIMIT_AS per process)


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    return shutil.which("bwrap")


def require_bwrap() -> str:
    """The bubblewrap binary; raises :class:`SandboxError` with the install command when absent."""
    path = bwrap_path()
    if path is None:
        raise SandboxError(f"bubblewrap (bwrap) is not installed; proofs never run unsandboxed. Install it: {_INSTALL_HINT}")
    return path


def run_pytest(test_source: str, filename: str, settings: SandboxSettings | None = None) -> Execution:
    """Run one pytest file in a fresh sandbox: ``python -m pytest -q -p no:cacheprovider -x <file>``.

    Files named ``*.evidence.json`` that the test writes in its working directory come back in
    ``Execution.artifacts``.
    """
    settings = settings or SandboxSettings()
    _check_filename(filename)
    argv = [str(settings.python), "-m", "pytest", *PYTEST_ARGS, filename]
    return run_in_sandbox({filename: test_source}, argv, settings, collect_suffix=".evidence.json", env=PYTEST_ENV)


def run_pytest_batch(tests: Sequence[tuple[str, str]], settings: SandboxSettings | None = None) -> list[Execution | None]:
    """Run several pytest files in ONE sandbox, each in a process of its own, as :func:`run_pytest` would.

    A runner inside the sandbox imports pytest and runs one throw-away session first (plugins imported,
    modules rewritten; what it left is then frozen out of garbage collection), then, for each file in
    turn: kills every other process of the sandbox, empties the working directory, ``/tmp`` and
    ``/dev/shm``, checks that ``/dev`` and the folders leading to the working directory are as they were,
    writes the file alone into the working directory and forks a process that runs
    ``python -m pytest -q -p no:cacheprovider -x <file>`` there, as :func:`run_pytest` does (a new
    session; stdout and stderr to files of its own that it cannot reach by name; the runner's
    descriptors closed; the interpreter's exit, non-daemon threads and atexit included). The limits of
    :class:`SandboxSettings` bind each file's process as they would bind its own sandbox (the CPU time
    and address space are per process; the wall-clock limit is the runner's, per file); the process
    limit counts the runner too. What a file left behind cannot reach the next one, nor its result:
    each result is sent through a descriptor only the runner holds (it is not dumpable: no other process
    of the sandbox can read its memory or descriptors, and seccomp refuses ptrace and pidfd_getfd), and
    nothing in the runner's memory (which each forked proof sees a copy of) lets a proof forge one.

    Args:
        tests: ``(test_source, filename)`` per file. A name may repeat (each file runs alone in the emptied working
            directory, and its result is matched to it by position), but not be the runner's own files' names.
        settings: The sandbox; default: this interpreter.

    Returns:
        Per file, its :class:`Execution` (``outcome``, exit code, stdout, stderr, ``*.evidence.json``
        artifacts, as :func:`run_pytest` gives them), or None when the batch did not report it: the
        runner was stopped or killed, a file changed what the next one would see, the sandbox could not
        start, or the process or memory limit bound somewhere in the batch (it could not be told whose). Run such
        a file alone, with :func:`run_pytest`.

    Raises:
        SandboxError: As :func:`run_pytest` (no bwrap, ``sandbox_uid`` 0, no way to limit processes).
    """
    settings = settings or SandboxSettings()
    names = [filename for _, filename in tests]
    for name in names:
        _check_filename(name)
    if {BATCH_RUNNER_FILE, BATCH_CONFIG_FILE} & set(names):
        raise ValueError(f"the files of a batch need names other than {BATCH_RUNNER_FILE}, {BATCH_CONFIG_FILE}: {names}")
    if not tests:
        return []
    files, argv, batch = batch_files(tests, settings)
    execution, channel = sandboxed(files, argv, batch, channel_bytes=settings.file_mb * 2**20, env=PYTEST_ENV)
    if execution.pids_limit_hit or execution.memory_limit_hit:
        return [None] * len(tests)
    return batch_results(channel, len(tests), settings.max_output_chars)


def run_in_sandbox(
    files: Mapping[str, str],
    argv: Sequence[str],
    settings: SandboxSettings,
    *,
    collect_suffix: str | None = None,
    max_artifact_bytes: int = 256 * 1024,
    env: Mapping[str, str] | None = None,
) -> Execution:
    """Write ``files`` into a fresh working directory and run ``argv`` there under bubblewrap (``env`` added to the
    sandbox's own environment)."""
    return sandboxed(files, argv, settings, collect_suffix=collect_suffix, max_artifact_bytes=max_artifact_bytes, env=env)[0]


def sandboxed(
    files: Mapping[str, str],
    argv: Sequence[str],
    settings: SandboxSettings,
    *,
    collect_suffix: str | None = None,
    max_artifact_bytes: int = 256 * 1024,
    channel_bytes: int | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Execution, bytes]:
    """As :func:`run_in_sandbox`; with ``channel_bytes``, also a result channel and what came through it.

    The channel is a private file of the run's folder (never shown in the sandbox), open on a descriptor
    whose number is appended to ``argv``: bwrap passes it to its child only (pid 1 closes it), so only the
    program ``argv`` starts holds it. Its first ``channel_bytes`` come back.
    """
    bwrap = require_bwrap()
    drop_to = _host_user(settings)
    extras = tuple(Path(os.path.abspath(p)) for p in settings.extra_ro_binds if os.path.lexists(p))
    binds = environment_paths(Path(settings.python)) + extras
    base = Path(tempfile.mkdtemp(prefix="rp_sandbox_"))
    plan: _RunPlan | None = None
    channel: int | None = None
    try:
        workdir = _prepare_base(base, files, drop_to)
        plan = _plan(base, binds, settings, drop_to)
        if channel_bytes is not None:
            channel = os.open(base / "channel", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
            argv = [*argv, str(channel)]
        command = bwrap_command(bwrap, base, workdir, argv, settings, binds, dict(plan.staged), env)
        execution = _run(command, base, workdir, settings, plan, collect_suffix, max_artifact_bytes, channel)
        received = os.pread(channel, channel_bytes, 0) if channel is not None and channel_bytes else b""
        return execution, received
    finally:
        if channel is not None:
            os.close(channel)
        if plan is not None and plan.cgroup is not None:
            plan.cgroup.remove()
        if plan is not None and plan.memory is not None:
            plan.memory.remove()
        shutil.rmtree(base, ignore_errors=True)


def _run(
    command: list[str],
    base: Path,
    workdir: Path,
    settings: SandboxSettings,
    plan: _RunPlan,
    collect_suffix: str | None,
    max_artifact_bytes: int,
    channel: int | None = None,
) -> Execution:
    """Start bwrap with the plan's limits, wait (bounded by the timeout), then read what it left.

    bwrap starts with an environment of its own (:data:`_BWRAP_ENV`) and reads its arguments from a
    descriptor (``--args``), so pid 1 of the sandbox shows neither the pipeline's environment nor the
    layout in ``/proc/1/environ`` and ``/proc/1/cmdline`` (only the program's own argv, as its process does).
    """
    out_path, err_path = base / "stdout.txt", base / "stderr.txt"
    args_fd = _anonymous_file(base, "args")
    extra_fds: list[int] = []
    try:
        options = command.index("--")  # the options go through the descriptor; the program and its argv follow
        seccomp = seccomp_program()
        if seccomp is not None:
            seccomp_fd = _anonymous_file(base, "seccomp")
            os.write(seccomp_fd, seccomp)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            extra_fds.append(seccomp_fd)
            command = [*command[:options], "--seccomp", str(seccomp_fd), *command[options:]]
            options += 2
        os.write(args_fd, b"".join(os.fsencode(arg) + b"\0" for arg in command[1:options]))
        os.lseek(args_fd, 0, os.SEEK_SET)
        pass_fds = (args_fd, *extra_fds) if channel is None else (args_fd, *extra_fds, channel)
        with _private_file(out_path) as out, _private_file(err_path) as err:
            started = time.monotonic()
            try:
                process = subprocess.Popen(
                    [command[0], "--args", str(args_fd), *command[options:]],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=str(workdir),
                    env=_BWRAP_ENV,
                    start_new_session=True,
                    pass_fds=pass_fds,
                    preexec_fn=_child_setup(settings, plan),
                )
            except subprocess.SubprocessError as exc:
                what = f"cgroup, limits, staging mounts, switch to uid {plan.drop_to}"
                raise SandboxError(f"the sandbox's process could not be set up ({what}): {exc}") from exc
            timed_out = False
            try:
                process.wait(timeout=settings.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process.pid)
                process.wait(timeout=10)
            duration = time.monotonic() - started
    finally:
        for fd in (args_fd, *extra_fds):
            os.close(fd)
    for cgroup in (plan.cgroup, plan.memory):
        if cgroup is not None:
            cgroup.kill_all()
    pids_hit = plan.cgroup.limit_hit() if plan.cgroup is not None else False
    memory_hit = plan.memory.limit_hit() if plan.memory is not None else False
    stdout = read_truncated(out_path, settings.max_output_chars)
    stderr = read_truncated(err_path, settings.max_output_chars)
    artifacts = collect_artifacts(workdir, collect_suffix, max_artifact_bytes) if collect_suffix else {}
    execution = make_execution(process.returncode, timed_out, stdout, stderr, duration, pids_hit, artifacts)
    if memory_hit:  # the kernel's OOM killer ended a process of the run: memory, unless another limit was seen
        execution.memory_limit_hit = True
        execution.limit = execution.limit or "memory"
    return execution


def _anonymous_file(folder: Path, tag: str) -> int:
    """A private file (0600) in ``folder`` that only the returned descriptor reaches (O_TMPFILE, else made and unlinked)."""
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:  # a file system without O_TMPFILE (overlayfs before Linux 6.6)
        path = folder / f"{tag}_{next(_counter)}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        path.unlink()
        return fd


def _check_filename(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or "\x00" in name:
        raise ValueError(f"sandbox file names must be plain names, got {name!r}")


def _private_file(path: Path):
    """Open ``path`` for writing, mode 0600 (the run's output is read back by the verifier only)."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


# --------------------------------------------------------------------------------------------------
# Who runs it, and where


def _host_user(settings: SandboxSettings) -> int | None:
    """The host uid/gid to drop to before exec: ``sandbox_uid`` when we are root, else None."""
    if settings.sandbox_uid == 0:
        raise SandboxError("sandbox_uid 0 would run proofs as root; use an unprivileged uid (65534)")
    return settings.sandbox_uid if os.geteuid() == 0 else None


def _prepare_base(base: Path, files: Mapping[str, str], drop_to: int | None) -> Path:
    """Fill the run's folder: the working directory with ``files``, owned by the sandbox user.

    ``base`` (0711) can be walked through but not listed by the sandbox user; the working directory is
    the sandbox user's.
    """
    base.chmod(0o711)
    workdir = base / "work"
    workdir.mkdir()
    workdir.chmod(0o700)
    for name, text in files.items():
        _check_filename(name)
        target = workdir / name
        target.write_text(text, encoding="utf-8")
        target.chmod(0o644)
        if drop_to is not None:
            os.chown(target, drop_to, drop_to)
    if drop_to is not None:
        os.chown(workdir, drop_to, drop_to)
    return workdir


def _plan(base: Path, binds: Sequence[Path], settings: SandboxSettings, drop_to: int | None) -> _RunPlan:
    """Stage what the sandbox user cannot reach (root only), and choose how the process limit binds."""
    staged: list[tuple[Path, Path]] = []
    if drop_to is not None:
        unreachable = [p for p in binds if not reachable(p, drop_to, drop_to)]
        if unreachable:
            (base / "stage").mkdir()
            (base / "stage").chmod(0o711)  # explicit modes: the umask may be stricter
        for index, host in enumerate(unreachable):
            point = base / "stage" / str(index)
            if host.is_dir():
                point.mkdir()
            else:
                point.touch()
            point.chmod(0o755 if host.is_dir() else 0o644)
            staged.append((host, point))
    cgroup, nproc_limit = process_limit(settings.max_processes, drop_to)
    try:
        memory = memory_cgroup(cgroup, (settings.total_memory_mb or settings.memory_mb) * 2**20)
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    return _RunPlan(drop_to, tuple(staged), cgroup, nproc_limit, memory)


def _child_setup(settings: SandboxSettings, plan: _RunPlan) -> Callable[[], None]:
    """Return what the forked child runs before exec: join the cgroup, set rlimits, stage, leave root.

    The order matters: joining the cgroup and the bind mounts need root, and the rlimits are set while
    the hard limits can still be lowered for good. It only makes system calls (no imports, no locks), so
    it is safe in the forked child.
    """
    memory = settings.memory_mb * 2**20
    cpu = (settings.cpu_s, settings.cpu_s + 1)
    fsize = settings.file_mb * 2**20
    procs_files = [c.procs_file for c in (plan.cgroup, plan.memory) if c is not None and c.procs_file is not None]
    mounts = [(os.fsencode(host), os.fsencode(point)) for host, point in plan.staged]
    nproc_limit, drop_to = plan.nproc_limit, plan.drop_to

    def setup() -> None:
        for procs_file in procs_files:
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
        if mounts:
            _stage_mounts(mounts)
        if drop_to is not None:
            os.setgroups([])
            os.setresgid(drop_to, drop_to, drop_to)
            os.setresuid(drop_to, drop_to, drop_to)
            if os.getuid() == 0 or os.geteuid() == 0:
                raise OSError("still root after dropping privileges")

    return setup


def _stage_mounts(mounts: Sequence[tuple[bytes, bytes]]) -> None:
    """In a private mount namespace of this (root) process: bind each host path on its staging point."""
    if _LIBC.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if _LIBC.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    for host, point in mounts:
        if _LIBC.mount(host, point, None, _MS_BIND | _MS_REC, None) != 0:
            raise OSError(ctypes.get_errno(), f"mount --rbind {host!r}")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
