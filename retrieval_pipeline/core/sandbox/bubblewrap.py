"""Run a generated proof (a pytest file) under bubblewrap, as an unprivileged user, with resource limits.

**Who runs it.** When the verifier runs as root, the forked child leaves root before it executes bwrap:
it clears its groups and switches to the host user ``sandbox_uid``/gid (65534, "nobody"/"nogroup"), so
every permission check the kernel makes for the proof is made for that user, never for root (a 0600 file
of root's stays unreadable even where it is visible). bwrap then runs unprivileged:
``--unshare-all --unshare-user`` (new user, mount, pid, network (loopback only, no route out), ipc, uts and
cgroup namespaces) with ``--uid/--gid 65534`` inside, which maps to host 65534, and ``--cap-drop ALL`` plus
``--disable-userns`` (no remounting, no nested namespace to get capabilities back). When the verifier
is not root, bwrap runs as the caller and the sandbox uid maps back to the caller; then only the file
layout below keeps the caller's other files out. ``sandbox_uid`` 0 is refused.

**What it sees.** Nothing of the host but this; the root is a tmpfs remounted read-only:

* ``/usr`` read-only; ``/bin``, ``/sbin``, ``/lib``, ``/lib32``, ``/lib64``, ``/libx32`` as on the host
  (symlinks into /usr on a merged-/usr system, read-only binds otherwise);
* a minimal ``/etc``: a generated ``passwd`` and ``group`` (root and the sandbox user only),
  ``nsswitch.conf`` and ``hosts``, plus the host's ``ld.so.cache`` and ``localtime``. No shadow,
  gshadow, sudoers, ssh keys, certificates or anything else of the host's /etc;
* the environment of ``python``, read-only, at its own path: the venv (the folder holding
  ``pyvenv.cfg``), the base installation it runs on (the prefix of the resolved interpreter, of every
  link on the way to it, and of pyvenv.cfg's ``home``; paths under /usr are already there), then
  ``extra_ro_binds``. Not the project: an editable install's source is not shown, and proofs need only
  the library under test. Parent folders of these paths exist, holding nothing else (e.g. ``/root``
  shows only ``.pyenv/versions/<v>`` when the interpreter lives there);
* ``--dev /dev``, ``--proc /proc`` (its own pid namespace), a private ``--tmpfs /tmp`` (capped at
  ``file_mb``), and the run's fresh working directory, read-write, owned by the sandbox user;
* ``--clearenv`` plus a minimal PATH/HOME/LANG: no variable of the parent (tokens, keys) is inherited;
  ``--die-with-parent --new-session``. bwrap itself, which stays in the sandbox as its pid 1, starts
  with a fixed environment of its own (``/proc/1/environ`` shows nothing of the pipeline's) and reads its
  options from a descriptor (``--args``: ``/proc/1/cmdline`` shows the program's argv only);
* a seccomp filter (bwrap's ``--seccomp``): ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp`` and
  ``pidfd_getfd`` fail with EPERM, as does any system call of another ABI (x86_64 and aarch64; elsewhere
  no filter). bwrap's pid 1 is dumpable by the sandbox user: without the filter a proof could attach to it.

An environment path the sandbox user cannot reach on the host (a base Python under root's 0700 home)
is bind-mounted by the still-root child, inside a private mount namespace of its own, onto a staging
folder of the run; bwrap shows it from there. The host's mount table is never changed, and permission
checks inside that tree are still made for the sandbox user.

**Limits**, set in the child before it drops root and executes bwrap (inherited by everything inside):
``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` (soft, then SIGKILL a second later), ``RLIMIT_FSIZE`` (files and
captured output) and a process limit. The process limit is a ``pids`` cgroup made for the run
(``pids.max``): the child writes its own pid to ``cgroup.procs`` while it is still root, and every
process of the run inherits the cgroup. Without a writable pids cgroup it is ``RLIMIT_NPROC`` counted on
top of the processes the run's user (the sandbox user, or the non-root caller) already has; as root
without a way to drop privileges no limit could bind, and nothing runs. A wall-clock timeout kills the
process group (and bwrap's ``--die-with-parent`` takes the pid namespace with it); whatever is left in
the run's cgroup is killed too. Output goes to files outside the sandbox and comes back truncated.
The memory of all the run's processes together is limited too, by a memory cgroup of the run
(``memory_mb``, or ``total_memory_mb``; no swap): on cgroup v1 a directory of its own in the memory
hierarchy, joined as the pids cgroup is; on cgroup v2 the run's pids cgroup itself, where its parent
enables ``+memory``. Past the limit the kernel's OOM killer ends a process of the run
(``Execution.memory_limit_hit``, ``limit`` "memory"). Where no memory cgroup can be made (not root, a
read-only or absent memory controller) only ``RLIMIT_AS`` binds, per process: n processes may then use n
times ``memory_mb``.

**Batches.** :func:`run_pytest_batch` runs the proofs of one question in one such sandbox: a runner
imports pytest once, runs a throw-away session, then forks one process per proof, each exactly as
:func:`run_pytest` would start it (same arguments, working directory, limits, outcome and output).
Between two proofs it kills every other process of the sandbox and empties everything writable (the
working directory, ``/tmp``, ``/dev/shm``), and it stops when ``/dev`` or the folders leading to the
working directory changed. Results travel through a descriptor only the runner holds: a file of the
host passed through bwrap (whose pid 1 closes it), closed in each proof's process before the proof runs;
the runner is not dumpable and holds no key a proof could copy (a forked proof sees the runner's memory
as it was). The runner is the real module ``files/batch_runner.py``, its settings a JSON file.
Whatever the batch did not report, the caller runs alone. Concurrent runs (several questions at once)
share nothing: each has its own temporary folder, bwrap namespaces, pids and memory cgroups (named by
pid, a counter and the clock; removed after the run). A batch's memory cgroup allows the runner's
``_RUNNER_MEMORY_MB`` on top of ``memory_mb``.

**Output hygiene.** :func:`redact_secrets` masks secret-looking text (password hashes, private key
blocks, ``*_KEY=``/token strings) and :func:`safe_text` redacts and caps; the verdict and the report
pass everything a proof printed or recorded through them before it becomes evidence.

No fallback: without bwrap (``apt-get install bubblewrap``) or without a way to enforce the process
limit, :class:`SandboxError` is raised and nothing runs.
"""

from __future__ import annotations

import base64
import ctypes
import dataclasses
import functools
import itertools
import json
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

Outcome = Literal["passed", "failed", "error", "timeout", "killed"]

_SIGNAL_NAMES = {getattr(signal, n): n for n in ("SIGKILL", "SIGXCPU", "SIGXFSZ", "SIGSEGV", "SIGABRT", "SIGTERM")}
_INSTALL_HINT = "apt-get install -y bubblewrap"
_counter = itertools.count()
#: How every proof runs: ``python -m pytest <these> <file>`` (alone, or in a batch).
_PYTEST_ARGS = ("-q", "-p", "no:cacheprovider", "-x")
_BATCH_RUNNER_FILE = "rp_batch_runner.py"
_BATCH_CONFIG_FILE = "rp_batch_config.json"
#: What a batch's memory cgroup allows on top of a proof's: the runner, warmed up (a forked proof shares its pages).
_RUNNER_MEMORY_MB = 192
#: The package holding the files that run inside the sandbox (the batch runner), read as resources.
_SANDBOX_FILES = "retrieval_pipeline.core.sandbox.files"
#: bwrap's own environment: nothing of the pipeline's (bwrap is pid 1 of the sandbox, /proc/1/environ).
_BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
_BATCH_PREFIX = "RPBATCH "

#: Top-level system paths shown as on the host (symlinks stay symlinks); /usr itself is bound read-only.
_SYSTEM_TOP = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Host files of /etc that the interpreter may read and that hold no secret.
_HOST_ETC = ("ld.so.cache", "localtime")

#: Per machine: the seccomp audit arch, and the system calls a proof is refused (EPERM): ptrace,
#: process_vm_readv, process_vm_writev, kcmp, pidfd_getfd. Another process's memory and descriptors stay
#: out of reach even where the kernel's permission checks would allow them (bwrap's pid 1 is dumpable).
_SECCOMP_DENY = {
    "x86_64": (0xC000003E, (101, 310, 311, 312, 438)),
    "aarch64": (0xC00000B7, (117, 270, 271, 272, 438)),
}
_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_LIBC.unshare.argtypes = [ctypes.c_int]


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
            :func:`_memory_cgroup_parent`), unless ``total_memory_mb`` says otherwise.
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


@dataclass
class Execution:
    """What one sandboxed run did.

    ``outcome``: ``passed`` (exit 0), ``failed`` (pytest exit 1: a test failed), ``error`` (collection or
    usage error, or the sandbox could not start the program), ``timeout`` (wall clock), ``killed`` (ended
    by a signal, e.g. SIGXCPU for CPU time). ``limit`` names a limit that was seen to bind, if any:
    ``wall_clock``, ``cpu``, ``memory``, ``processes``, ``file_size``. The texts are raw: pass them
    through :func:`safe_text` before they go anywhere a person or a database reads them.
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


@dataclass(frozen=True)
class _RunPlan:
    """How one run is set up: who runs bwrap, what is staged, how the process limit binds."""

    drop_to: int | None  # host uid/gid to switch to before exec (None: stay the caller, who is not root)
    staged: tuple[tuple[Path, Path], ...]  # (host path, staging mount point), mounted by the root child
    cgroup: _PidsCgroup | None
    nproc_limit: int | None
    memory: _MemoryCgroup | None = None  # the run's memory cgroup (None: only RLIMIT_AS per process)


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
    argv = [str(settings.python), "-m", "pytest", *_PYTEST_ARGS, filename]
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
    return run_in_sandbox({filename: source}, argv, settings, collect_suffix=collect_suffix, max_artifact_bytes=max_artifact_bytes)


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
        tests: ``(test_source, filename)`` per file; file names must be distinct.
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
    if len(set(names)) != len(names) or {_BATCH_RUNNER_FILE, _BATCH_CONFIG_FILE} & set(names):
        raise ValueError(f"the files of a batch need distinct names other than {_BATCH_RUNNER_FILE}, {_BATCH_CONFIG_FILE}: {names}")
    if not tests:
        return []
    config = {
        "tests": [[filename, source] for source, filename in tests],
        "timeout_s": settings.timeout_s,
        "output_bytes": settings.max_output_chars * 4,
        "collect_suffix": ".evidence.json",
        "artifact_bytes": 256 * 1024,
        "pytest_args": list(_PYTEST_ARGS),
    }
    runner = resources.files(_SANDBOX_FILES).joinpath("batch_runner.py").read_text(encoding="utf-8")
    batch = dataclasses.replace(
        settings,
        timeout_s=settings.timeout_s * (len(tests) + 1) + 10,  # the runner's start, then each file's own limit
        max_processes=settings.max_processes + 1,  # the runner itself
        total_memory_mb=(settings.total_memory_mb or settings.memory_mb) + _RUNNER_MEMORY_MB,
    )
    files = {_BATCH_RUNNER_FILE: runner, _BATCH_CONFIG_FILE: json.dumps(config)}
    argv = [str(settings.python), _BATCH_RUNNER_FILE, _BATCH_CONFIG_FILE]
    execution, channel = _sandboxed(files, argv, batch, channel_bytes=settings.file_mb * 2**20)
    if execution.pids_limit_hit or execution.memory_limit_hit:
        return [None] * len(tests)
    records = _batch_records(channel, len(tests))
    results: list[Execution | None] = []
    for index in range(len(tests)):
        record = records.get(index)
        results.append(None if record is None else _batch_execution(record, settings.max_output_chars))
    return results


def _batch_records(channel: bytes, count: int) -> dict[int, dict[str, object]]:
    """The runner's result records, by file index: the first one per file.

    They come from the result channel, a descriptor that only the runner holds inside the sandbox (what
    a proof prints goes elsewhere), so they need no signature: no key exists that a proof could steal.
    """
    records: dict[int, dict[str, object]] = {}
    for line in channel.decode("utf-8", errors="replace").splitlines():
        if not line.startswith(_BATCH_PREFIX):
            continue
        try:
            record = json.loads(line[len(_BATCH_PREFIX) :])
        except ValueError:
            continue
        index = record.get("index") if isinstance(record, dict) else None
        if isinstance(index, int) and 0 <= index < count and index not in records:
            records[index] = record
    return records


def _batch_execution(record: Mapping[str, object], max_chars: int) -> Execution | None:
    """One file's :class:`Execution` from its record (None when the record does not say how the file ended)."""
    try:
        returncode = record["returncode"]
        timed_out = bool(record["timed_out"])
        if returncode is not None and not isinstance(returncode, int) or (returncode is None and not timed_out):
            return None
        streams = []
        for name in ("stdout", "stderr"):
            data = base64.b64decode(str(record[name]), validate=True)
            streams.append(_truncated_text(data, int(record[f"{name}_size"]), max_chars))  # type: ignore[call-overload]
        artifacts = {str(k): str(v) for k, v in dict(record["artifacts"]).items()}  # type: ignore[call-overload]
        duration = float(record["duration"])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return None
    return _execution(returncode, timed_out, streams[0], streams[1], duration, False, artifacts)


def run_in_sandbox(
    files: Mapping[str, str],
    argv: Sequence[str],
    settings: SandboxSettings,
    *,
    collect_suffix: str | None = None,
    max_artifact_bytes: int = 256 * 1024,
) -> Execution:
    """Write ``files`` into a fresh working directory and run ``argv`` there under bubblewrap."""
    return _sandboxed(files, argv, settings, collect_suffix=collect_suffix, max_artifact_bytes=max_artifact_bytes)[0]


def _sandboxed(
    files: Mapping[str, str],
    argv: Sequence[str],
    settings: SandboxSettings,
    *,
    collect_suffix: str | None = None,
    max_artifact_bytes: int = 256 * 1024,
    channel_bytes: int | None = None,
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
        command = _bwrap_command(bwrap, base, workdir, argv, settings, binds, dict(plan.staged))
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
        seccomp = _seccomp_program()
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
    stdout = _read_truncated(out_path, settings.max_output_chars)
    stderr = _read_truncated(err_path, settings.max_output_chars)
    artifacts = _collect(workdir, collect_suffix, max_artifact_bytes) if collect_suffix else {}
    execution = _execution(process.returncode, timed_out, stdout, stderr, duration, pids_hit, artifacts)
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
        unreachable = [p for p in binds if not _reachable(p, drop_to, drop_to)]
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
    cgroup, nproc_limit = _process_limit(settings.max_processes, drop_to)
    try:
        memory = _memory_cgroup(cgroup, (settings.total_memory_mb or settings.memory_mb) * 2**20)
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    return _RunPlan(drop_to, tuple(staged), cgroup, nproc_limit, memory)


def _reachable(path: Path, uid: int, gid: int) -> bool:
    """True when ``uid``/``gid`` can walk to ``path`` and read it, by its mode bits (ACLs are not read)."""
    try:
        resolved = Path(os.path.realpath(path))
        chain = [*reversed(resolved.parents), resolved]
        for index, node in enumerate(chain):
            info = os.stat(node)
            is_leaf = index == len(chain) - 1
            need = (4 | (1 if stat.S_ISDIR(info.st_mode) else 0)) if is_leaf else 1
            shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
            if (info.st_mode >> shift) & need != need:
                return False
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=32)
def environment_paths(python: Path) -> tuple[Path, ...]:
    """The folders the interpreter ``python`` needs, outside /usr: its venv and its base installation.

    From the venv (``pyvenv.cfg`` beside ``bin/``) and its ``home``, and from every link on the way from
    ``python`` to the real binary (``<prefix>/bin/python3.x`` -> ``<prefix>``). Nested folders collapse
    into the outer one. The interpreter is never executed on the host.
    """
    python = Path(os.path.abspath(python))
    found: list[Path] = []
    venv = python.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        found.append(venv)
        home = _pyvenv_home(venv / "pyvenv.cfg")
        if home is not None:
            found.append(Path(os.path.abspath(home)).parent)
    for hop in _link_chain(python):
        found.append(hop.parent.parent)
    prefixes = [p for p in dict.fromkeys(found) if not _shown_by_system(p)]
    outer = [p for p in prefixes if not any(p != q and p.is_relative_to(q) for q in prefixes)]
    for path in outer:
        if len(path.parts) < 3:
            raise SandboxError(f"the interpreter {python} lives in {path}, too broad a folder to show in the sandbox; "
                               "use an interpreter from a venv or an installation folder of its own")  # fmt: skip
    return tuple(outer)


def _pyvenv_home(cfg: Path) -> str | None:
    """The ``home`` key of a ``pyvenv.cfg`` (the base interpreter's bin folder)."""
    for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return value.strip()
    return None


def _link_chain(path: Path, max_hops: int = 40) -> list[Path]:
    """``path``, then every symlink target on the way to the real file (absolute, not resolved further)."""
    chain = [path]
    for _ in range(max_hops):
        current = chain[-1]
        if not current.is_symlink():
            break
        target = Path(os.readlink(current))
        chain.append(Path(os.path.normpath(current.parent / target)))
    resolved = Path(os.path.realpath(path))
    return chain if resolved in chain else chain + [resolved]


def _shown_by_system(path: Path) -> bool:
    """True when ``path`` is inside /usr or a top-level system folder that the sandbox shows anyway."""
    return any(path == Path(top) or path.is_relative_to(top) for top in ("/usr", *_SYSTEM_TOP))


@functools.lru_cache(maxsize=1)
def _system_args() -> tuple[str, ...]:
    """``/usr`` read-only, and /bin, /sbin, /lib* as on the host (symlinks stay symlinks)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TOP:
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    return tuple(args)


def _etc_args(base: Path, uid: int) -> list[str]:
    """A minimal /etc: generated passwd, group, nsswitch.conf, hosts; the host's ld.so.cache, localtime."""
    name = "nobody" if uid == 65534 else "sandbox"
    generated = {
        "passwd": f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n{name}:x:{uid}:{uid}:{name}:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\n{'nogroup' if uid == 65534 else name}:x:{uid}:\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    }
    etc = base / "etc"
    etc.mkdir()
    etc.chmod(0o755)
    args: list[str] = []
    for filename, text in generated.items():
        (etc / filename).write_text(text, encoding="utf-8")
        (etc / filename).chmod(0o644)
        args += ["--ro-bind", str(etc / filename), f"/etc/{filename}"]
    for filename in _HOST_ETC:
        args += ["--ro-bind-try", f"/etc/{filename}", f"/etc/{filename}"]
    return args


def _bwrap_command(
    bwrap: str,
    base: Path,
    workdir: Path,
    argv: Sequence[str],
    settings: SandboxSettings,
    binds: Sequence[Path],
    staged: Mapping[Path, Path],
) -> list[str]:
    """The bwrap argv: namespaces, the explicit read-only layout, private /tmp, writable workdir, cleared env."""
    uid = str(settings.sandbox_uid)
    python_bin = str(Path(os.path.abspath(settings.python)).parent)
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
        *_system_args(),
        *_etc_args(base, settings.sandbox_uid),
        "--dev", "/dev",
        "--proc", "/proc",
        "--size", str(settings.file_mb * 2**20), "--tmpfs", "/tmp",
    ]  # fmt: skip
    for path in dict.fromkeys(binds):
        command += ["--ro-bind", str(staged.get(path, path)), str(path)]
    command += [
        "--bind", str(workdir), str(workdir),
        "--remount-ro", "/",
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


@functools.lru_cache(maxsize=1)
def _seccomp_program() -> bytes | None:
    """A classic BPF seccomp program for bwrap's ``--seccomp``: :data:`_SECCOMP_DENY` and every system call
    of another ABI (i386 through ``int 0x80``, x32) fail with EPERM; all else is allowed. None on a machine
    not listed (then nothing is filtered)."""
    machine = os.uname().machine
    if machine not in _SECCOMP_DENY:
        return None
    arch, denied = _SECCOMP_DENY[machine]
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    body = [(ld_w_abs, 0, 0, 0)]  # the system call's number
    body += [(jeq_k, len(denied) - i, 0, nr) for i, nr in enumerate(denied)]  # to "deny" below
    body += [(ret_k, 0, 0, allow), (ret_k, 0, 0, deny)]
    head = [
        (ld_w_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq_k, 1, 0, arch),
        (ret_k, 0, 0, deny),  # another ABI
        (ld_w_abs, 0, 0, 0),
        (jge_k, 0, 1, 0x40000000),  # x32's numbers
        (ret_k, 0, 0, deny),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in head + body)


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


class _MemoryCgroup(_PidsCgroup):
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
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value or 0) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def remove(self) -> None:
        if self.own:
            super().remove()


def _memory_cgroup_parent() -> tuple[Path, bool] | None:
    """Where a run's memory cgroup can be made: (the writable v1 ``memory`` directory of this process, False),
    or (a v2 directory with ``+memory`` for its children, True); None when neither is there.

    The v2 case only counts where the run's pids cgroup is made in that same directory.
    """
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:  # cgroup v1: "N:memory:/path"
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / rel.lstrip("/")
            if (candidate / "memory.limit_in_bytes").exists() and os.access(candidate, os.W_OK):
                return candidate, False
    for line in lines:  # cgroup v2: "0::/path", with memory enabled for children
        if line.startswith("0::"):
            candidate = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                enabled = (candidate / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "memory" in enabled and os.access(candidate, os.W_OK):
                return candidate, True
    return None


def _memory_cgroup(pids: _PidsCgroup | None, limit_bytes: int) -> _MemoryCgroup | None:
    """The run's memory cgroup, or None where none can be made (then RLIMIT_AS binds per process only)."""
    found = _memory_cgroup_parent()
    if found is None:
        return None
    parent, v2 = found
    try:
        if v2:
            if pids is None or pids.path.parent != parent:
                return None
            return _MemoryCgroup(pids.path, limit_bytes, v2=True, own=False)
        name = f"rp_sandbox_{os.getpid()}_{next(_counter)}_{time.monotonic_ns()}"
        return _MemoryCgroup(parent / name, limit_bytes, v2=False, own=True)
    except OSError:
        return None


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


def _process_limit(max_processes: int, drop_to: int | None) -> tuple[_PidsCgroup | None, int | None]:
    """Choose how the process limit is enforced: a pids cgroup, else RLIMIT_NPROC of the run's user.

    The run's user is ``drop_to`` (the sandbox user) when we are root, else the caller. RLIMIT_NPROC
    does not bind uid 0, so it is refused for a run that would stay root.
    """
    parent = _pids_cgroup_parent()
    if parent is not None:
        name = f"rp_sandbox_{os.getpid()}_{next(_counter)}_{time.monotonic_ns()}"
        try:
            return _PidsCgroup(parent / name, max_processes), None
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


# --------------------------------------------------------------------------------------------------
# Results


def _read_truncated(path: Path, max_chars: int) -> str:
    size = path.stat().st_size if path.exists() else 0
    with open(path, "rb") as handle:
        data = handle.read(max_chars * 4)
    return _truncated_text(data, size, max_chars)


def _truncated_text(data: bytes, size: int, max_chars: int) -> str:
    """The first bytes of an output (``size`` bytes in all) as text of at most ``max_chars``, with a marker when cut."""
    text = data.decode("utf-8", errors="replace")
    if len(text) > max_chars or size > len(data):
        text = text[:max_chars] + f"\n[... truncated: {size} bytes in all]"
    return text


def _collect(workdir: Path, suffix: str, max_bytes: int) -> dict[str, str]:
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
        pids_limit_hit=pids_hit,
    )


# --------------------------------------------------------------------------------------------------
# Output hygiene: what a proof printed or recorded, before it becomes evidence

_KEY_NAME = r"[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH)[A-Z0-9_]*"
_KEY_NAME_LOWER = (
    r"(?:api|access|secret|private|client|auth|session|refresh|bearer)[_-]?(?:key|secret|token)|password|passwd|passphrase|token"
)
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM / OpenSSH / PGP private key blocks, to their END line or, when the text was cut, to its end
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\Z)", re.S),
        "[redacted: private key]",
    ),
    # crypt(3) password hashes as in /etc/shadow: $1$ $2b$ $5$ $6$ $7$ $y$ (yescrypt) $gy$ ...
    (re.compile(r"\$(?:1|2[abxy]?|5|6|7|y|gy|sha1|md5)\$[./A-Za-z0-9$=]{4,}"), "[redacted: password hash]"),
    # a shadow line with an old DES hash: user:<13 chars>:<last change>:
    (re.compile(r"\b([a-z_][a-z0-9_.-]*):[./A-Za-z0-9]{13}:(\d{0,6}):"), r"\1:[redacted: password hash]:\2:"),
    # NAME=value / "NAME": "value" where the name says it is a secret (env dumps, .env files, dict reprs)
    (re.compile(rf"\b({_KEY_NAME})(['\"]?\s*[=:]\s*)(['\"]?)[^\s'\",;}}]+"), r"\1\2\3[redacted]"),
    (re.compile(rf"(?i)\b({_KEY_NAME_LOWER})(['\"]?\s*[=:]\s*)(['\"]?)[A-Za-z0-9_\-./+=~]{{8,}}"), r"\1\2\3[redacted]"),
    # tokens recognisable by their form
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*"), "Bearer [redacted]"),
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{20,}"), "[redacted: token]"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|hf_[A-Za-z0-9]{30,})"), "[redacted: token]"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "[redacted: token]"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "[redacted: token]"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), "[redacted: token]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), "[redacted: token]"),
)


def redact_secrets(text: str) -> str:
    """Mask secret-looking content: password hashes, private key blocks, ``*_KEY=``/``password:`` values, tokens.

    A filter on proof output, behind the sandbox (which already shows no secret of the host): whatever a
    proof read and printed must not reach reports, tables or Dagster's event log as it was.
    """
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def cap_text(text: str, limit: int, *, keep: Literal["head", "tail"] = "head") -> str:
    """``text`` cut to at most ``limit`` characters, a marker saying how much was left out (idempotent)."""
    if len(text) <= limit:
        return text
    template = "[... {} chars cut]"
    room = max(0, limit - len(template.format(len(text))) - 1)
    marker = template.format(len(text) - room)
    return f"{text[:room]} {marker}" if keep == "head" else f"{marker} {text[len(text) - room :]}"


def safe_text(text: object, limit: int, *, keep: Literal["head", "tail"] = "head") -> str:
    """Redact, then cap: the form in which proof output may become evidence."""
    return cap_text(redact_secrets(str(text)), limit, keep=keep)
