"""Helpers shared by the Dagster tests."""

from __future__ import annotations

from pathlib import Path

from retrieval_pipeline.defs.io_manager import ParquetIOManagerFactory
from retrieval_pipeline.defs.mlflow_resource import MLflowResource
from retrieval_pipeline.defs.resources import AlertSinkResource, EncoderResource, LLMResource, PipelineSettings


def resources_in(
    tmp_path: Path, encoder: EncoderResource, registry: Path | None = None, llm: LLMResource | None = None
) -> dict[str, object]:
    """Every output, cache and alert under ``tmp_path``; the project's registry unless one is given."""
    out = tmp_path / "out"
    settings = {"registry_path": str(registry)} if registry else {}
    return {
        "io_manager": ParquetIOManagerFactory(base_path=str(out)),
        "settings": PipelineSettings(**settings, out_dir=str(out), cache_dir=str(tmp_path / "cache")),
        "encoder": encoder,
        "alerts": AlertSinkResource(log_path=str(out / "alerts.jsonl")),
        "llm": llm or LLMResource(cache_path=str(tmp_path / "cache" / "llm.sqlite")),  # offline unless given
        "mlflow": MLflowResource(),  # off
    }
