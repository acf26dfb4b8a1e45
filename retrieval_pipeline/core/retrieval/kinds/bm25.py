"""``kind: bm25``: Okapi BM25 (rank-bm25's scores, see :mod:`retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25`).

Settings: ``k1``, ``b``, ``epsilon``; ``tokenizer``: ``default`` (prose: CamelCase, snake_case and dotted
names split into words) or ``code`` (the same, and every identifier also kept whole); ``fields``:
integer weights of the document fields ``text``, ``title`` and ``doc_id``. A field of weight w is
indexed w times, the usual BM25F approximation by repetition; the default is the text alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval.engines.tokenize import TOKENIZERS
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind

FIELDS = ("text", "title", "doc_id")


@register_kind
class BM25Spec(RetrieverSpec):
    kind: Literal["bm25"] = "bm25"
    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    epsilon: float = Field(0.25, ge=0)
    tokenizer: Literal["default", "code"] = "default"
    fields: dict[Literal["text", "title", "doc_id"], int] = Field(default_factory=lambda: {"text": 1})

    def indexed_text(self, doc: Document) -> str:
        """The text BM25 indexes for ``doc``: each field repeated by its weight."""
        values = {"text": doc.text, "title": doc.title, "doc_id": doc.doc_id}
        return "\n".join(values[f] for f in FIELDS for _ in range(self.fields.get(f, 0)) if values[f])

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        if not any(w > 0 for w in self.fields.values()):
            raise ValueError("fields: at least one field needs a weight > 0")
        index = BM25Retriever.build(
            ctx.doc_ids,
            [self.indexed_text(d) for d in ctx.documents],
            k1=self.k1,
            b=self.b,
            epsilon=self.epsilon,
            tokenizer=TOKENIZERS[self.tokenizer],
        )
        index.save(ctx.index_dir)
        return {"n_terms": index.params["n_terms"], "avgdl": index.params["avgdl"]}

    def load(self, ctx: RetrieverContext) -> BM25Retriever:
        index = BM25Retriever.load(ctx.index_dir, tokenizer=TOKENIZERS[self.tokenizer])
        index.name = self.name
        return index
