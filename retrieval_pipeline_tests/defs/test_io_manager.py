"""The Parquet IO manager: a step's one-partition input is read without Dagster's per-input DEBUG events."""

from __future__ import annotations

import dagster as dg
import pandas as pd
import pytest

from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory

PARTITIONS = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=PARTITIONS)
def upstream(context) -> pd.DataFrame:
    return pd.DataFrame({"partition": [context.partition_key], "n": [len(context.partition_key)]})


@dg.asset(partitions_def=PARTITIONS)
def downstream(upstream: pd.DataFrame) -> pd.DataFrame:
    return upstream.assign(n=upstream["n"] + 1)


def _messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Every event the instance stored for the run, DEBUG log lines included."""
    return [entry.message or "" for entry in instance.all_logs(run_id)]


def test_one_partition_is_read_without_the_loading_events_and_its_value_is_the_one_written(tmp_path):
    resources = {"io_manager": ParquetIOManagerFactory(base_path=str(tmp_path))}
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize([upstream], partition_key="a", resources=resources, instance=instance)
    result = dg.materialize([upstream, downstream], partition_key="a", resources=resources, instance=instance,
                            selection=[downstream])  # fmt: skip
    assert result.success
    assert result.asset_value("downstream").to_dict("list") == {"partition": ["a"], "n": [2]}
    messages = _messages(instance, result.run_id)
    assert any("Writing file at" in m for m in messages)  # DEBUG lines are stored (so their absence below means something)
    assert not [m for m in messages if m.startswith(("Loading 1 partitions", "Loading partition"))]
    assert any(e.event_type_value == "LOADED_INPUT" for e in result.all_events)  # the input is still accounted for


def test_a_missing_partition_still_fails_through_dagster(tmp_path):
    resources = {"io_manager": ParquetIOManagerFactory(base_path=str(tmp_path))}
    with pytest.raises(Exception, match="b.parquet|No such file"):
        dg.materialize([upstream, downstream], partition_key="b", resources=resources, selection=[downstream])
