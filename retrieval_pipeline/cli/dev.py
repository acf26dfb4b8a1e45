"""``make dev``: ``dg dev`` (the UI and the daemon) that stops on SIGINT, SIGTERM or SIGHUP, with or without a terminal.

Usage::

    python -m retrieval_pipeline.cli.dev [dg dev options, e.g. --host 127.0.0.1 --port 3000]

``dg dev`` is a tree of processes: dg, the webserver, the daemon and code servers. Started from a
non-interactive shell in the background (``setsid make dev &``, a CI step, a service manager), every one of
them inherits SIGINT *ignored*, so ``kill -INT`` stopped nothing; a SIGTERM to the group reached each process
at once, mid-start for some, and left processes behind. This wrapper owns the shutdown:

* ``dg dev`` runs in its own session (its own process group), with SIGINT at its default and a private
  ``TMPDIR`` (where the code servers' sockets and the temporary workspace file go);
* on SIGINT, SIGTERM or SIGHUP (its own handlers, installed whatever it inherited) it sends SIGINT to the
  whole group, as Ctrl-C in a terminal does (Dagster's orderly shutdown), SIGTERM after :data:`GRACE_S`,
  SIGKILL after :data:`TERM_S` more: everything is gone within :data:`STOP_WITHIN_S` seconds;
* it is the tree's child subreaper (Linux), so processes orphaned by dg are its children and are reaped;
  when dg ends by itself, what is left of its group is stopped the same way;
* it removes the private ``TMPDIR`` at the end.

Under ``make dev`` (the recipe sets ``RETRIEVAL_DEV_PARENT=make`` and ``exec``s this module, so it is make's own
child) a signal sent to make's PID alone stops the tree too, as a process supervisor or an IDE sends it:

* SIGTERM: GNU make forwards it to its child, this process;
* SIGINT, SIGHUP: make forwards nothing; it blocks the signal while its handler waits for its children, then
  re-raises it. That block shows in ``/proc/<make>/status`` (``SigBlk``), which this process polls: a stop
  signal blocked in make for :data:`PARENT_BLOCKED_POLLS` polls in a row is taken as that signal;
* make gone (SIGKILL): the parent PID changes, and the tree is stopped the same way.

Exit code: 0 after a stop by a signal (it prints "stopped": a clean stop is not a failure), dg dev's own
otherwise. make itself, when it received the signal, re-raises it once its child has ended (GNU make
does so for every fatal signal): the shell then sees ``128 + signal`` from make, with no "Error" line.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

#: Seconds between the SIGINT to the group (Dagster's orderly shutdown) and a SIGTERM.
GRACE_S = 6.0
#: Seconds between the SIGTERM and a SIGKILL.
TERM_S = 2.0
#: Everything is stopped within this many seconds of the signal.
STOP_WITHIN_S = 10.0
#: The signals that stop ``make dev``.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_CHILD_SUBREAPER = 36
#: Consecutive polls (0.1 s apart) that make must show a stop signal blocked before it counts as received.
PARENT_BLOCKED_POLLS = 3
#: ``RETRIEVAL_DEV_PARENT=make``: the parent is make, whose signals this process watches (the Makefile sets it).
PARENT_ENV = "RETRIEVAL_DEV_PARENT"


def dg_command(args: Sequence[str]) -> list[str]:
    """``dg dev`` of this environment (the ``dg`` beside this interpreter, else on PATH) with ``args``."""
    beside = Path(sys.executable).parent / "dg"
    return [str(beside) if beside.is_file() else (shutil.which("dg") or "dg"), "dev", *args]


def _become_subreaper() -> None:
    """Orphans of the tree become this process's children (Linux), so they are reaped and waited for."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _child_setup() -> None:
    """In the child, before exec: SIGINT and SIGTERM at their defaults (an ignored SIGINT would be inherited)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def blocked_stop_signal(pid: int) -> int | None:
    """The stop signal ``pid`` has blocked (``SigBlk`` of ``/proc/<pid>/status``), or None (none, or unreadable).

    GNU make blocks a fatal signal while its handler waits for its children to end: the sign that make was
    sent SIGINT or SIGHUP (which it does not forward) while its child runs.
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigBlk:")), 0)
    return next((int(sig) for sig in STOP_SIGNALS if mask & (1 << (int(sig) - 1))), None)


class _ParentWatch:
    """make's signals, seen from its child: a stop signal make has blocked for a while, or make gone."""

    def __init__(self) -> None:
        self.parent = os.getppid()
        self.streak: dict[int, int] = {}

    def signal(self) -> int | None:
        """The stop signal make received, SIGHUP when make is gone, else None (call every 0.1 s)."""
        if os.getppid() != self.parent:
            return int(signal.SIGHUP)
        sig = blocked_stop_signal(self.parent)
        self.streak = {sig: self.streak.get(sig, 0) + 1} if sig is not None else {}
        return sig if sig is not None and self.streak[sig] >= PARENT_BLOCKED_POLLS else None


class _Tree:
    """``dg dev``'s process group: started, reaped, stopped."""

    def __init__(self, command: Sequence[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(list(command), env=env, start_new_session=True, preexec_fn=_child_setup)  # noqa: PLW1509
        self.pgid = self.proc.pid
        self.status: int | None = None

    def reap(self) -> None:
        """Collect every finished child (dg, and orphans handed to this subreaper); keep dg's exit code."""
        # the same loop as reap() in core/services/sandbox/sandbox_side/batch_runner.py, on purpose: that one runs
        # inside the sandbox on the standard library alone and imports nothing of the project
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.proc.pid:
                self.status = os.waitstatus_to_exitcode(status)
                self.proc.returncode = self.status

    def alive(self) -> bool:
        """Whether any process of the group is left."""
        self.reap()
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def wait_gone(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def stop(self) -> None:
        """SIGINT to the group, then SIGTERM, then SIGKILL, until none is left."""
        for sig, wait in ((signal.SIGINT, GRACE_S), (signal.SIGTERM, TERM_S), (signal.SIGKILL, 1.0)):
            self.signal(sig)
            if self.wait_gone(wait):
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dg dev`` with ``argv`` until it ends or a stop signal arrives; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    _become_subreaper()
    watch = _ParentWatch() if os.environ.get(PARENT_ENV) == "make" else None
    tmp = Path(tempfile.mkdtemp(prefix="retrieval-dev-"))
    try:
        env = {k: v for k, v in os.environ.items() if k != PARENT_ENV}
        tree = _Tree(dg_command(args), {**env, "TMPDIR": str(tmp)})
        while not received and tree.status is None:
            tree.reap()
            time.sleep(0.1)
            if watch is not None and (sig := watch.signal()) is not None and not received:
                received.append(sig)
        if received:
            print(f"make dev: {signal.Signals(received[0]).name}: stopping dg dev", file=sys.stderr, flush=True)
        tree.stop()  # also what dg left running when it ended by itself
        tree.reap()
        status = tree.status or 0
        if received:
            print(f"make dev: stopped ({signal.Signals(received[0]).name}; the webserver, daemon and code servers ended)", flush=True)
            return 0
        return 128 - status if status < 0 else status
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
