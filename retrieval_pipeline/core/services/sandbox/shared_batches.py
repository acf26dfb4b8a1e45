"""One batch sandbox for the files that several threads hand in at about the same time.

A batch (:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_pytest_batch`) pays once for its runner's
start: the interpreter, pytest imported and one throw-away session, the library under test preloaded (about
2 s for google-adk). The verifier proves the questions of a suite on several threads, each question's proofs
one batch; with :class:`SharedBatches` the threads hand their files in, and whichever thread finds a batch
slot free runs everything handed in so far (same sandbox settings, up to ``max_files``) as one batch and gives
each thread its own results back. Each file still runs alone in an emptied working directory, in a process of
its own, and its result is matched to it by position, so a file's result is what its own question's batch
would give it (``test_batch.py`` holds a batch's results equal to each file's alone).

What is shared is only what a batch already shares among one question's proofs: the runner's start, and the
outcome of a limit that binds the whole batch (the process or memory limit: then no file of it is reported,
and each thread runs its files alone, as after a batch of its own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest_batch
from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings

#: ``run(tests, settings) -> results``: :func:`run_pytest_batch` (tests pass a fake).
BatchRunner = Callable[[Sequence[tuple[str, str]], SandboxSettings], list[Execution | None]]


@dataclass
class _Request:
    tests: list[tuple[str, str]]
    settings: SandboxSettings
    results: list[Execution | None] | None = None
    error: BaseException | None = None
    done: bool = False


class SharedBatches:
    """Runs the files handed in by several threads in shared batch sandboxes, at most ``slots`` at once.

    Args:
        slots: Batches running at once (the verifier's: its questions verified at once).
        max_files: Files in one batch at most: a batch runs its files one after another, so a long one
            would hold a slot while other threads wait with files of their own.
        runner: What runs a batch; default :func:`run_pytest_batch`.
    """

    def __init__(self, slots: int, max_files: int = 48, runner: BatchRunner | None = None) -> None:
        if slots < 1 or max_files < 1:
            raise ValueError(f"slots and max_files must be at least 1, got {slots} and {max_files}")
        self.slots, self.max_files = slots, max_files
        self._runner = runner or run_pytest_batch
        self._changed = threading.Condition()
        self._pending: list[_Request] = []
        self._running = 0

    def run(self, tests: Sequence[tuple[str, str]], settings: SandboxSettings) -> list[Execution | None]:
        """The results of ``tests`` (as :func:`run_pytest_batch` gives them), run in a batch shared with other threads' files."""
        request = _Request(list(tests), settings)
        if not request.tests:
            return []
        with self._changed:
            self._pending.append(request)
            while not request.done:
                if self._running < self.slots and self._pending:
                    self._run_group(self._take())
                else:
                    self._changed.wait()
        if request.error is not None:
            raise request.error
        return list(request.results or [])

    def _take(self) -> list[_Request]:
        """The oldest pending request and the later ones of the same settings that fit in ``max_files`` (under the lock)."""
        first = self._pending[0]
        group, files = [], 0
        for request in list(self._pending):
            if request.settings != first.settings or (group and files + len(request.tests) > self.max_files):
                continue
            group.append(request)
            files += len(request.tests)
            self._pending.remove(request)
        return group

    def _run_group(self, group: list[_Request]) -> None:
        """Run ``group`` as one batch with the lock released; hand out the results, or the error, to each request."""
        self._running += 1
        self._changed.release()
        try:
            results = self._runner([t for r in group for t in r.tests], group[0].settings)
            error = None
        except BaseException as exc:  # noqa: BLE001 - handed to every thread of the group, which raises it
            results, error = [], exc
        finally:
            self._changed.acquire()
            self._running -= 1
        start = 0
        for request in group:
            if error is None:
                request.results = results[start : start + len(request.tests)]
                start += len(request.tests)
            request.error, request.done = error, True
        self._changed.notify_all()
