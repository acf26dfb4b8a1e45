"""The runner of ``run_pytest_batch``: runs inside the sandbox, standard library only.

It is copied into the sandbox's working directory and started as ``python batch_runner.py CONFIG CHANNEL``:
``CONFIG`` a JSON file the host wrote there (the tests, the limits, pytest's arguments; read, then
removed), ``CHANNEL`` the number of a descriptor the host passed through bwrap for the results. bwrap's
own process (pid 1 of the sandbox) closes every descriptor but stdin/stdout/stderr, each proof's process
closes it before anything of the proof runs, and this process is not dumpable (no other process of the
sandbox may read its memory, open its ``/proc/<pid>/fd`` or take a descriptor with ``pidfd_getfd``): the
runner alone can write results. Nothing secret is in its memory either, so a proof forked from it (which
sees a copy of everything the runner had: its frames, its objects) finds no key to forge a record with.
"""

import atexit
import base64
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import stat
import sys
import threading
import time
import traceback
import warnings

WORKDIR = os.getcwd()
CHAIN = []  # the folders leading to the working directory (each test may write in them: emptied, checked)
_up = os.path.dirname(WORKDIR)
while _up not in ("/", ""):
    CHAIN.insert(0, _up)
    _up = os.path.dirname(_up)
# Set by configure() from the host's JSON file and argv.
TESTS = []
TIMEOUT = OUTPUT_BYTES = ARTIFACT_BYTES = 0
SUFFIX = ""
PYTEST_ARGS = []
WARM_UP_FILE = "test_rp_warmup.py"
PRELOAD = []  # dotted names under the library's packages that the tests name: see preload()
CONFIG = {}
CONFIG_FILE = ""
CHANNEL = DEVNULL = -1
MOUNT_CHAIN = []
KEEP = set()
STATUSES = {}
LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4


def unescape_octal(text):
    """A mountinfo path: space, tab, newline and backslash are written as 3-digit octal escapes."""
    parts = text.split("\\")
    out = parts[0]
    for part in parts[1:]:
        if len(part) >= 3 and all(c in "01234567" for c in part[:3]):
            out += chr(int(part[:3], 8)) + part[3:]
        else:
            out += "\\" + part
    return out


def mount_ancestors():
    """The folders leading to each mount point of the sandbox (a venv bound under /tmp, say): kept, never emptied."""
    found = set()
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split(" ")
            if len(fields) < 5:
                continue
            point = unescape_octal(fields[4])
            up = os.path.dirname(point)
            while up not in ("/", ""):
                found.add(up)
                up = os.path.dirname(up)
    return found


class Stop(Exception):
    """The batch cannot go on safely: the tests not reported yet are run one sandbox each."""


def emit(record):
    """One result line on the channel: a descriptor of the host's that only this process holds (no key to sign)."""
    data = ("RPBATCH " + json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(CHANNEL, data) :]


def exit_code(status):
    """The exit status as bwrap passes it on: 128 + the signal for a process a signal ended."""
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        STATUSES[pid] = status


def sweep():
    """SIGKILL every other process of the sandbox (pid 1, bwrap's, and this one are spared), reap ours."""
    for _ in range(2000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            reap()
            return
        reap()
        time.sleep(0.005)
    raise Stop("processes survive SIGKILL")


def guarded():
    """What a test must not change for the next one: /dev's entries, the folders up to the working directory."""
    seen = {}
    for path in ["/dev/" + n for n in sorted(os.listdir("/dev"))] + CHAIN + MOUNT_CHAIN + [WORKDIR, "/dev/shm"]:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            seen[path] = None
            continue
        link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
        seen[path] = (info.st_mode, info.st_ino, info.st_dev, info.st_uid, info.st_gid, info.st_rdev, link)
    return seen


def remove(path, info):
    if stat.S_ISDIR(info.st_mode):
        if stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
            os.chmod(path, 0o700)
        for name in os.listdir(path):
            inner = os.path.join(path, name)
            inner_info = os.lstat(inner)
            if inner_info.st_dev != info.st_dev:
                raise Stop("a mount point inside " + path)
            remove(inner, inner_info)
        os.rmdir(path)
    else:
        os.unlink(path)


def empty(folder):
    """Remove everything in ``folder`` except the way to the working directory and the mounts of the sandbox."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return
    device = os.lstat(folder).st_dev
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        info = os.lstat(path)
        if path in KEEP:
            if stat.S_ISDIR(info.st_mode):
                empty(path)
        elif info.st_dev == device:
            remove(path, info)


def read_head(fd, limit):
    size = os.fstat(fd).st_size
    chunks, got = [], 0
    while got < limit:
        data = os.pread(fd, min(limit - got, 1 << 20), got)
        if not data:
            break
        chunks.append(data)
        got += len(data)
    return b"".join(chunks), size


def collect():
    found = {}
    for name in sorted(os.listdir(WORKDIR)):
        if not name.endswith(SUFFIX):
            continue
        try:
            fd = os.open(os.path.join(WORKDIR, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                found[name] = read_head(fd, ARTIFACT_BYTES)[0].decode("utf-8", "replace")
        finally:
            os.close(fd)
    return found


def write_file(name, text):
    fd = os.open(os.path.join(WORKDIR, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(os.path.join(WORKDIR, name), 0o644)


def anonymous_file(tag):
    """A file only its descriptors reach: made, then unlinked at once."""
    path = os.path.join(WORKDIR, f"rp_{tag}_{os.getpid()}_{time.monotonic_ns()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.unlink(path)
    return fd


def pytest_session(filename):
    """What ``python -m pytest <args> <filename>`` does, up to the interpreter's exit; returns its status."""
    import runpy

    sys.argv = ["-m", *PYTEST_ARGS, filename]  # runpy puts pytest/__main__.py first, as -m does
    code = 0
    try:
        runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():  # as at the interpreter's exit: non-daemon threads first, then atexit
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    return code & 0xFF


def child(filename, out_fd, err_fd):
    code = 1
    try:
        os.setsid()
        LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (CHANNEL, DEVNULL, out_fd, err_fd):
            os.close(fd)
        code = pytest_session(filename)
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)


def wait(pid, timeout):
    """The exit status of ``pid``, or None when it is still running after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(0.01, left))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def warm_up():
    """One session on a trivial test: plugins imported and rewritten once, not once per test."""
    write_file(WARM_UP_FILE, "def test_warmup():\n    pass\n")
    saved = os.dup(2)
    os.dup2(DEVNULL, 2)
    try:
        import pytest

        code = pytest.main([*PYTEST_ARGS, WARM_UP_FILE])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
    if int(code) != 0:
        raise Stop(f"the warm-up session ended with {int(code)}")
    preload()
    gc.collect()
    gc.freeze()  # what the warm-up left is never collected again: each test's own collections stay short


def preload():
    """Import once, here, the library modules the tests name, so that each proof's process starts with them.

    Forked proofs then skip an import that can take seconds per proof (google-adk's agents: about 2 s). Each
    name's longest importable prefix is imported. Should any import warn, write output, start a thread
    (``/proc/self/task``), come from a writable place, or fail otherwise than by not existing, the runner
    starts afresh without preloading (it execs itself): a proof must see such an import happen itself. So a
    proof finds every preloaded module as a fresh interpreter has it after importing it.
    """
    if not PRELOAD:
        return
    sink = anonymous_file("preload")
    saved = [os.dup(1), os.dup(2)]
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    try:
        clean = import_cleanly(PRELOAD, sink)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in zip((1, 2), saved):
            os.dup2(original, fd)
            os.close(original)
        os.close(sink)
    if not clean:
        restart_without_preload()


def import_cleanly(names, sink):
    """Import the longest importable prefix of each name; False at the first import a proof must see itself."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in names:
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                prefix = ".".join(parts[:end])
                module, missing = None, False
                try:
                    module = importlib.import_module(prefix)
                except ModuleNotFoundError as exc:
                    missing = exc.name == prefix
                except BaseException:  # noqa: BLE001 (a failing import, SystemExit included: proofs import it themselves)
                    pass
                sys.stdout.flush()
                sys.stderr.flush()
                if caught or os.fstat(sink).st_size or len(os.listdir("/proc/self/task")) != 1:
                    return False
                if module is None and not missing:
                    return False
                if module is not None:
                    if not read_only(module):
                        return False
                    break
    return True


def restart_without_preload():
    """Exec this runner again, on the same settings less the preloading, the result channel kept."""
    os.unlink(os.path.join(WORKDIR, WARM_UP_FILE))
    write_file(CONFIG_FILE, json.dumps({**CONFIG, "preload": []}))
    os.set_inheritable(CHANNEL, True)
    os.execv(sys.executable, [sys.executable, os.path.abspath(sys.argv[0]), CONFIG_FILE, str(CHANNEL)])


def read_only(module):
    """Whether the module's files (a namespace package's folders) are read-only here: the environment's binds."""
    places = [*(getattr(module, "__path__", None) or []), getattr(module, "__file__", None)]
    return all(not os.access(place, os.W_OK) for place in places if place)


def run_one(index, filename, source, expected):
    sweep()
    if guarded() != expected:
        raise Stop("a test changed /dev or the folders leading to the working directory")
    empty(WORKDIR)
    empty("/tmp")
    if os.access("/dev/shm", os.W_OK):
        empty("/dev/shm")
    write_file(filename, source)
    out_fd, err_fd = anonymous_file("out"), anonymous_file("err")
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(filename, out_fd, err_fd)
    try:
        status = wait(pid, TIMEOUT)
        timed_out = status is None
        if timed_out:
            sweep()
            status = STATUSES.pop(pid, None)
        duration = time.monotonic() - started
        sweep()  # whatever the test left running
        stdout, stdout_size = read_head(out_fd, OUTPUT_BYTES)
        stderr, stderr_size = read_head(err_fd, OUTPUT_BYTES)
    finally:
        os.close(out_fd)
        os.close(err_fd)
    emit(
        {
            "index": index,
            "returncode": -signal.SIGKILL if timed_out else None if status is None else exit_code(status),
            "timed_out": timed_out,
            "duration": duration,
            "stdout": base64.b64encode(stdout).decode(),
            "stdout_size": stdout_size,
            "stderr": base64.b64encode(stderr).decode(),
            "stderr_size": stderr_size,
            "artifacts": collect(),
        }
    )


def main():
    if os.getppid() not in (0, 1):  # kill(-1) must reach this sandbox's processes only: its own pid namespace
        raise Stop("the runner is not in a pid namespace of its own")
    if LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise Stop("cannot make the runner undumpable")
    os.dup2(DEVNULL, 1)  # what the runner's imports print goes nowhere; results go to CHANNEL only
    warm_up()
    expected = guarded()
    for index, (filename, source) in enumerate(TESTS):
        run_one(index, filename, source, expected)
    sweep()
    emit({"done": len(TESTS)})


def configure(config_file, channel):
    """The settings (a JSON file the host wrote in the working directory, removed here) and the result channel."""
    global \
        TESTS, \
        TIMEOUT, \
        OUTPUT_BYTES, \
        SUFFIX, \
        ARTIFACT_BYTES, \
        PYTEST_ARGS, \
        CHANNEL, \
        DEVNULL, \
        KEEP, \
        MOUNT_CHAIN, \
        PRELOAD, \
        CONFIG, \
        CONFIG_FILE
    CHANNEL = channel
    os.set_inheritable(CHANNEL, False)
    with open(config_file, encoding="utf-8") as handle:
        config = json.load(handle)
    os.unlink(config_file)
    TESTS = config["tests"]
    TIMEOUT = config["timeout_s"]
    OUTPUT_BYTES = config["output_bytes"]
    SUFFIX = config["collect_suffix"]
    ARTIFACT_BYTES = config["artifact_bytes"]
    PYTEST_ARGS = config["pytest_args"]
    PRELOAD = config.get("preload", [])
    CONFIG, CONFIG_FILE = config, config_file
    MOUNT_CHAIN = sorted(mount_ancestors() - set(CHAIN) - {WORKDIR})
    KEEP = set(CHAIN) | {WORKDIR} | set(MOUNT_CHAIN)
    DEVNULL = os.open("/dev/null", os.O_RDWR)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        print("usage: batch_runner.py CONFIG_JSON CHANNEL_FD", file=sys.stderr)
        os._exit(2)
    try:
        configure(sys.argv[1], int(sys.argv[2]))
        main()
    except BaseException as exc:
        try:
            emit({"stopped": type(exc).__name__ + ": " + str(exc)[:500]})
            sweep()
        except BaseException:
            pass
        os._exit(3)
    os._exit(0)
