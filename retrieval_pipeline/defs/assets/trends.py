"""Each dataset's headline metrics over time: one ``metric_trends/<dataset>`` asset per dataset, fed by observations.

Dagster plots an asset's numeric metadata. ``retrieval_metrics`` is partitioned by dataset, and a partitioned
asset's plots join its partitions (in "Partitions" mode the x-axis is the dataset, in "Events" mode every
dataset's evaluations on one line), so a line from stdlib to python_nq would read as a trend that does not
exist. Of Dagster's idioms for a per-dataset series (multi-partitions dataset x week, per-dataset asset keys,
asset observations) this uses **observations on per-dataset asset keys**: each ``retrieval_metrics``
materialisation logs one ``AssetObservation`` on its dataset's ``metric_trends/<dataset>`` (an unpartitioned,
non-executable asset declared here), holding hit@5, MRR and nDCG@10 of the dataset's baseline and production
retriever. An unpartitioned asset's plots have time on the x-axis and only that dataset's points. The specs
declare no dependency on ``retrieval_metrics``: a selection such as ``retrieval_runs*`` must not take in these
non-executable assets (Dagster refuses to materialise them).
Multi-partitions (dataset x week) would re-key every asset of the graph and its stored files, and show
weeks, not evaluations; a run on Tuesday would overwrite Monday's.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from retrieval_pipeline.core.evaluation.metrics import metric_label
from retrieval_pipeline.core.evaluation.scoring import TREND_METRICS, trend_values
from retrieval_pipeline.core.registry import DatasetConfig
from retrieval_pipeline.defs.partitions import REGISTRY

#: The asset group of the trend assets.
GROUP = "metric_trends"


def trend_key(dataset: str) -> dg.AssetKey:
    return dg.AssetKey(["metric_trends", dataset])


def trend_retrievers(config: DatasetConfig) -> list[str]:
    """The retrievers whose metrics are plotted over time: the baseline and the production retriever when the
    dataset names one; otherwise every retriever it lists (there is no production retriever to single out)."""
    if config.production:
        return list(dict.fromkeys([config.baseline_retriever, config.production]))
    return list(config.retrievers)


def _spec(dataset: str) -> dg.AssetSpec:
    labels = ", ".join(metric_label(m) for m in TREND_METRICS)
    config = REGISTRY.datasets.get(dataset)
    if config is None:  # invalid settings: the registry names the error; the key still exists for the partition
        whose = "the dataset's baseline and production retriever"
    elif config.production:
        whose = f"{config.baseline_retriever} (baseline) and {config.production} (production)"
    else:
        whose = f"every retriever {dataset} lists ({', '.join(config.retrievers)}; it names no production one)"
    return dg.AssetSpec(
        key=trend_key(dataset),
        group_name=GROUP,
        description=f"metric_trends/{dataset}: {labels} of {whose}, over time: one observation per retrieval_metrics "
        f"evaluation of {dataset}, this dataset's points only. Overview, Metadata, Plots: the x-axis is time.",
        kinds={"plot"},
    )


trend_specs = [_spec(name) for name in REGISTRY.names]


def trend_observation(
    dataset: str, config: DatasetConfig, by_retriever: Mapping[str, Mapping[str, float]], run_id: str
) -> dg.AssetObservation:
    """The observation ``retrieval_metrics`` logs on ``metric_trends/<dataset>``: floats to plot, the rest text."""
    values = trend_values(by_retriever, trend_retrievers(config))
    return dg.AssetObservation(
        asset_key=trend_key(dataset),
        metadata={
            **{label: dg.MetadataValue.float(v) for label, v in values.items()},
            "baseline": config.baseline_retriever,
            "production": config.production or "(none named)",
            "run": run_id,
        },
    )
