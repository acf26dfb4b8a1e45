"""One SIGINT or SIGTERM stops a runner: the current step ends at its next batch, and the process exits 130 within seconds.

:func:`stop_on_signals` (the runner's whole invocation):

* SIGINT and SIGTERM raise ``KeyboardInterrupt`` (Dagster's own handler replaces both while a run executes and
  raises ``DagsterExecutionInterruptedError`` in the step);
  a background job of a non-interactive shell inherits SIGINT *ignored*, so both handlers are set here.
* Every signal is also seen through :func:`signal.set_wakeup_fd`, whatever Python handler is installed (Dagster
  swaps them during a run): a watcher thread sets the process-wide stop flag (:mod:`retrieval_pipeline.core.common.stop`)
  at the first SIGINT or SIGTERM, so the long loops (embedding chunks, fine-tuning steps, a plug-in's call) stop
  between batches even where the interrupt itself was swallowed or is stuck in a long C call.
* If the process is still there :data:`GRACE_S` seconds after the first signal, or when a second one comes, the
  watcher says so on stderr and ends the process with exit code 130 (``os._exit``): a first Ctrl-C used to print
  the summary and then keep computing for 17 to 45 s until a second signal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

from retrieval_pipeline.core.common import stop

#: Seconds after the first signal within which the process ends, stopped cleanly or not.
GRACE_S = 10.0
#: The exit code of a run stopped by a signal (128 + SIGINT, as shells report Ctrl-C).
EXIT_INTERRUPTED = 130
_STOPPING = (signal.SIGINT, signal.SIGTERM)


def _name(signum: int) -> str:
    return signal.Signals(signum).name


def _exit_now(why: str) -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        os.write(2, f"\n{why}; exit code {EXIT_INTERRUPTED}\n".encode())
    os._exit(EXIT_INTERRUPTED)


def _watch(read_fd: int, grace_s: float) -> None:
    """Read signal numbers from the wakeup pipe: the first stop signal sets the flag and arms the deadline."""
    timer: threading.Timer | None = None
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in _STOPPING:
                continue
            name = _name(signum)
            if timer is not None:  # a second signal: now
                _exit_now(f"stopped: a second signal ({name})")
            stop.request(name)
            timer = threading.Timer(grace_s, _exit_now, args=(f"stopped: the current step did not end within {grace_s:g} s of {name}",))
            timer.daemon = True
            timer.start()


@contextlib.contextmanager
def stop_on_signals(grace_s: float = GRACE_S) -> Iterator[None]:
    """SIGINT and SIGTERM stop the runner (see the module docstring); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():  # handlers can only be set in the main thread
        yield
        return
    stop.reset()
    previous = {sig: signal.getsignal(sig) for sig in _STOPPING}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as SIGINT: no second signal that would count as one
    threading.Thread(target=_watch, args=(read_fd, grace_s), name="stop-on-signals", daemon=True).start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        os.close(write_fd)  # the watcher reads EOF and ends (a pending deadline still applies to a stopping process)
