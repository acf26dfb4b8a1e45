"""Fusion tuned honestly: each hybrid's alpha or RRF k chosen on a seeded dev half, reported on the test half."""

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.evaluation.scoring import evaluated_qrels
from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import sweep
from retrieval_pipeline.core.registry import DatasetConfig, Registry
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import dataset_partitions
from retrieval_pipeline.defs.resources import PipelineSettings

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


def _hybrids(registry: Registry, config: DatasetConfig) -> tuple[list, list[str]]:
    """The dataset's hybrid specs in its retriever order, and ``"<name>: <reason>"`` for names whose spec cannot be read."""
    specs, unreadable = [], []
    for name in config.retrievers:
        try:
            spec = registry.retrievers.get(name)
        except RetrieverError as exc:
            unreadable.append(f"{name}: {exc}")
            continue
        if spec.kind == "hybrid":
            specs.append(spec)
    return specs, unreadable


@dg.asset(partitions_def=dataset_partitions, group_name=GROUP, kinds={"pandas"})
def fusion_sweep(
    context: dg.AssetExecutionContext, settings: PipelineSettings, retrieval_runs: pd.DataFrame, retrieval_dataset: pd.DataFrame
) -> dg.MaterializeResult[pd.DataFrame]:
    """Sweep each hybrid's fusion parameter (min-max alpha, RRF k); choose on dev, report on test.

    The queries are split by a keyed hash of ``(tuning.seed, query_id)`` (stable as queries are added);
    the components' stored runs are re-fused at every grid value (exactly what the hybrid computes), the
    value with the best dev ``tuning.objective`` is chosen, and the test half's numbers are the ones to
    quote: chosen versus configured value, next to each component alone. The value is the sweep curve
    (one row per hybrid, value and half); the metadata holds the chosen values and a table.
    """
    registry = settings.registry()
    config = registry.get(context.partition_key)
    hybrids, unreadable = _hybrids(registry, config)
    qrels = evaluated_qrels(retrieval_runs, retrieval_dataset)
    result = sweep(retrieval_runs, qrels, hybrids, config.tuning, config.retrieval.depth, dataset=context.partition_key)
    for reason in [*unreadable, *result.skipped]:
        context.log.warning(f"fusion_sweep {context.partition_key}: skipped {reason}")
    if result.note:
        context.log.warning(result.note)
    meta = result.metadata()
    meta["skipped"] = [*unreadable, *result.skipped]
    meta["hybrids"] = len(result.chosen)
    meta["seed"] = config.tuning.seed
    meta["dev_share"] = config.tuning.dev_share
    return dg.MaterializeResult(value=result.curve, metadata=dagster_metadata(meta))
