"""One partition per dataset in the registry (``data/config/datasets.yaml``)."""

import os

import dagster as dg

from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry

REGISTRY_PATH = os.environ.get("RETRIEVAL_PIPELINE_REGISTRY", str(DEFAULT_REGISTRY_PATH))
REGISTRY = load_registry(REGISTRY_PATH)

dataset_partitions = dg.StaticPartitionsDefinition(REGISTRY.names)
