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

The plug-in object lives in a worker process of its own (:mod:`~retrieval_pipeline.core.retrieval.plugin_process`):
every call (the factory, ``build``, ``save``, ``load``, each ``search`` batch) has ``timeout_s`` seconds (default
:data:`DEFAULT_TIMEOUT_S`; importing the factory's module has at least ``IMPORT_TIMEOUT_S``), and a plug-in that exits, crashes or hangs fails this retriever with a message naming it,
never the run's process.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from retrieval_pipeline.core.retrieval.base import Retriever
from retrieval_pipeline.core.retrieval.plugin_process import IMPORT_TIMEOUT_S, PluginProcess, PluginRetriever
from retrieval_pipeline.core.retrieval.plugin_worker import import_factory
from retrieval_pipeline.core.retrieval.spec import RetrieverContext, RetrieverSpec, register_kind

SAVED_MARKER = "plugin_saved"
#: Seconds each call of a plug-in may take when its spec sets no ``timeout_s``.
DEFAULT_TIMEOUT_S = 600.0

__all__ = ["DEFAULT_TIMEOUT_S", "SAVED_MARKER", "PythonSpec", "import_factory"]


@register_kind
class PythonSpec(RetrieverSpec):
    kind: Literal["python"] = "python"
    factory: str
    params: dict[str, Any] = Field(default_factory=dict)
    #: Seconds each call of the plug-in may take (the factory, build, save, load, one search batch).
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)

    @field_validator("factory")
    @classmethod
    def _factory_form(cls, value: str) -> str:
        if ":" not in value:
            raise ValueError(f"factory {value!r} must look like package.module:factory")
        return value

    def instance(self) -> Any:
        """The plug-in object in this process (the contract checker's way); the pipeline uses :meth:`worker`."""
        plugin = import_factory(self.factory)(**self.params)
        missing = [m for m in ("build", "search") if not callable(getattr(plugin, m, None))]
        if missing:
            raise TypeError(f"{self.factory} returned a {type(plugin).__name__} without {', '.join(missing)}()")
        return plugin

    def worker(self, dataset: str) -> tuple[PluginProcess, str, bool]:
        """The plug-in object built in a worker process: ``(worker, class name, whether it has save and load)``.

        Raises:
            RetrieverError: The factory failed, exited or hung, or returned an object without build/search.
        """
        worker = PluginProcess(self.name or self.factory, dataset, self.timeout_s, self.factory)
        try:
            worker.call("import", self.factory, timeout_s=max(self.timeout_s, IMPORT_TIMEOUT_S))
            plugin_class = worker.call("construct", self.factory, self.params)
            build, search, save, load = worker.call("has", ["build", "search", "save", "load"])
            missing = [m for m, ok in (("build", build), ("search", search)) if not ok]
            if missing:
                raise TypeError(f"{self.factory} returned a {plugin_class.rsplit('.', 1)[-1]} without {', '.join(missing)}()")
        except BaseException:
            worker.close()
            raise
        return worker, plugin_class, bool(save and load)

    def build(self, ctx: RetrieverContext) -> dict[str, Any]:
        worker, plugin_class, saved = self.worker(ctx.dataset)
        try:
            worker.call("build", ctx.doc_ids, ctx.texts)
            if saved:
                worker.call("save", ctx.index_dir / SAVED_MARKER)
        finally:
            worker.close()
        return {"plugin_class": plugin_class, "persisted": saved}

    def load(self, ctx: RetrieverContext) -> Retriever:
        worker, _, _ = self.worker(ctx.dataset)
        try:
            saved = ctx.index_dir / SAVED_MARKER
            if saved.exists():
                worker.call("load", saved)
            else:
                worker.call("build", ctx.doc_ids, ctx.texts)
        except BaseException:
            worker.close()
            raise
        return PluginRetriever(worker, self.name)
