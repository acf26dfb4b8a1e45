"""``kind: parent``: another retriever's hits, each replaced by its enclosing document of a kind (MaxP).

For a dataset that judges whole classes while its corpus also indexes their members (the ADK suites): a
method's hit counts for its class, at the method's rank when that is better than the class's own
(:mod:`retrieval_pipeline.core.retrieval.engines.parents`).

Settings:

* ``base``: the retriever whose hits are lifted (a component, built first).
* ``parent_kind``: the kind of document a hit is lifted to (default ``class``); the nearest enclosing one by
  dotted FQN prefix. Documents with none stay themselves, so on a corpus of passages the kind changes nothing.
* ``depth``: hits read from ``base`` per query (default 100).

The index is nothing: the map is rebuilt from the corpus on load (one pass over the ids).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from retrieval_pipeline.core.retrieval.engines.parents import ParentRetriever, enclosing_documents
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverName, RetrieverSpec, register_kind


@register_kind
class ParentSpec(RetrieverSpec):
    kind: Literal["parent"] = "parent"
    base: RetrieverName
    parent_kind: str = Field("class", min_length=1)
    depth: int = Field(100, ge=1)

    def components(self) -> list[str]:
        return [self.base]

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Check the base is built; report how many documents have a parent, and how many parents there are."""
        ctx.component(self.base)
        parents = enclosing_documents(ctx.documents, self.parent_kind)
        return {"documents_with_parent": len(parents), "parents": len(set(parents.values()))}

    def load(self, ctx: RetrieverContext) -> ParentRetriever:
        return ParentRetriever(self.name, ctx.component(self.base), enclosing_documents(ctx.documents, self.parent_kind), self.depth)
