"""Core's plain metadata values as Dagster metadata (core never imports dagster).

Every asset of the project is partitioned by dataset, and the UI draws each top-level numeric metadata entry of
a partitioned asset as a line across its partitions (stdlib, then python_nq, ...), which reads as a trend from
one dataset to the next. So :func:`dagster_metadata` writes every number as text; the numbers a user wants
over time go to each dataset's own ``metric_trends/<dataset>`` asset as observations
(``retrieval_pipeline.defs.assets.trends``), where the x-axis is time.
"""

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import dagster as dg

from retrieval_pipeline.core.common.asset_metadata import Markdown, Table


def dagster_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Core's plain metadata values as Dagster's: Markdown, tables, paths and JSON (dict, list) wrapped; numbers as
    text (:func:`as_text`), so no UI plot joins datasets; the rest as is."""

    def wrap(value: Any) -> Any:
        if isinstance(value, Table):
            return table_metadata(value)
        if isinstance(value, Markdown):
            return dg.MetadataValue.md(str(value))
        if isinstance(value, PurePath):
            return dg.MetadataValue.path(str(value))
        if isinstance(value, (dict, list)):
            return dg.MetadataValue.json(value)
        return as_text(value)

    return {key: wrap(value) for key, value in values.items()}


def table_metadata(table: Table) -> dg.TableMetadataValue:
    """A core :class:`Table` as Dagster's table metadata, with its schema (the asset page shows it inline)."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in table.columns])
    return dg.MetadataValue.table(records=[dg.TableRecord(dict(row)) for row in table.rows], schema=schema)


def as_text(value: Any) -> Any:
    """A number as text (4 significant digits; ``bool`` stays), anything else as is.

    The UI draws every top-level numeric entry of a partitioned asset as a line across its partitions, in
    partition order, which reads as a trend from one dataset to the next: counts and settings of partitioned
    assets are therefore text.
    """
    if isinstance(value, (dg.IntMetadataValue, dg.FloatMetadataValue)):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and value != value:
        return "n/a"
    return str(value) if isinstance(value, int) else f"{value:.4g}"
