"""The defs layer's one conversion of core's plain metadata values into Dagster's."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.defs.metadata import dagster_metadata


def test_markdown_paths_and_json_are_wrapped_numbers_become_text_the_rest_passes_through():
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
    # numbers as text: every asset is partitioned by dataset, and the UI would plot a number across the datasets
    assert converted["n"] == "3" and converted["rate"] == "0.5" and converted["name"] == "bm25" and converted["none"] is None
    assert converted["table"] == dg.MetadataValue.md("| a |")
    assert converted["file"] == dg.MetadataValue.path("/tmp/x.jsonl")
    assert converted["counts"] == dg.MetadataValue.json({"kept": 2}) and converted["ids"] == dg.MetadataValue.json(["q1"])
    assert list(converted) == ["n", "rate", "name", "none", "table", "file", "counts", "ids"]


def test_a_table_keeps_its_schema_and_text_numbers_keep_bools():
    from retrieval_pipeline.core.common.asset_metadata import Table
    from retrieval_pipeline.defs.metadata import as_text

    converted = dagster_metadata({"t": Table((("retriever", "string"), ("hit@5", "float")), ({"retriever": "bm25", "hit@5": 0.5},))})
    assert isinstance(converted["t"], dg.TableMetadataValue)
    assert [(c.name, c.type) for c in converted["t"].schema.columns] == [("retriever", "string"), ("hit@5", "float")]
    assert converted["t"].records[0].data == {"retriever": "bm25", "hit@5": 0.5}  # inside a table: not plotted
    assert (as_text(True), as_text(float("nan")), as_text(0.123456), as_text(dg.MetadataValue.int(7))) == (True, "n/a", "0.1235", "7")
