"""Progress lines of a long embedding: throttled, with counts, rate and ETA, for any ``emit(line)``.

:class:`ProgressLog` is a ``progress(done, total)`` callback (what
:meth:`~retrieval_pipeline.core.retrieval.embed_cache.EmbeddingCache.get_or_encode` calls after each committed
shard) that writes a line through ``emit``: the Dagster asset passes ``context.log.info``, a script ``print``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: Seconds between two progress lines of :class:`ProgressLog` (the last line is always written).
PROGRESS_EVERY_SECONDS = 5.0


class ProgressLog:
    """A ``progress(done, total)`` callback that writes throttled lines such as

    ``dense_minilm: embedded 12,800 / 100,000 new texts (12.8%), 180 texts/s, ETA 9 min``.

    A line is written for the first shard, then at most one every ``every_seconds``, and always for the
    last (``done == total``, which says how long it took instead of the ETA). The rate is measured from
    the moment this object was made.

    Args:
        name: The retriever's name, first on every line.
        emit: Receives each line (``context.log.info``, ``print``, ``list.append``).
        every_seconds: The least time between two lines (but the last).
        clock: Seconds, monotonic (injectable for tests).
    """

    def __init__(
        self,
        name: str,
        emit: Callable[[str], None],
        every_seconds: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.emit = emit
        self.every_seconds = every_seconds
        self._clock = clock
        self._start = clock()
        self._last: float | None = None

    def __call__(self, done: int, total: int) -> None:
        """Note that ``done`` of ``total`` texts are embedded; write a line if one is due."""
        now = self._clock()
        if done < total and self._last is not None and now - self._last < self.every_seconds:
            return
        self._last = now
        self.emit(progress_line(self.name, done, total, now - self._start))


def progress_line(name: str, done: int, total: int, elapsed: float) -> str:
    """One progress line: counts, percentage, rate and ETA (or, when finished, the time taken).

    Args:
        name: The retriever's name.
        done: Texts embedded so far.
        total: Texts to embed in all.
        elapsed: Seconds since embedding started.

    Returns:
        E.g. ``"dense_minilm: embedded 12,800 / 100,000 new texts (12.8%), 180 texts/s, ETA 9 min"``.
    """
    rate = done / elapsed if elapsed > 0 else 0.0
    share = 100.0 * done / total if total else 100.0
    if done >= total:
        when = f"done in {_duration(elapsed)}"
    else:
        when = f"ETA {_duration((total - done) / rate)}" if rate > 0 else "ETA unknown"
    return f"{name}: embedded {done:,} / {total:,} new texts ({share:.1f}%), {rate:,.0f} texts/s, {when}"


def _duration(seconds: float) -> str:
    """``"42 s"`` under a minute, ``"9 min"`` (rounded up) under two hours, else ``"2.5 h"``."""
    if seconds < 60:
        return f"{math.ceil(seconds)} s"
    if seconds < 7200:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
