"""Warnings for a run that cannot be what was meant: empty, or sharing no query with its qrels.

Such a pair scores 0 on every metric; it is almost always the wrong pair of files (a run of another
collection, qrels of another split, a retriever that answered nothing). The API warns with the categories
below (``warnings.warn``, so ``-W error::retrieval_pipeline.RunQrelsWarning`` turns them into errors), the
command line prints the same line on stderr, and the pipeline logs it and records it in metadata.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


class RunQrelsWarning(UserWarning):
    """A run and its qrels that cannot be what was meant (base category)."""


class EmptyRunWarning(RunQrelsWarning):
    """The run holds no hit for any query."""


class NoSharedQueryWarning(RunQrelsWarning):
    """The run answers queries, but none of them is in the qrels."""


def overlap_problem(qrels: Collection[str], run: Mapping[str, Any], label: str = "run") -> tuple[type[RunQrelsWarning], str] | None:
    """The warning a run deserves against its qrels, or None.

    Args:
        qrels: The qrels' query ids.
        run: ``{query_id: hits}`` (any sized container of hits per query).
        label: What the run is called in the message.

    Returns:
        ``(category, message)`` for an empty run or one that shares no query with the qrels; None otherwise.
    """
    answered = [query for query, hits in run.items() if len(hits)]
    if not answered:
        return EmptyRunWarning, f"{label} is empty (no hit for any query): every metric is 0; is it the right file?"
    judged = set(qrels)
    if not any(query in judged for query in answered):
        seen = ", ".join(repr(q) for q in answered[:3])
        expected = ", ".join(repr(q) for q in list(qrels)[:3])
        return NoSharedQueryWarning, (
            f"{label} shares no query id with the qrels ({len(answered)} run queries, e.g. {seen}; qrels has e.g. {expected}): "
            "every metric is 0; is it the right pair of files?"
        )
    return None
