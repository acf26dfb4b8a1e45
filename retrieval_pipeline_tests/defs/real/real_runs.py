"""What the real-model runs share: materialise every asset of one dataset, read metadata, check floors."""

from __future__ import annotations

import dagster as dg

from retrieval_pipeline.core.registry import load_registry
from retrieval_pipeline.definitions import defs

#: The verifier's multi-asset (both outputs: it is not subsettable).
VERIFIER_ASSETS = ("question_verdicts", "quality_report")


def run(partition, resources, instance, *, without=()):
    """Materialise every asset of ``partition`` but the assets named in ``without`` (user strings)."""
    selection = dg.AssetSelection.all() - dg.AssetSelection.assets(*without) if without else None
    return dg.materialize(
        list(defs().assets), partition_key=partition, resources=resources, instance=instance, raise_on_error=False, selection=selection
    )


def metadata(result, key):
    event = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey.from_user_string(key)][0]
    return {k: _number(v.value) for k, v in event.materialization.metadata.items()}


def _number(value):
    """Counts on partitioned assets are text (no UI plot joins datasets): read them back as numbers."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


def assert_checks_agree_with_metrics(result, dataset):
    """Each threshold check passed exactly when every checked retriever met the configured floor."""
    config = load_registry().get(dataset)
    table = result.asset_value("retrieval_metrics").set_index("retriever")
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    for metric, threshold in config.thresholds.items():
        expected = bool((table.loc[config.checked, metric] >= threshold.min).all())
        check = evaluations["min_" + metric.replace("@", "_at_")]
        assert check.passed == expected, metric
        assert check.severity.value == threshold.severity
    return table
