"""Core's plain metadata values as Dagster metadata (core never imports dagster)."""

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import dagster as dg

from retrieval_pipeline.core.common.asset_metadata import Markdown


def dagster_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Core's plain metadata values as Dagster's: Markdown, paths and JSON (dict, list) wrapped; the rest as is."""

    def wrap(value: Any) -> Any:
        if isinstance(value, Markdown):
            return dg.MetadataValue.md(str(value))
        if isinstance(value, PurePath):
            return dg.MetadataValue.path(str(value))
        if isinstance(value, (dict, list)):
            return dg.MetadataValue.json(value)
        return value

    return {key: wrap(value) for key, value in values.items()}
