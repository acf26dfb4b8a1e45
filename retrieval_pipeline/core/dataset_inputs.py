"""Every kind of dataset reduced to the same three things: corpus, cases (queries), pairs (qrels).

One function per stage dispatches on ``DatasetConfig.kind``:

* ``suite``: benchmark YAML; corpus from an API index or introspection; golds resolved by FQN.
* ``nq``: Natural Questions CSV; corpus = de-duplicated long answers; gold = the question's own one.
* ``context_qa``: QA pairs with expected context; corpus = chunks of the documents; gold = chunks
  whose similarity to the expected context reaches the threshold (the similarity kept as evidence).
* ``beir``: corpus.jsonl / queries.jsonl / qrels as given (graded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval_pipeline.core.registry import DatasetConfig
from retrieval_pipeline.core.types import Case, Document, Rejected


@dataclass
class CorpusBuild:
    documents: list[Document]
    rejects: list[Rejected]
    report: dict[str, Any]
    source: str


@dataclass
class CasesBuild:
    cases: list[Case]
    rejects: list[Rejected]
    total: int
    report: dict[str, Any] = field(default_factory=dict)


def build_corpus(config: DatasetConfig) -> CorpusBuild:
    """The documents retrievers index, with rejects and counts."""
    if config.kind == "nq":
        from retrieval_pipeline.core.sources.nq import dedupe_chunks, load_nq_csv, nq_documents

        loaded = load_nq_csv(config.nq.csv, sample_size=config.nq.sample_size)
        chunks = dedupe_chunks(loaded.rows)
        report = {"long_answers": len(loaded.rows), "chunks": len(chunks.chunks), "merged_duplicates": chunks.duplicates}
        return CorpusBuild(nq_documents(chunks.chunks), [], report, str(config.nq.csv))
    if config.kind == "context_qa":
        return _chunked_documents(config)
    if config.kind == "beir":
        from retrieval_pipeline.core.sources.beir import load_beir

        loaded = load_beir(config.beir.path, split=config.beir.split)
        return CorpusBuild(loaded.documents, [r for r in loaded.rejects if _is_corpus_reject(r)], dict(loaded.report), str(config.beir.path))
    return _api_corpus(config)


def load_cases(config: DatasetConfig) -> CasesBuild:
    """The queries, validated; invalid rows become rejects with file, case and reason."""
    if config.kind == "nq":
        from retrieval_pipeline.core.sources.nq import dedupe_chunks, load_nq_csv, nq_cases

        loaded = load_nq_csv(config.nq.csv, sample_size=config.nq.sample_size)
        chunk_of = dedupe_chunks(loaded.rows).question_chunk
        cases = nq_cases(loaded.rows, str(config.nq.csv))
        for case in cases:
            case.extra["gold_chunk_id"] = chunk_of[case.case_id]
        return CasesBuild(cases, loaded.rejects, loaded.total)
    if config.kind == "context_qa":
        from retrieval_pipeline.core.sources.context_qa import load_context_qa

        loaded = load_context_qa(config.context_qa.qa)
        return CasesBuild(loaded.cases, loaded.rejects, loaded.total, dict(loaded.report))
    if config.kind == "beir":
        from retrieval_pipeline.core.sources.beir import load_beir

        loaded = load_beir(config.beir.path, split=config.beir.split)
        rejects = [r for r in loaded.rejects if not _is_corpus_reject(r)]
        return CasesBuild(loaded.cases, rejects, len(loaded.cases) + len(rejects), dict(loaded.report))
    from retrieval_pipeline.core.sources.dataset_suites import load_suites

    loaded = load_suites(config.suites)
    return CasesBuild(loaded.cases, loaded.rejects, loaded.total)


def _is_corpus_reject(reject: Rejected) -> bool:
    return reject.source_file.endswith("corpus.jsonl")


def _api_corpus(config: DatasetConfig) -> CorpusBuild:
    from retrieval_pipeline.core.sources.api_index import introspect_modules, load_ranked_targets

    if config.corpus.ranked_targets:
        loaded = load_ranked_targets(config.corpus.ranked_targets)
        return CorpusBuild(loaded.documents, loaded.rejects, dict(loaded.report), str(config.corpus.ranked_targets))
    modules = config.corpus_modules()
    loaded = introspect_modules(modules)
    return CorpusBuild(loaded.documents, loaded.rejects, dict(loaded.report), f"introspection of {len(modules)} modules")


def _chunked_documents(config: DatasetConfig) -> CorpusBuild:
    from retrieval_pipeline.core.chunking import chunk_markdown
    from retrieval_pipeline.core.sources.context_qa import load_documents, pydoc_topic_documents

    spec = config.context_qa
    topics = None if spec.pydoc_topics == ["*"] else spec.pydoc_topics  # "*": the whole language reference
    sources = load_documents(spec.documents) if spec.documents else pydoc_topic_documents(topics)
    chunks: list[Document] = []
    for document_id, text in sources:
        chunks.extend(chunk_markdown(document_id, text, size=spec.chunking.size, overlap=spec.chunking.overlap))
    report = {"documents": len(sources), "chunks": len(chunks), "chunk_size": spec.chunking.size, "chunk_overlap": spec.chunking.overlap}
    where = ", ".join(map(str, spec.documents)) if spec.documents else f"pydoc_data topics {', '.join(spec.pydoc_topics)}"
    return CorpusBuild(chunks, [], report, where)


def documents_by_id(documents: Sequence[Document]) -> dict[str, Document]:
    return {d.doc_id: d for d in documents}
