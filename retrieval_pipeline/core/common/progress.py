"""Progress of a long step: throttled lines with counts, rate and ETA, and a tqdm bar on a terminal.

:class:`Progress` is what every long step reports to: embedding a corpus (after each committed shard),
introspecting the installed packages (per package group), tokenizing a BM25 corpus, verifying questions
and a batch of LLM calls. A step calls it as ``progress(done, total)`` (or :meth:`Progress.advance`), and it

* writes a line through ``emit`` for the first report, then at most one every ``every_seconds``, and always
  the last: ``dense_minilm: embedded 12,800 / 100,000 new texts (12.8%), 180 texts/s, ETA 9 min``;
* draws a tqdm bar when there is a terminal, cleared when the step is done.

**The ETA leaves out the start.** The rate is measured from the first report on, so what happens before the
first unit is done (loading a model and exporting it to ONNX, probing the verifier's environment, starting a
child process) is not part of it: the ETA is what is left over the rate of the work itself. The bar opens at
the first report with tqdm's ``initial`` set to it, so tqdm's rate and ETA leave out the same. The last line
says how long the whole step took, its start included.

**Where the lines go**: ``emit`` when given (the dense build passes its context's logger), else the one a
Dagster asset made active around its call into core with :func:`progress_to` (a context variable: no logger
is threaded through the stages), else nowhere. A step of one unit or none reports nothing.

**Which terminal.** Dagster sends a step's stderr to its compute log through a pipe, so inside a step stderr
is never a terminal: the runner (``retrieval_pipeline.cli.run``) hands over its own with :func:`bars_on` when
its stderr is one. Outside a runner (a script, a notebook, a test) the bar goes to ``sys.stderr`` when that is
a terminal. No terminal: lines only.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from tqdm import tqdm

#: ``progress(done, total)``: what a long step calls as it goes.
ProgressCallback = Callable[[int, int], None]
#: Receives one line (``context.log.info``, ``print``, ``list.append``).
Emit = Callable[[str], None]

#: Seconds between two progress lines (the first and the last are always written).
PROGRESS_EVERY_SECONDS = 5.0
#: tqdm's layout, with the rate always as units per second: ``verifier:  28%|███   | 11/39 [00:33<01:38,  0.31 questions/s]``.
_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}]"

_EMIT: contextvars.ContextVar[Emit | None] = contextvars.ContextVar("progress_emit", default=None)
#: The runner's terminal (:func:`bars_on`); None: ``sys.stderr`` when it is a terminal.
_terminal: TextIO | None = None


@contextlib.contextmanager
def progress_to(emit: Emit) -> Iterator[None]:
    """Send the lines of every :class:`Progress` made in this block without an ``emit`` of its own to ``emit``."""
    token = _EMIT.set(emit)
    try:
        yield
    finally:
        _EMIT.reset(token)


@contextlib.contextmanager
def bars_on(terminal: TextIO) -> Iterator[None]:
    """Draw the bars of this process on ``terminal`` inside the block (a runner's stderr, taken before Dagster pipes it)."""
    global _terminal
    saved, _terminal = _terminal, terminal
    try:
        yield
    finally:
        _terminal = saved


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` says it is a terminal (False for streams without ``isatty`` or closed ones)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


class Progress:
    """A ``progress(done, total)`` callback: throttled lines through ``emit``, and a tqdm bar on a terminal.

    Args:
        name: What runs (a retriever, a dataset), first on every line and the bar's label.
        verb: What was done to the units, e.g. ``embedded``.
        noun: The units counted, e.g. ``new texts``.
        unit: The units of the rate, e.g. ``texts`` (``180 texts/s``).
        total: The units in all, for :meth:`advance` (``__call__`` passes it each time).
        emit: Receives each line; None: the one :func:`progress_to` made active, if any.
        stream: Where the bar goes; None: the runner's terminal (:func:`bars_on`), else ``sys.stderr``.
        bar: Draw the bar (True), never (False), or when ``stream`` is a terminal (None).
        every_seconds: The least time between two lines (but the first and the last).
        clock: Seconds, monotonic (injectable for tests; the bar keeps tqdm's own clock).
    """

    def __init__(
        self,
        name: str,
        *,
        verb: str = "embedded",
        noun: str = "new texts",
        unit: str = "texts",
        total: int = 0,
        emit: Emit | None = None,
        stream: TextIO | None = None,
        bar: bool | None = None,
        every_seconds: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.verb, self.noun, self.unit = name, verb, noun, unit
        self.done, self.total = 0, total
        self.emit = emit if emit is not None else _EMIT.get()
        out = stream if stream is not None else (_terminal or sys.stderr)
        self.stream = out if (is_terminal(out) if bar is None else bar) else None
        self.every_seconds = every_seconds
        self._clock = clock
        self._start = clock()
        self._first: tuple[float, int] | None = None  # (time, done) of the first report: where the rate starts
        self._last_line: float | None = None
        self.bar: tqdm | None = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __call__(self, done: int, total: int) -> None:
        """Note that ``done`` of ``total`` units are done: move the bar, and write a line if one is due."""
        now = self._clock()
        self.done, self.total = done, total
        if total <= 1:
            return
        if self._first is None:
            self._first = (now, done)
        finished = done >= total
        self._draw(done, total, finished)
        if self.emit is not None and (finished or self._last_line is None or now - self._last_line >= self.every_seconds):
            self._last_line = now
            self.emit(self.line(done, total, now))

    def advance(self, units: int = 1) -> None:
        """``units`` more are done (of the ``total`` given when made)."""
        self(self.done + units, self.total)

    def rate(self, done: int, now: float) -> float | None:
        """Units per second since the first report; None before a later report has counted any."""
        if self._first is None or done <= self._first[1] or now <= self._first[0]:
            return None
        return (done - self._first[1]) / (now - self._first[0])

    def line(self, done: int, total: int, now: float) -> str:
        """The line for ``done`` of ``total`` at ``now``: the rate from the first report, and the ETA or the time taken.

        The first line of an unfinished step has no rate yet: it says how long the first report took.
        """
        elapsed, rate = now - self._start, self.rate(done, now)
        if rate is None and done < total:
            share = 100.0 * done / total
            return f"{self.name}: {self.verb} {done:,} / {total:,} {self.noun} ({share:.1f}%), the first after {duration(elapsed)}"
        return progress_line(self.name, done, total, elapsed, rate=rate, verb=self.verb, noun=self.noun, unit=self.unit)

    def close(self) -> None:
        """Clear the bar, if one is drawn."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _draw(self, done: int, total: int, finished: bool) -> None:
        if self.stream is None:
            return
        if self.bar is None and not finished:  # opened at the first report: tqdm's rate starts there too
            self.bar = tqdm(
                total=total, initial=done, desc=self.name, unit=f" {self.unit}", file=self.stream, bar_format=_BAR,
                leave=False, dynamic_ncols=True, mininterval=0.5, disable=False,
            )  # fmt: skip
        elif self.bar is not None:
            self.bar.total = total
            self.bar.update(done - self.bar.n)
        if finished:
            self.close()


def progress_line(
    name: str,
    done: int,
    total: int,
    elapsed: float,
    *,
    rate: float | None = None,
    verb: str = "embedded",
    noun: str = "new texts",
    unit: str = "texts",
) -> str:
    """One progress line: counts, percentage, rate and ETA (or, when finished, the time taken).

    Args:
        name: What runs.
        done: Units done so far.
        total: Units in all.
        elapsed: Seconds since the step started.
        rate: Units per second for the rate and the ETA; None: ``done / elapsed`` (the start included).
        verb: What was done to the units.
        noun: The units counted.
        unit: The units of the rate.

    Returns:
        E.g. ``"dense_minilm: embedded 12,800 / 100,000 new texts (12.8%), 180 texts/s, ETA 9 min"``.
    """
    if rate is None:
        rate = done / elapsed if elapsed > 0 else 0.0
    share = 100.0 * done / total if total else 100.0
    if done >= total:
        when = f"done in {duration(elapsed)}"
    else:
        when = f"ETA {duration((total - done) / rate)}" if rate > 0 else "ETA unknown"
    shown = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"  # 180 texts/s, 0.35 questions/s
    return f"{name}: {verb} {done:,} / {total:,} {noun} ({share:.1f}%), {shown} {unit}/s, {when}"


def duration(seconds: float) -> str:
    """``"42 s"`` under a minute, ``"9 min"`` (rounded up) under two hours, else ``"2.5 h"``."""
    if seconds < 60:
        return f"{math.ceil(seconds)} s"
    if seconds < 7200:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
