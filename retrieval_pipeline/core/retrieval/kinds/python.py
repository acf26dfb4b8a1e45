"""``kind: python``: your own retriever class, named as ``package.module:factory``.

The factory is called with ``params`` as keyword arguments and must return an object with:

* ``name`` (optional; the registry name is used),
* ``build(doc_ids: list[str], texts: list[str]) -> None``: index the corpus,
* ``search(queries: list[str], k: int) -> list[list[tuple[str, float]]]``: per query at most ``k``
  ``(doc_id, score)`` hits, score descending, each doc id once, every doc id from the corpus (a
  ``QueryError`` may stand in for a query it could not answer),
* optionally ``save(directory)`` and ``load(directory)`` (an instance method filling the object),
  to keep the index between the index asset and the runs asset; without them the corpus is indexed
  again when the runs are computed.

``examples/retriever_plugin/`` holds a worked example; ``retrieval_pipeline.contract`` checks any class
against this contract (``python -m retrieval_pipeline.contract package.module:factory``).
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

from pydantic import Field, field_validator

from retrieval_pipeline.core.retrieval.base import Retriever
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind

SAVED_MARKER = "plugin_saved"


def import_factory(target: str) -> Any:
    """The callable named ``package.module:attribute`` (dotted attributes allowed)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"factory {target!r} must look like package.module:factory")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} of factory {target!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r} (factory {target!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"factory {target!r} is not callable")
    return obj


@register_kind
class PythonSpec(RetrieverSpec):
    kind: Literal["python"] = "python"
    factory: str
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("factory")
    @classmethod
    def _factory_form(cls, value: str) -> str:
        if ":" not in value:
            raise ValueError(f"factory {value!r} must look like package.module:factory")
        return value

    def instance(self) -> Any:
        plugin = import_factory(self.factory)(**self.params)
        missing = [m for m in ("build", "search") if not callable(getattr(plugin, m, None))]
        if missing:
            raise TypeError(f"{self.factory} returned a {type(plugin).__name__} without {', '.join(missing)}()")
        return plugin

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        plugin = self.instance()
        plugin.build(ctx.doc_ids, ctx.texts)
        saved = callable(getattr(plugin, "save", None)) and callable(getattr(plugin, "load", None))
        if saved:
            plugin.save(ctx.index_dir / SAVED_MARKER)
        return {"plugin_class": f"{type(plugin).__module__}.{type(plugin).__qualname__}", "persisted": saved}

    def load(self, ctx: RetrieverContext) -> Retriever:
        plugin = self.instance()
        saved = ctx.index_dir / SAVED_MARKER
        if saved.exists():
            plugin.load(saved)
        else:
            plugin.build(ctx.doc_ids, ctx.texts)
        return plugin
