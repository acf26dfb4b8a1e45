"""A ``kind: python`` plug-in in a long-lived worker process of its own, each call under a deadline.

A plug-in is code the pipeline does not control: ``os._exit(0)`` in its ``search`` ended a whole ``cli.run``
invocation with exit code 0, and a ``search`` that slept held every dataset after it. So each plug-in object lives
in a worker process (:mod:`~retrieval_pipeline.core.retrieval.plugin_worker`), started once per build or load,
and the pipeline talks to it over a socket pair: a request, then an answer, with ``timeout_s`` per call.

* A call that does not answer in time: the worker is killed and the call raises :class:`RetrieverError` naming
  the retriever, the dataset, the call and the deadline.
* A worker that ends (``os._exit``, a crash, the OOM killer): :class:`RetrieverError` with its exit code.
* ``sys.exit`` or any exception inside the plug-in: :class:`RetrieverError` with the plug-in's message (its
  traceback goes to the log).

The failure fails that retriever's step; the run of the dataset fails, the other datasets still run, and the
invocation exits non-zero. Why a worker process rather than a thread or a process per call: a thread cannot be
stopped or survive ``os._exit``; a process per call would pay the start and the corpus transfer on every batch.
A worker costs one interpreter start and the plug-in's imports, once per process and module: a closed worker
waits for the next object of the same module (the runs step's load after the index step's build), so it is
started and imports once per invocation, as the module was imported once before; then a pickle of each request
and answer (measured in docs/retrievers.md: ``benchmarks/plugin_isolation.py``). While waiting, the pipeline wakes every
:data:`POLL_S` to notice a dead worker and a stop request (:mod:`retrieval_pipeline.core.common.stop`).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.retrieval.base import RetrieverError

#: The worker script (standard library only, run with ``-P`` so its folder does not shadow modules).
WORKER = Path(__file__).with_name("plugin_worker.py")
#: Seconds between two checks of the worker and of the stop flag while a call runs.
POLL_S = 0.2
#: Seconds a worker gets to start and import the plug-in's module (at least; ``timeout_s`` when that is longer).
IMPORT_TIMEOUT_S = 120.0

_log = logging.getLogger(__name__)
#: One idle worker per (plug-in module, ``sys.path``): a build's worker serves the load that follows (one import).
_IDLE: dict[tuple[str, tuple[str, ...]], _Worker] = {}
#: Every worker not yet collected, for :func:`kill_all`.
_LIVE: weakref.WeakSet[_Worker] = weakref.WeakSet()


def kill_all() -> None:
    """Kill every worker process at once (a runner exiting on a signal, before ``os._exit`` skips the finalizers)."""
    for worker in list(_LIVE):
        worker.process.kill()


class _Worker:
    """A worker process and our end of its socket; ended when this holder is collected or at exit."""

    def __init__(self) -> None:
        ours, theirs = Pipe(duplex=True)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-P", str(WORKER), str(theirs.fileno())], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL
            )
        finally:
            theirs.close()
        self.connection: Connection = ours
        self.end = weakref.finalize(self, _end, self.process, ours)
        _LIVE.add(self)
        self.connection.send([os.getcwd() if p == "" else p for p in sys.path])

    def alive(self) -> bool:
        return self.end.alive and self.process.poll() is None


class PluginProcess:
    """One plug-in object in its worker process; :meth:`call` sends a request and waits at most ``timeout_s``.

    Args:
        retriever: The registry name (named in every error).
        dataset: The dataset (named in every error).
        timeout_s: The deadline of each call, in seconds.
        factory: ``package.module:factory``: an idle worker that imported the same module is reused.
    """

    def __init__(self, retriever: str, dataset: str, timeout_s: float, factory: str = "") -> None:
        self.retriever, self.dataset, self.timeout_s = retriever, dataset, timeout_s
        self.key = (factory.partition(":")[0], tuple(sys.path))
        idle = _IDLE.pop(self.key, None)
        self.worker: _Worker | None = idle if idle is not None and idle.alive() else _Worker()
        if idle is not None and idle is not self.worker:
            idle.end()
        self.healthy = True  # False while a call is out, and after one that failed in a way that may leave the worker unusable

    @property
    def process(self) -> subprocess.Popen:
        return self._live().process

    @property
    def connection(self) -> Connection:
        return self._live().connection

    def _live(self) -> _Worker:
        if self.worker is None:
            raise self._error("its worker process was closed")
        return self.worker

    def call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        """``plugin.method(*args)`` in the worker; ``import``/``construct``/``has`` are the worker's own requests.

        Raises:
            RetrieverError: The plug-in raised or exited, the worker died, or no answer came within the deadline.
        """
        request = (method, *args) if method in ("import", "construct", "has") else ("call", method, args)
        deadline = self.timeout_s if timeout_s is None else timeout_s
        what = {"import": "the import of its module", "construct": "the factory"}.get(method, f"{method}()")
        if self.process.poll() is not None:
            raise self._error(f"its worker process had already ended (exit code {self.process.returncode}) before {what}")
        try:
            self.connection.send(request)
        except OSError as exc:
            raise self._error(f"could not send {what} to its worker process: {exc}") from None
        self.healthy = False
        answer = self._answer(what, deadline)
        self.healthy = True  # an answer came: the worker is usable (a plug-in's own exception leaves it so)
        if answer[0] == "ok":
            return answer[1]
        _log.error("retriever %r on dataset %r: %s failed in the plug-in:\n%s", self.retriever, self.dataset, what, answer[2])
        raise self._error(f"{what} failed in the plug-in: {answer[1]}")

    def _answer(self, what: str, deadline: float) -> tuple[Any, ...]:
        end = time.monotonic() + deadline
        while True:
            stop.check()
            left = end - time.monotonic()
            try:
                if self.connection.poll(max(0.0, min(POLL_S, left))):
                    return self.connection.recv()
            except (EOFError, OSError):
                code = self.process.wait(timeout=5)
                raise self._error(
                    f"its worker process ended during {what} with exit code {code} (os._exit or a crash in the plug-in)"
                ) from None
            if self.process.poll() is not None and not self.connection.poll(0):
                raise self._error(
                    f"its worker process ended during {what} with exit code {self.process.returncode} (os._exit or a crash in the plug-in)"
                )
            if left <= 0:
                self._kill()
                raise self._error(f"{what} did not answer within timeout_s={deadline:g} s: its worker process was stopped")

    def _error(self, message: str) -> RetrieverError:
        return RetrieverError(f"retriever {self.retriever!r} (python) on dataset {self.dataset!r}: {message}")

    def close(self) -> None:
        """Give the worker back for the next object of the same module (a build's, then a load's), or end it.

        A worker whose last call failed, timed out or died is ended (asked first, killed after a second).
        """
        worker, self.worker = self.worker, None
        if worker is None:
            return
        if self.healthy and worker.alive():
            previous = _IDLE.pop(self.key, None)
            _IDLE[self.key] = worker
            if previous is not None:
                previous.end()
            return
        worker.end()

    def _kill(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.process.kill()  # it is busy in the plug-in: it would not read a request to close
            worker.end()


def _end(process: subprocess.Popen, connection: Connection) -> None:
    try:
        connection.send(("close",))
    except (OSError, ValueError):
        pass
    connection.close()
    try:
        process.wait(timeout=1)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class PluginRetriever:
    """The searchable side of a loaded plug-in: ``search`` goes to its worker process under the deadline."""

    def __init__(self, worker: PluginProcess, name: str) -> None:
        self.worker = worker
        self.name = name

    def search(self, queries: Sequence[str], k: int) -> list[Any]:
        return self.worker.call("search", list(queries), k)

    def close(self) -> None:
        self.worker.close()
