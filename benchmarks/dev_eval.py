"""Shared by the dev benchmarks: a dataset's resolved pairs, registry retrievers built and run through the
pipeline's own factory, and the paired comparison of their per-query metrics.

* :func:`dev_pairs`: the dataset's corpus and resolved (query, gold) pairs, as the pipeline builds them.
* :func:`build_indexes`: each retriever's index (components first) exactly as ``make run`` builds it, with
  the real encoders and the caches under ``cache_dir``; what each build reported and how long it took.
* :func:`per_query`: every retriever's per-query metrics at depth 100, in the pairs' order.
* :func:`paired_table`: each metric's mean with a 95% percentile-bootstrap CI (``stats.paired_bootstrap_ci``:
  the same resampled queries for every column), and each retriever's paired difference to the first one
  with its CI and the randomisation test's p-value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.evaluation.metrics import per_query_metrics
from retrieval_pipeline.core.evaluation.statistics.stats import paired_bootstrap_ci, randomisation_test
from retrieval_pipeline.core.pairs.build import build_pairs
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.retrieval.factory import RetrieverRegistry, build_context, build_index, load_retriever, load_retriever_specs
from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec

METRICS = ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10")


@dataclass(frozen=True)
class DevSet:
    """A dataset's corpus and its resolved pairs."""

    name: str
    documents: list[Document]
    pairs: list[Any]

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        return {p.query_id: dict(zip(p.gold_doc_ids, p.grades())) for p in self.pairs}


def registry_specs() -> RetrieverRegistry:
    """The project's retriever registry (``data/config/retrievers.yaml``)."""
    return load_retriever_specs(Path(DEFAULT_REGISTRY_PATH).with_name("retrievers.yaml"))


def dev_pairs(dataset: str, types: set[str] | None = None) -> DevSet:
    """The dataset's corpus and its resolved pairs (of the case ``types`` when given), as the pipeline builds them."""
    config = load_registry().datasets[dataset]
    adapter = adapter_for(config)
    documents = list(adapter.build_corpus(config).documents)
    cases = [c for c in adapter.load_cases(config).cases if not types or c.benchmark_type in types]
    builder = adapter.pair_builder(config, documents)
    pairs = [
        p for p in build_pairs(cases, CorpusLookup.from_documents(documents), AstTargetInferer(), builder, None) if p.status == "resolved"
    ]
    return DevSet(dataset, documents, pairs)


def build_indexes(
    specs: RetrieverRegistry, names: Sequence[str], dev: DevSet, index_root: Path, cache_dir: Path, log: Callable[[str], None] = print
) -> dict[str, dict[str, Any]]:
    """Build every retriever of ``names`` and its components; ``retriever.json`` of each, plus ``wall_seconds``."""
    built: dict[str, dict[str, Any]] = {}
    for name in specs.closure(names):
        started = time.perf_counter()
        ctx = build_context(specs, dev.name, dev.documents, index_root, cache_dir, encoder_for_spec, name, log=log)
        reported = build_index(specs.get(name), ctx)
        built[name] = {**reported, "wall_seconds": round(time.perf_counter() - started, 1)}
        log(f"{dev.name}/{name}: index built in {built[name]['wall_seconds']} s")
    return built


def per_query(specs: RetrieverRegistry, names: Sequence[str], dev: DevSet, index_root: Path, cache_dir: Path) -> dict[str, pd.DataFrame]:
    """Each retriever's per-query metrics at depth 100, indexed by query id in the pairs' order."""
    frames: dict[str, pd.DataFrame] = {}
    order = [p.query_id for p in dev.pairs]
    for name in names:
        retriever = load_retriever(specs, name, dev.name, dev.documents, index_root, cache_dir, encoder_for_spec)
        with progress_to(print):  # a cross-encoder's scoring, query encoding: lines with rate and ETA
            results = retriever.search([p.query for p in dev.pairs], 100)
        run = {p.query_id: list(r) for p, r in zip(dev.pairs, results)}
        frames[name] = per_query_metrics(run, dev.qrels).set_index("query_id").loc[order]
    return frames


def paired_table(
    frames: dict[str, pd.DataFrame], names: Sequence[str], metrics: Sequence[str] = METRICS
) -> dict[str, dict[str, list[float]]]:
    """Per metric: ``{name: [mean, low, high]}`` and ``{"<name>-<first>": [difference, low, high, p]}``."""
    table: dict[str, dict[str, list[float]]] = {}
    for metric in metrics:
        matrix = np.column_stack([frames[n][metric].to_numpy(dtype=float) for n in names])
        low, high = paired_bootstrap_ci(matrix)
        entry = {n: [float(matrix[:, i].mean()), float(low[i]), float(high[i])] for i, n in enumerate(names)}
        for i, n in enumerate(names[1:], start=1):
            diff = matrix[:, i] - matrix[:, 0]
            d_low, d_high = paired_bootstrap_ci(diff)
            entry[f"{n}-{names[0]}"] = [
                float(diff.mean()),
                float(d_low),
                float(d_high),
                float(randomisation_test(matrix[:, i], matrix[:, 0])),
            ]
        table[metric] = entry
    return table


def table_lines(table: dict[str, dict[str, list[float]]], names: Sequence[str]) -> list[str]:
    """One line per metric: each retriever's mean [CI], then each one's difference to the first [CI] and p."""
    lines = []
    for metric, entry in table.items():
        cells = [f"{n} {entry[n][0]:.3f} [{entry[n][1]:.3f}, {entry[n][2]:.3f}]" for n in names]
        for n in names[1:]:
            d, low, high, p = entry[f"{n}-{names[0]}"]
            cells.append(f"{n} - {names[0]}: {d:+.3f} [{low:+.3f}, {high:+.3f}] p={p:.4f}")
        lines.append(f"{metric:<11} " + " | ".join(cells))
    return lines
