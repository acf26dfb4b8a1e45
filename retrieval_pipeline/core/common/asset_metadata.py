"""Asset metadata as plain values: what core computes for the orchestration layer to display.

Core functions return metadata as a ``{name: value}`` dict of plain Python values; the Dagster layer
maps each value to its display kind by type (``retrieval_pipeline.defs.metadata.dagster_metadata``):

* :class:`Markdown` (a ``str``): rendered as Markdown (tables, reports);
* :class:`Table`: a table with typed columns, shown inline on the asset page (Dagster's ``TableMetadataValue``);
* a :class:`~pathlib.Path`: a file path;
* a ``dict`` or ``list``: JSON;
* anything else (numbers, plain strings, ``None``): as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: Asset metadata: name -> plain value (see the module docstring for how each type is shown).
Metadata = dict[str, Any]


class Markdown(str):
    """A string meant to be rendered as Markdown; equal to (and usable as) the plain string."""

    __slots__ = ()


@dataclass(frozen=True)
class Table:
    """Rows under typed columns: ``columns`` is ``[(name, type)]`` with type ``"string"``, ``"float"`` or ``"int"``.

    Shown inline on the asset page, without a click; a table's numbers are not plotted across partitions
    (the UI plots only top-level numeric entries), so a count may live here.
    """

    columns: tuple[tuple[str, str], ...]
    rows: tuple[dict[str, Any], ...]


@dataclass(kw_only=True)
class StageResult:
    """What one stage produced: its table, its metadata and the warnings to log.

    Attributes:
        frame: The stage's output table.
        summary: Headline values (counts, names), shown first.
        details: Larger values (JSON breakdowns, Markdown previews), shown last.
        warnings: Messages for the run's log, in the order they arose.
    """

    frame: pd.DataFrame
    summary: Metadata = field(default_factory=dict)
    details: Metadata = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def metadata(self, *extra: Mapping[str, Any]) -> Metadata:
        """The summary, then each ``extra`` mapping (e.g. LLM usage counts) in order, then the details."""
        out: Metadata = dict(self.summary)
        for more in extra:
            out.update(more)
        out.update(self.details)
        return out


def md_preview(frame: pd.DataFrame, n: int = 20, max_chars: int = 120) -> str:
    """The first ``n`` rows as a markdown table, long cells cut to ``max_chars``."""
    if frame.empty:
        return "_none_"
    head = frame.head(n).copy()
    for col in head.columns:
        if head[col].dtype == object:
            head[col] = head[col].map(lambda v: v if not isinstance(v, str) or len(v) <= max_chars else v[: max_chars - 1] + "…")
    suffix = f"\n\n_{len(frame) - n} more rows_" if len(frame) > n else ""
    return head.to_markdown(index=False) + suffix
