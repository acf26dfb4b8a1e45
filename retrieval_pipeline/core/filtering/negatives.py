"""Hard negatives: near misses a retriever could confuse with the gold.

* **siblings**: other objects of the gold's own module (``json.dump`` for gold ``json.dumps``),
  same kind first, in corpus order;
* **bm25**: the top BM25 hits for the query that are not gold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from retrieval_pipeline.core.common.types import Document, Hit


class SiblingIndex:
    """Documents grouped by module, in corpus order."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self._by_id = {d.doc_id: d for d in documents}
        self._by_module: dict[str, list[Document]] = defaultdict(list)
        for doc in documents:
            if doc.module and doc.kind != "module":
                self._by_module[doc.module].append(doc)

    def siblings(self, gold_doc_ids: Sequence[str], n: int) -> list[str]:
        """Up to ``n`` non-gold documents sharing a module with a gold, same kind first."""
        gold = set(gold_doc_ids)
        picked: list[str] = []
        if n <= 0:
            return picked
        for gid in gold_doc_ids:
            doc = self._by_id.get(gid)
            if doc is None or not doc.module:
                continue
            members = [d for d in self._by_module.get(doc.module, []) if d.doc_id not in gold]
            members.sort(key=lambda d: d.kind != doc.kind)  # stable: same kind first, corpus order within
            for m in members:
                if m.doc_id not in picked:
                    picked.append(m.doc_id)
                if len(picked) >= n:
                    return picked
        return picked


def bm25_negatives(hits: Sequence[Hit], gold_doc_ids: Sequence[str], n: int, exclude: Sequence[str] = ()) -> list[str]:
    """The first ``n`` hits that are neither gold nor already chosen."""
    skip = set(gold_doc_ids) | set(exclude)
    return [doc_id for doc_id, _ in hits if doc_id not in skip][:n]
