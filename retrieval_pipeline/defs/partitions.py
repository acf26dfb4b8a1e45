"""One partition per dataset in the registry (``data/config/datasets.yaml``)."""

import os

import dagster as dg

from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry

REGISTRY_PATH = os.environ.get("RETRIEVAL_PIPELINE_REGISTRY", str(DEFAULT_REGISTRY_PATH))
REGISTRY = load_registry(REGISTRY_PATH)

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
