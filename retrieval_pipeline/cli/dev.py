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

Exit code: dg dev's, or ``128 + signal`` when stopped by a signal.
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


class _Tree:
    """``dg dev``'s process group: started, reaped, stopped."""

    def __init__(self, command: Sequence[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(list(command), env=env, start_new_session=True, preexec_fn=_child_setup)  # noqa: PLW1509
        self.pgid = self.proc.pid
        self.status: int | None = None

    def reap(self) -> None:
        """Collect every finished child (dg, and orphans handed to this subreaper); keep dg's exit code."""
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
    tmp = Path(tempfile.mkdtemp(prefix="retrieval-dev-"))
    try:
        tree = _Tree(dg_command(args), {**os.environ, "TMPDIR": str(tmp)})
        while not received and tree.status is None:
            tree.reap()
            time.sleep(0.1)
        if received:
            print(f"retrieval_pipeline.cli.dev: {signal.Signals(received[0]).name}: stopping dg dev", file=sys.stderr, flush=True)
        tree.stop()  # also what dg left running when it ended by itself
        tree.reap()
        status = tree.status or 0
        return 128 + received[0] if received else (128 - status if status < 0 else status)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
