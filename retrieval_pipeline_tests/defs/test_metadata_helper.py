"""The defs layer's one conversion of core's plain metadata values into Dagster's."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.defs.metadata import dagster_metadata


def test_markdown_paths_and_json_are_wrapped_the_rest_passes_through():
    converted = dagster_metadata(
        {
            "n": 3,
            "rate": 0.5,
            "name": "bm25",
            "none": None,
            "table": Markdown("| a |"),
            "file": Path("/tmp/x.jsonl"),
            "counts": {"kept": 2},
            "ids": ["q1"],
        }
    )
    assert converted["n"] == 3 and converted["rate"] == 0.5 and converted["name"] == "bm25" and converted["none"] is None
    assert converted["table"] == dg.MetadataValue.md("| a |")
    assert converted["file"] == dg.MetadataValue.path("/tmp/x.jsonl")
    assert converted["counts"] == dg.MetadataValue.json({"kept": 2}) and converted["ids"] == dg.MetadataValue.json(["q1"])
    assert list(converted) == ["n", "rate", "name", "none", "table", "file", "counts", "ids"]
