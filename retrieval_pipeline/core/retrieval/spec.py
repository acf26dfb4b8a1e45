"""Retriever specs: what ``data/config/retrievers.yaml`` holds, one pydantic model per kind.

A **kind** (``bm25``, ``dense``, ``hybrid``, ...) is one file in :mod:`retrieval_pipeline.core.retrieval.kinds`
that defines a :class:`RetrieverSpec` subclass and registers it with :func:`register_kind`. The spec *is*
the plug-in: it validates its own settings, builds its index into a folder, and loads a searchable
retriever back from it. Nothing else branches on the kind, so adding one is adding one file.

A spec is written in the registry as ``name: {kind: ..., <settings>}``; names say what the retriever
is (``bm25_code``, ``dense_bge_small``, ``hybrid_rrf_k60``) and appear in runs, reports and TREC tags.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import Retriever

#: Retriever names: letters, digits, ``_ . -``; they become folder names and TREC run tags.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _a_retriever_name(value: str) -> str:
    if not NAME_PATTERN.match(value):
        raise ValueError(f"{value!r} must be a retriever name ({NAME_PATTERN.pattern})")
    return value


#: A setting that names another retriever of the registry (a rerank's or code_lexical's ``base``).
RetrieverName = Annotated[str, AfterValidator(_a_retriever_name)]


@dataclass
class RetrieverContext:
    """What a spec needs to build or load its retriever for one dataset.

    Attributes:
        dataset: The dataset (partition) name, for error messages.
        documents: The corpus, in corpus order (the tie-break order).
        index_dir: This retriever's folder for this dataset (a fresh temporary one while building).
        cache_dir: Where embedding and HTTP caches live.
        encoder_for: Returns the model a spec needs (a dense spec's encoder, a rerank spec's cross-encoder);
            tests swap in keyword fakes here.
        component: Loads another named retriever of the same dataset (for hybrids and rerankers).
        log: Where a long build reports progress, a line at a time (the asset's ``context.log.info``);
            ``None``: silent.
    """

    dataset: str
    documents: Sequence[Document]
    index_dir: Path
    cache_dir: Path
    encoder_for: Callable[[Any], Any]
    component: Callable[[str], Retriever]
    log: Callable[[str], None] | None = None

    @property
    def doc_ids(self) -> list[str]:
        return [d.doc_id for d in self.documents]

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.documents]


class RetrieverSpec(BaseModel):
    """Base of every kind's settings. Unknown keys are errors (a typo never passes silently).

    Subclasses set ``kind`` (a ``Literal``) and implement :meth:`build` and :meth:`load`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The kind's name in the registry; set by :func:`register_kind`.
    KIND: ClassVar[str] = ""
    #: Whether building its index embeds the corpus (CPU/GPU heavy): such index steps carry the op tag
    #: ``retrieval_pipeline/heavy: embedding``, which a deployment limits to one at a time (deploy/).
    EMBEDS: ClassVar[bool] = False

    kind: str
    name: str = ""
    description: str = ""

    def components(self) -> list[str]:
        """Names of the retrievers this one is made of (hybrids, rerankers); built first."""
        return []

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        """Build the index into ``ctx.index_dir``; return what to record about it (model, hashes, sizes)."""
        raise NotImplementedError

    def load(self, ctx: RetrieverContext) -> Retriever:
        """A searchable retriever from what :meth:`build` wrote into ``ctx.index_dir``."""
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """Every parameter, for ``params.json`` and run metadata."""
        return self.model_dump(mode="json")


#: kind name -> spec class; filled by :func:`register_kind` as the kind modules are imported.
KINDS: dict[str, type[RetrieverSpec]] = {}


def register_kind(cls: type[RetrieverSpec]) -> type[RetrieverSpec]:
    """Class decorator: make a spec class available under its ``kind`` literal."""
    kind = cls.model_fields["kind"].default
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{cls.__name__}: set a default for `kind` (the kind's registry name)")
    if kind in KINDS and KINDS[kind] is not cls:
        raise TypeError(f"retriever kind {kind!r} is registered twice ({KINDS[kind].__name__}, {cls.__name__})")
    cls.KIND = kind
    KINDS[kind] = cls
    return cls


#: The factory's record of a built index, beside the engine's own files (BM25 and FAISS keep their params.json).
PARAMS_FILE = "retriever.json"
