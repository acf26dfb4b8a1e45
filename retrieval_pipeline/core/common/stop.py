"""One process-wide stop flag: set by the first SIGINT or SIGTERM of a runner, checked by long loops between batches.

A signal interrupts the main thread's Python code, but not a loop that catches broadly, a C call that runs for
long, or a worker process; so the runner (:func:`retrieval_pipeline.cli.signals.stop_on_signals`) also sets this
flag, and the loops that can run for minutes (embedding chunks, fine-tuning steps, a plug-in call's wait) call
:func:`check` between batches: it raises :class:`StopRequested` once the flag is set. The flag stays set until
:func:`reset` (a runner resets it when it starts).
"""

from __future__ import annotations

import threading

_flag = threading.Event()
_why: list[str] = []


class StopRequested(KeyboardInterrupt):
    """A stop was asked for (a signal to the runner); raised between batches by :func:`check`.

    A ``KeyboardInterrupt``: code that catches ``Exception`` lets it through, as it lets Ctrl-C through.
    """


def request(why: str) -> None:
    """Set the flag; ``why`` (e.g. ``"SIGTERM"``) is said by :func:`check`'s exception."""
    _why[:] = [why]
    _flag.set()


def requested() -> bool:
    """Whether a stop was asked for."""
    return _flag.is_set()


def reason() -> str:
    """What asked for the stop (``""`` when nothing did)."""
    return _why[0] if _why and _flag.is_set() else ""


def check() -> None:
    """Raise :class:`StopRequested` when a stop was asked for; otherwise nothing (a cheap flag read)."""
    if _flag.is_set():
        raise StopRequested(f"stopped by {reason() or 'a stop request'}")


def reset() -> None:
    """Clear the flag (a runner starting)."""
    _flag.clear()
    _why.clear()
