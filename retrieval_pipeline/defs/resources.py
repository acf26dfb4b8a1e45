"""Resources: where outputs live, which encoder embeds, where alerts go. Secrets come from the environment."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg

from retrieval_pipeline.core.common.paths import CACHE_ROOT, PROJECT_ROOT, child_path
from retrieval_pipeline.core.registry import DatasetConfig, Registry, registry_at
from retrieval_pipeline.core.report.alerts import AlertSink
from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.services.llm.local_models import DEFAULT_LOCAL_MODEL, serve_local_model
from retrieval_pipeline.core.services.split_packages import default_cache_dir
from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory
from retrieval_pipeline.defs.mlflow_resource import mlflow_from_environment
from retrieval_pipeline.defs.partitions import REGISTRY_PATH

DEFAULT_OUT_DIR = PROJECT_ROOT / "data" / "out"
DEFAULT_CACHE_DIR = CACHE_ROOT


class PipelineSettings(dg.ConfigurableResource):
    """The dataset registry and the folders that outputs, indexes and caches are written to."""

    registry_path: str = REGISTRY_PATH
    out_dir: str = str(DEFAULT_OUT_DIR)
    cache_dir: str = str(DEFAULT_CACHE_DIR)

    def registry(self) -> Registry:
        """The registry, parsed once per process (the copy the partitions were made from, while its files are unchanged)."""
        return registry_at(self.registry_path)

    def dataset(self, name: str) -> DatasetConfig:
        return self.registry().get(name)

    def index_dir(self, dataset: str, retriever: str) -> Path:
        """``<out_dir>/indexes/<dataset>/<retriever>``; a name that is not one plain component is refused."""
        return child_path(self.out_dir, "indexes", dataset, retriever, what="index folder")

    def export_path(self, dataset: str, filename: str) -> Path:
        """``<out_dir>/exports/<dataset>/<filename>``; a name that is not one plain component is refused."""
        return child_path(self.out_dir, "exports", dataset, filename, what="export file")

    def cache_path(self) -> Path:
        """The folder of the embedding and HTTP caches."""
        return Path(self.cache_dir)


class EncoderResource(dg.ConfigurableResource):
    """Where dense retrievers' encoders (and rerankers' cross-encoders) come from.

    By default, the model each retriever spec names, loaded offline (``encoder_for_spec``). Tests swap
    in a keyword fake (``retrieval_pipeline_tests.fakes.resources.KeywordEncoderResource``).
    """

    def encoder_for(self, spec: Any) -> Any:
        return encoder_for_spec(spec)


class AlertSinkResource(dg.ConfigurableResource):
    """Where drift and threshold alerts go: a JSONL log, and a webhook when one is configured."""

    log_path: str = str(DEFAULT_OUT_DIR / "alerts.jsonl")
    webhook_url: str | None = None

    def sink(self) -> AlertSink:
        return AlertSink(Path(self.log_path), self.webhook_url)


class LLMResource(dg.ConfigurableResource):
    """The LLM behind target inference, the forward-RAG filter and the retrieval judge.

    ``provider``: ``offline`` (default: no model; the deterministic judges decide), ``openai_compatible``
    (any endpoint: OpenAI, vLLM, Ollama, a llama.cpp server; ``base_url`` + ``model`` + ``api_key``
    from ``dg.EnvVar``), or ``local`` (starts a llama.cpp server on loopback from a GGUF shipped in PyPI
    packages, and stops it afterwards). Answers are cached on disk by model, prompt and parameters.

    ``local_model`` names the local provider's model (``core/services/llm/local_models.py``: ``smollm2-135m``,
    ``qwen2.5-coder-1.5b``), or gives a ``.gguf`` path or a package holding one; a model shipped in slices is
    joined once into ``local_model_cache_dir``.
    """

    provider: str = "offline"
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    cache_path: str = str(DEFAULT_CACHE_DIR / "llm.sqlite")
    max_concurrency: int = 4
    timeout_s: float = 60.0
    max_tokens: int = 256  # the answers are short JSON objects; a small model may otherwise ramble to the limit
    price_per_1k_prompt: float | None = None
    price_per_1k_completion: float | None = None
    local_model: str = DEFAULT_LOCAL_MODEL
    local_model_cache_dir: str = str(default_cache_dir())

    @contextlib.contextmanager
    def open(self) -> Iterator[LLMClient | None]:
        """A client for the configured endpoint, or None when offline; a local server lives only inside."""
        if self.provider == "offline":
            yield None
        elif self.provider == "openai_compatible":
            if not (self.base_url and self.model):
                raise ValueError("provider openai_compatible needs base_url and model (RETRIEVAL_LLM_BASE_URL, RETRIEVAL_LLM_MODEL)")
            with LLMClient(self._settings(self.base_url, self.model), LLMCache(Path(self.cache_path))) as client:
                yield client
        elif self.provider == "local":
            with serve_local_model(self.local_model, self.local_model_cache_dir) as server:
                with LLMClient(self._settings(server.base_url, server.model or "local"), LLMCache(Path(self.cache_path))) as client:
                    yield client
        else:
            raise ValueError(f"unknown LLM provider {self.provider!r}: use offline, openai_compatible or local")

    def _settings(self, base_url: str, model: str) -> LLMSettings:
        return LLMSettings(
            base_url=base_url,
            model=model,
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            max_concurrency=self.max_concurrency,
            max_tokens=self.max_tokens,
            price_per_1k_prompt=self.price_per_1k_prompt,
            price_per_1k_completion=self.price_per_1k_completion,
        )


def llm_metadata(client: LLMClient | None) -> dict[str, object]:
    """Token counts, cost (when priced), calls and cache hits of an LLM client, for asset metadata."""
    return {} if client is None else {f"llm_{k}": v for k, v in client.usage().items()}


def llm_from_environment() -> LLMResource:
    """``RETRIEVAL_LLM_PROVIDER`` / ``_BASE_URL`` / ``_MODEL`` / ``_LOCAL_MODEL``; the key only ever through ``dg.EnvVar``."""
    env = os.environ
    key = dg.EnvVar("RETRIEVAL_LLM_API_KEY") if env.get("RETRIEVAL_LLM_API_KEY") else None
    return LLMResource(
        provider=env.get("RETRIEVAL_LLM_PROVIDER", "offline"),
        base_url=env.get("RETRIEVAL_LLM_BASE_URL"),
        model=env.get("RETRIEVAL_LLM_MODEL"),
        api_key=key,
        local_model=env.get("RETRIEVAL_LLM_LOCAL_MODEL") or DEFAULT_LOCAL_MODEL,
    )


def default_resources() -> dict[str, object]:
    webhook = dg.EnvVar("RETRIEVAL_ALERT_WEBHOOK_URL") if os.environ.get("RETRIEVAL_ALERT_WEBHOOK_URL") else None
    return {
        "llm": llm_from_environment(),
        "io_manager": ParquetIOManagerFactory(base_path=str(DEFAULT_OUT_DIR)),
        "settings": PipelineSettings(),
        "encoder": EncoderResource(),
        "alerts": AlertSinkResource(webhook_url=webhook),
        "mlflow": mlflow_from_environment(),
    }


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=default_resources())
