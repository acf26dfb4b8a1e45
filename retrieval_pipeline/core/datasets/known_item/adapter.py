"""``known_item``: the installed distributions' API as a corpus, with known-item queries (the scale benchmark).

Registry block: ``known_item`` (optional; every key has a default): which packages are introspected and
the bounds of the build (``include``, ``exclude``, ``max_modules_per_package``, ``module_timeout_s``,
``child_timeout_s``, ``min_documents``), how queries are drawn (``n_queries``, ``min_words``, ``seed``),
where the built corpus is cached (``cache_dir``), and an optional size (``max_documents``, ``gold_share``):
the nested, seeded subset that ``benchmarks/scale.py`` evaluates at that size
(:func:`~retrieval_pipeline.core.datasets.known_item.queries.nested_subsets`, seeded with ``seed``), so the
whole graph can run on exactly the documents the benchmark measured, and read their vectors from its cache. The corpus is built by
:mod:`retrieval_pipeline.core.datasets.known_item.corpus` in child processes and cached per environment.

A case is one known-item query: a docstring's first sentence, whose one gold document is the object it
documents. The ``corpus`` asset holds every gold's text with its sentence removed (otherwise the query
would be a verbatim substring of its gold). The dataset reads no input file, so it lists none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field

from retrieval_pipeline.core.datasets import kind_api as api
from retrieval_pipeline.core.datasets.known_item.corpus import (
    DEFAULT_CACHE_DIR,
    DEFAULT_EXCLUDE,
    InstalledCorpus,
    IntrospectionSettings,
    build_installed_corpus,
    environment_fingerprint,
)
from retrieval_pipeline.core.datasets.known_item.queries import KnownItemSet, KnownItemSettings, known_items, nested_subsets

#: The ``benchmark_type`` of a known-item case.
KNOWN_ITEM_TYPE = "known_item"
#: Why a document (and a query with it as gold) is rejected: introspection found e.g. ``DgApiList[dict[str, Any]]``.
UNWRITABLE_ID = "contains whitespace: TREC run and qrels files are whitespace-separated"


def exportable_id(doc_id: str) -> bool:
    """Whether the id can be written to TREC files (no whitespace); the others become rejects, after the subset."""
    return not any(ch.isspace() for ch in doc_id)


class KnownItemSource(api.SettingsBlock):
    """The ``known_item:`` block: what is introspected, the build's bounds, how queries are drawn, the cache."""

    include: list[str] = Field(default_factory=list)  # top-level packages; empty: the stdlib and every installed package
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    max_modules_per_package: int = Field(2000, ge=1)
    module_timeout_s: float = Field(120.0, gt=0)
    child_timeout_s: float = Field(1800.0, gt=0)
    min_documents: int = Field(100_000, ge=0)
    n_queries: int = Field(2000, ge=1)
    min_words: int = Field(6, ge=1)
    seed: int = 13
    cache_dir: Path = DEFAULT_CACHE_DIR
    max_documents: int | None = Field(None, ge=1)  # None: every document
    gold_share: float = Field(0.02, gt=0, le=1)  # with max_documents: queries kept per document of the subset

    def introspection(self) -> IntrospectionSettings:
        """The corpus-building settings."""
        return IntrospectionSettings(
            include=tuple(self.include),
            exclude=tuple(self.exclude),
            max_modules_per_package=self.max_modules_per_package,
            module_timeout_s=self.module_timeout_s,
            child_timeout_s=self.child_timeout_s,
            min_documents=self.min_documents,
        )

    def queries(self) -> KnownItemSettings:
        """The query-drawing settings."""
        return KnownItemSettings(n_queries=self.n_queries, min_words=self.min_words, seed=self.seed)


@api.register_adapter
class KnownItemAdapter(api.DatasetAdapter):
    """Known-item search over the installed distributions' API: one gold document per query."""

    kind = "known_item"
    blocks = {"known_item": api.Block(KnownItemSource, path_keys=("cache_dir",), required=False)}

    def input_paths(self, config: api.DatasetSettings) -> list[Path]:
        """None: the corpus comes from the environment, and ``cache_dir`` is written, not read as input."""
        return []

    def load_cases(self, config: api.DatasetSettings) -> api.CasesBuild:
        _, built = _build(config)
        unwritable = {d.doc_id for d in built.documents if not exportable_id(d.doc_id)}
        rejects = [
            api.Rejected(f"introspection:{q.gold_doc_id}", q.query_id, i, f"the gold's id {q.gold_doc_id!r} {UNWRITABLE_ID}")
            for i, q in enumerate(built.queries)
            if q.gold_doc_id in unwritable
        ]
        cases = [
            api.Case(
                q.query_id,
                config.name,
                KNOWN_ITEM_TYPE,
                f"introspection:{q.gold_doc_id}",
                i,
                q.query,
                extra={"gold_doc_id": q.gold_doc_id, "removed": q.removed},
            )
            for i, q in enumerate(built.queries)
            if q.gold_doc_id not in unwritable
        ]
        return api.CasesBuild(cases, rejects, len(cases) + len(rejects), {f"known_item/{k}": v for k, v in built.counts.items()})

    def build_corpus(self, config: api.DatasetSettings) -> api.CorpusBuild:
        corpus, built = _build(config)
        report = corpus.report
        scalars = {k: v for k, v in report.items() if k not in ("by_package", "by_kind", "wall_s_by_package")}
        extra = {"by_package": report["by_package"], "by_kind": report["by_kind"], "wall_s_by_package": report["wall_s_by_package"]}
        counts = {f"known_item/{k}": v for k, v in built.counts.items()}
        source = f"introspection of {report['packages']} installed packages (cached in {report['cache_file']})"
        kept = [d for d in built.documents if exportable_id(d.doc_id)]
        unwritable = [
            api.Rejected(f"introspection:{d.module}", d.doc_id, None, f"document id {d.doc_id!r} {UNWRITABLE_ID}")
            for d in built.documents
            if not exportable_id(d.doc_id)
        ]
        return api.CorpusBuild(kept, [*corpus.rejects, *unwritable], {**scalars, **counts, **extra}, source)

    def pair_builder(self, config: api.DatasetSettings, documents: Sequence[api.Document]) -> api.PairBuilder:
        known = {d.doc_id for d in documents}
        return lambda case: known_item_pair(case, known)

    def metadata(self, config: api.DatasetSettings) -> dict[str, Any]:
        source = _source(config)
        return {"known_item/n_queries": source.n_queries, "known_item/seed": source.seed, "known_item/min_words": source.min_words}


def _source(config: api.DatasetSettings) -> KnownItemSource:
    return getattr(config, "known_item", None) or KnownItemSource()


#: The last corpus and queries built in this process, by what decides them (one entry: a corpus can be 547k documents).
_LAST_BUILD: dict[tuple[str, str, str], tuple[InstalledCorpus, KnownItemSet]] = {}


def _build(config: api.DatasetSettings) -> tuple[InstalledCorpus, KnownItemSet]:
    """The corpus (cached) and the queries drawn from it; errors name the dataset.

    The ``corpus`` and ``raw_cases`` steps both need it: the second one in a process gets the first one's
    build, as long as the settings and the environment's fingerprint are the same (reading the 547k-document
    corpus and drawing its queries again took 17.6 s in the 100k graph).
    """
    source = _source(config)
    key = (config.name, source.model_dump_json(), environment_fingerprint(source.introspection()))
    if key not in _LAST_BUILD:
        label = f"dataset {config.name!r}"
        corpus = build_installed_corpus(source.introspection(), source.cache_dir, label=label)
        built = (corpus, limited(known_items(corpus, source.queries(), label=label), source))
        _LAST_BUILD.clear()
        _LAST_BUILD[key] = built
    return _LAST_BUILD[key]


def limited(built: KnownItemSet, source: KnownItemSource) -> KnownItemSet:
    """The ``max_documents`` subset of ``built`` (nested and seeded, holding the gold of every query it keeps).

    Without ``max_documents``, or with one at least the corpus size, ``built`` as it is.
    """
    if source.max_documents is None or source.max_documents >= len(built.documents):
        return built
    golds = [(q.query_id, q.gold_doc_id) for q in built.queries]
    doc_ids = [d.doc_id for d in built.documents]
    subset = nested_subsets(doc_ids, golds, [source.max_documents], seed=source.seed, gold_share=source.gold_share)[0][source.max_documents]
    kept = set(subset.query_ids)
    counts = {**built.counts, "subset_documents": len(subset.positions), "subset_queries": len(kept)}
    return replace(
        built,
        documents=[built.documents[i] for i in subset.positions],
        queries=[q for q in built.queries if q.query_id in kept],
        counts=counts,
    )


def known_item_pair(case: api.Case, known: set[str] | frozenset[str]) -> api.QAPair:
    """The query's one gold is the document its sentence came from (unresolved if the corpus lacks it)."""
    gold = str(case.extra.get("gold_doc_id") or "")
    found = gold in known
    return api.gold_pair(
        case,
        [gold] if found else [],
        "known_item:docstring",
        {"removed_occurrences": case.extra.get("removed", 0)},
        [] if found else [f"known-item query {case.case_id!r} ({case.source_file}): gold {gold!r} is not in the corpus"],
    )
