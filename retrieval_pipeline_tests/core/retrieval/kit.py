"""What the retriever-kind tests share: a toy corpus, spec parsing, fake model folders, build and load.

Every helper builds into ``<root>/indexes`` with the embedding cache in ``<root>/cache`` and loads from
there, for dataset :data:`DATASET`; ``docs`` defaults to the toy corpus :data:`DOCS`. Import it as
``from retrieval_pipeline_tests.core.retrieval.kit import ...`` (the tests run with ``--import-mode=importlib``).
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import QueryError, QueryResult
from retrieval_pipeline.core.retrieval.factory import (
    CheckedRetriever,
    RetrieverRegistry,
    build_context,
    build_index,
    load_retriever,
    parse_spec,
)
from retrieval_pipeline.core.retrieval.kinds.dense import DenseSpec
from retrieval_pipeline.core.retrieval.spec import RetrieverSpec

EncoderFor = Callable[[Any], Any]
"""``encoder_for`` of the factory: a spec in, its encoder (or scorer) out."""

SpecT = TypeVar("SpecT", bound=RetrieverSpec)

DATASET = "toy"
CORPUS: dict[str, str] = {
    "d0": "the cat sat on the mat",
    "d1": "a dog chased the cat",
    "d2": "fish swim in the sea",
    "d3": "birds fly over the sea",
    "d4": "the dog sleeps",
}
BI_ENCODER_CONFIG = '{"architectures": ["BertModel"]}'

REAL_DOCS = [
    Document("reset", "To reset your password, open Settings, choose Security and click Forgot password."),
    Document("recipe", "The recipe needs two cups of flour, an egg and a pinch of salt."),
    Document("oom", "The container was OOMKilled because it exceeded its memory limit."),
]
"""A tiny real-language corpus for the integration tests of real models."""


class StubBase:
    """A base retriever with fixed answers per query (none for a query it does not know), each cut at ``k``;
    records the ``k`` it was asked for."""

    name = "stub"

    def __init__(self, answers: Mapping[str, QueryResult]) -> None:
        self.answers = dict(answers)
        self.asked: list[int] = []

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        self.asked.append(k)
        return [a if isinstance(a, QueryError) else list(a)[:k] for a in (self.answers.get(q, []) for q in queries)]


def docs_of(corpus: Mapping[str, str]) -> list[Document]:
    """The documents of ``corpus`` (doc id -> text), in its order."""
    return [Document(doc, text) for doc, text in corpus.items()]


DOCS = docs_of(CORPUS)


def parse_as(spec_type: type[SpecT], name: str, raw: Mapping[str, Any]) -> SpecT:
    """Parse one registry entry and check it is a ``spec_type``."""
    spec = parse_spec(name, raw)
    assert isinstance(spec, spec_type), f"{name} parsed as {type(spec).__name__}, not {spec_type.__name__}"
    return spec


def dense(name: str, model_dir: Path, **settings: Any) -> DenseSpec:
    """A ``kind: dense`` spec of the model in ``model_dir`` (``settings``: the entry's other keys)."""
    return parse_as(DenseSpec, name, {"kind": "dense", "model": {"path": str(model_dir)}, **settings})


def fake_model_folder(root: Path, weights: bytes = b"weights-v1", config: str | Mapping[str, Any] = BI_ENCODER_CONFIG) -> Path:
    """A folder that looks like a model to the resolver, the fingerprint and the checks (never loaded).

    ``config`` is the text of ``config.json``, or a mapping written as JSON.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    (root / "model.safetensors").write_bytes(weights)
    return root


def no_encoder(spec: Any) -> Any:
    """``encoder_for`` of kinds that need none from the factory (``http``, ``openai_embeddings``): fails if asked."""
    raise AssertionError(f"retriever {spec.name!r} ({spec.kind}) asked the factory for an encoder")


def registry_of(*specs: RetrieverSpec, root: Path) -> RetrieverRegistry:
    """A registry of ``specs`` (as if read from ``<root>/retrievers.yaml``)."""
    return RetrieverRegistry(root / "retrievers.yaml", {s.name: s for s in specs})


def build_one(
    registry: RetrieverRegistry,
    name: str,
    root: Path,
    encoder_for: EncoderFor = no_encoder,
    *,
    docs: Sequence[Document] = DOCS,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build ``name`` alone (its components must be built already); returns its ``retriever.json``."""
    ctx = build_context(registry, DATASET, docs, root / "indexes", root / "cache", encoder_for, name, log)
    return build_index(registry.get(name), ctx)


def build_all(
    registry: RetrieverRegistry, name: str, root: Path, encoder_for: EncoderFor = no_encoder, *, docs: Sequence[Document] = DOCS
) -> dict[str, Any]:
    """Build ``name`` and its components, components first; returns ``name``'s ``retriever.json``."""
    params: dict[str, Any] = {}
    for part in registry.closure([name]):
        params = build_one(registry, part, root, encoder_for, docs=docs)
    return params


def build(
    spec: RetrieverSpec,
    root: Path,
    encoder_for: EncoderFor = no_encoder,
    *,
    docs: Sequence[Document] = DOCS,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build ``spec`` in a registry of its own; returns its ``retriever.json``."""
    return build_one(registry_of(spec, root=root), spec.name, root, encoder_for, docs=docs, log=log)


def load_from(
    registry: RetrieverRegistry, name: str, root: Path, encoder_for: EncoderFor = no_encoder, *, docs: Sequence[Document] = DOCS
) -> CheckedRetriever:
    """Load the built retriever ``name`` of ``registry``."""
    return load_retriever(registry, name, DATASET, docs, root / "indexes", root / "cache", encoder_for)


def load(spec: RetrieverSpec, root: Path, encoder_for: EncoderFor = no_encoder, *, docs: Sequence[Document] = DOCS) -> CheckedRetriever:
    """Load the built ``spec`` from a registry of its own."""
    return load_from(registry_of(spec, root=root), spec.name, root, encoder_for, docs=docs)


def committed_vectors(path: Path) -> int:
    """Vectors in an embedding cache file, read by a separate read-only connection (0 while it has none yet).

    What a killed writer left behind: only committed shards are visible to another connection.
    """
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


# -- fine-tunes of keyword fakes -------------------------------------------------------------------


def fine_tune_fakes(monkeypatch: pytest.MonkeyPatch, folder: Path, *settings_types: type) -> Callable[[Any], Any]:
    """Let keyword fakes take the real fine-tune path (mined pairs, cache key, trained folder, manifest).

    Each settings type's ``trainer`` becomes one that writes a fake model folder whose weights are the anchors it
    was given (other pairs, other weights), and its ``load`` a copy of the base fake named after the trained
    folder (``<model_id>+<TAG>-<8 hex of the key>``). Returns ``with_folder(fake)``: the fake, given ``folder``
    (a :func:`fake_model_folder`) as the model folder it was loaded from.
    """

    def train(base: Path, pairs: Any, texts: dict[str, str], settings: Any, device: str, out: Path) -> dict[str, Any]:
        fake_model_folder(out, weights=json.dumps([p.anchor for p in pairs]).encode())
        return {"steps": 1}

    def load_fake(settings: Any, base: Any, trained: Path, name: str) -> Any:
        tuned = copy.copy(base)
        tuned.model_id, tuned.folder, tuned.name = f"{base.model_id}+{settings.TAG}-{trained.name[:8]}", trained, name
        return tuned

    for settings_type in settings_types:
        monkeypatch.setattr(settings_type, "trainer", lambda self: train)
        monkeypatch.setattr(settings_type, "load", load_fake)

    def with_folder(fake: Any) -> Any:
        fake.folder, fake.name = folder, "fake"
        return fake

    return with_folder
