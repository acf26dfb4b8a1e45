"""Build and run one named retriever of one dataset: the two calls the Dagster assets and the CLI make.

Indexes live in ``<index_root>/<retriever>/`` (``index_root`` is the dataset's folder). Building one
retriever never touches another one's folder; a hybrid or reranker loads its components' indexes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.factory import RetrieverRegistry, build_context, build_index, load_retriever, read_params
from retrieval_pipeline.core.retrieval.run_loop import TimedRun, batched_run

#: Returns the encoder (or scorer) a spec asks for; the Dagster resource or a test fake.
EncoderFor = Callable[[Any], Any]


@dataclass(frozen=True)
class RetrieverRun:
    """One retriever's run over a dataset's queries, with what it was built from."""

    timed: TimedRun
    params: dict[str, Any]
    seconds: float


def build_retriever(
    registry: RetrieverRegistry,
    dataset: str,
    name: str,
    documents: Sequence[Document],
    index_root: Path,
    cache_dir: Path,
    encoder_for: EncoderFor,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build retriever ``name`` for ``dataset`` into ``index_root/name``; returns its ``retriever.json``.

    ``log`` receives progress lines of a long build (a dense corpus's embedding, shard by shard).
    """
    spec = registry.get(name)
    ctx = build_context(registry, dataset, documents, index_root, cache_dir, encoder_for, name, log)
    started = time.perf_counter()
    params = build_index(spec, ctx)
    params["build_seconds"] = round(time.perf_counter() - started, 3)
    return params


def run_retriever(
    registry: RetrieverRegistry,
    dataset: str,
    name: str,
    documents: Sequence[Document],
    queries: Mapping[str, str],
    index_root: Path,
    cache_dir: Path,
    encoder_for: EncoderFor,
    depth: int,
    latency_sample: int,
) -> RetrieverRun:
    """Rank every query with retriever ``name`` (built by :func:`build_retriever`), latency on a sample."""
    started = time.perf_counter()
    retriever = load_retriever(registry, name, dataset, documents, index_root, cache_dir, encoder_for)
    params = read_params(Path(index_root) / name, registry.get(name), dataset, documents)
    timed = batched_run(retriever, queries, depth, latency_sample=latency_sample)
    return RetrieverRun(timed, params, time.perf_counter() - started)
