"""Parent-document retrieval: a base retriever's hits, each replaced by the document that encloses it.

A code corpus indexes a class and each of its methods as separate documents, while a benchmark may judge
whole classes: the ADK suites' golds are ``answers[].fully_qualified_class_name``, and a ``fix_error``
case's target is its subject class (:mod:`retrieval_pipeline.core.pairs.fix_targets`). A method that
matches a question is then evidence for its class, and a ranking of methods hides the class behind them.
This is the parent-document pattern (index the small units, return their parents) and the document-level
aggregation of passage retrieval: a parent scores its best-ranked member's score (MaxP), or its own where it
ranks higher itself.

:func:`enclosing_documents` maps every document to the nearest document of the wanted kind whose FQN is a
dotted prefix of its own (``pkg.mod.Cls.method`` -> ``pkg.mod.Cls``); a document with no such ancestor, or
of that kind itself, stays itself, so a corpus without dotted ids (passages, chunks) is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval_pipeline.core.common.types import Document, Hit
from retrieval_pipeline.core.retrieval.base import QueryResult, Retriever, each_from_base


def enclosing_documents(documents: Sequence[Document], kind: str) -> dict[str, str]:
    """``{doc_id: parent_id}`` for every document enclosed by a document of ``kind`` (the nearest one).

    Documents of ``kind`` and those with no enclosing document of ``kind`` are not in the map.
    """
    kinds = {d.doc_id: d.kind for d in documents}
    parents: dict[str, str] = {}
    for doc_id, own_kind in kinds.items():
        if own_kind == kind:
            continue
        prefix = doc_id
        while "." in prefix:
            prefix = prefix.rsplit(".", 1)[0]
            if kinds.get(prefix) == kind:
                parents[doc_id] = prefix
                break
    return parents


class ParentRetriever:
    """``base``'s hits with each document replaced by its parent; a parent appears once, at its best rank.

    Args:
        name: The retriever's name in runs and reports.
        base: The retriever whose hits are lifted.
        parents: ``{doc_id: parent_id}`` (from :func:`enclosing_documents`); a document not in it stays itself.
        depth: Hits read from ``base`` per query (at least ``k``): several members of one parent take one place,
            so reading deeper keeps ``k`` distinct parents.
    """

    def __init__(self, name: str, base: Retriever, parents: Mapping[str, str], depth: int = 100) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.name = name
        self.base = base
        self.parents = dict(parents)
        self.depth = depth

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        """Top-``k`` distinct parents per query, in the base's order (a query the base failed on keeps its error)."""
        return each_from_base(self.base, queries, k, self.depth, self._lift)

    def _lift(self, _query: str, hits: list[Hit], k: int) -> list[Hit]:
        lifted: list[Hit] = []
        seen: set[str] = set()
        for doc_id, score in hits:
            parent = self.parents.get(doc_id, doc_id)
            if parent in seen:
                continue
            seen.add(parent)
            lifted.append((parent, score))
            if len(lifted) == k:
                break
        return lifted
