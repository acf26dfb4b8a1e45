"""One partition per dataset in the registry (``data/config/datasets.yaml``)."""

import os
import warnings

import dagster as dg

from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, registry_at

REGISTRY_PATH = os.environ.get("RETRIEVAL_PIPELINE_REGISTRY", str(DEFAULT_REGISTRY_PATH))
REGISTRY = registry_at(REGISTRY_PATH)  # the same copy the assets read (PipelineSettings.registry)

dataset_partitions = dg.StaticPartitionsDefinition(REGISTRY.names)


def datasets_note() -> str:
    """What the UI should say about partitions that cannot be materialised here, and why."""
    lines = []
    for name, config in REGISTRY.datasets.items():
        for path in config.missing_inputs()[:1]:
            fix = "create it with `make adk-env`" if path == config.verifier.python else "place ../shared/data beside the project"
            lines.append(f"- `{name}`: {path} is missing here; {fix}")
    lines += [f"- `{name}`: invalid settings in datasets.yaml: {error}" for name, error in REGISTRY.errors.items()]
    if not lines:
        return ""
    return "\n\nPartitions that will fail until fixed (grey in the partition bar):\n" + "\n".join(lines)


def partitioned_check_spec(name: str, asset: str, *, description: str, blocking: bool = False) -> dg.AssetCheckSpec:
    """A check whose every result is recorded against its dataset partition.

    Without ``partitions_def``, Dagster stores a check result on a partitioned asset with no partition:
    the UI then shows the latest result of whichever dataset ran last (a passing dataset masks a failing
    one) and plots join datasets. Partitioned check specs are a Dagster 1.13 *preview* feature; the
    PreviewWarning is silenced here, in the one place that uses it, on purpose.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(name, asset=asset, description=description, blocking=blocking, partitions_def=dataset_partitions)
