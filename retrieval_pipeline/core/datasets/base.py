"""The dataset-kind protocol: one :class:`DatasetAdapter` per kind, chosen by the registry's ``kind:`` key.

A kind (``suite``, ``nq``, ``context_qa``, ``beir``, ...) is one folder of this package whose ``adapter.py``
holds one adapter class decorated with :func:`register_adapter`. The adapter owns everything kind-specific:

* its **settings blocks**: the registry keys only this kind sets (``nq:``; ``suites:`` and ``corpus:``),
  each validated as a pydantic type, with the keys that hold paths (resolved against the registry root);
* **reading** the dataset: :meth:`~DatasetAdapter.load_cases` and :meth:`~DatasetAdapter.build_corpus`,
  and the files it reads (:meth:`~DatasetAdapter.input_paths`, derived from the path keys by default);
* **pairing** its cases with gold documents (:meth:`~DatasetAdapter.pair_builder`, each pair made by
  :func:`gold_pair`) and what the pairs report adds (:meth:`~DatasetAdapter.pairs_report`);
* **evaluation** extras: per-query columns (:meth:`~DatasetAdapter.extra_query_columns`) and asset
  metadata (:meth:`~DatasetAdapter.metadata`).

The registry validates a dataset's blocks with :func:`validate_kind_blocks`; the assets ask
:func:`adapter_for`. Importing :mod:`retrieval_pipeline.core.datasets` imports the ``adapter`` module of every
kind folder, so adding a kind is adding one folder there and nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator

from retrieval_pipeline.core.common.types import Case, Document, QAPair, Qrels, Rejected, Run

if TYPE_CHECKING:
    import pandas as pd

#: The kind of a registry entry that names none.
DEFAULT_KIND = "suite"
#: :class:`Case` fields stored as JSON text in the ``raw_cases`` frame (see :mod:`retrieval_pipeline.core.common.frames`).
CASE_JSON_FIELDS = ("gold_fqns", "files", "options", "extra")

#: How one case of a kind becomes a pair.
PairBuilder = Callable[[Case], QAPair]
#: ``(run, qrels) -> frame``: one row per query (``query_id`` column) of extra per-query metrics.
QueryColumns = Callable[[Run, Qrels], "pd.DataFrame"]


class RankingMetrics(Protocol):
    """The evaluation's per-query ranking metrics, handed to a kind's :meth:`DatasetAdapter.extra_query_columns`.

    :func:`retrieval_pipeline.core.evaluation.metrics.per_query_metrics` is one: the evaluation passes it in,
    so a kind's extra columns use the same formulas without this stage importing the evaluation above it.
    """

    def __call__(
        self, run: Run, qrels: Qrels, ks: Sequence[int] = ..., ndcg_k: int = ..., f1_k: int = ..., precision_ks: Sequence[int] = ...
    ) -> pd.DataFrame: ...


A = TypeVar("A", bound="DatasetAdapter")


@dataclass
class CorpusBuild:
    """The corpus of a dataset: documents, rejected entries, counts, and where it came from."""

    documents: list[Document]
    rejects: list[Rejected]
    report: dict[str, Any]
    source: str


@dataclass
class CasesBuild:
    """The queries of a dataset: ``len(cases) + len(rejects) == total``."""

    cases: list[Case]
    rejects: list[Rejected]
    total: int
    report: dict[str, Any] = field(default_factory=dict)


class SettingsBlock(BaseModel):
    """Base of a kind's settings models: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetSettings(BaseModel):
    """What the datasets stage knows of a dataset: its name, its kind, and the kind's validated blocks.

    The registry's :class:`~retrieval_pipeline.core.registry.DatasetConfig` adds each later stage's settings
    (retrieval, filtering, pairs, verifier, evaluation) as fields. A kind's blocks (``suites`` and ``corpus``;
    ``nq``; ``context_qa``; ``beir``; ...) are declared and validated by the kind's adapter and read as
    attributes (``config.nq.csv``); a key that is neither a field nor a block of the dataset's kind is an error.
    """

    model_config = ConfigDict(extra="allow", frozen=True)  # the extras are the kind's validated blocks

    name: str
    description: str = ""
    kind: str = DEFAULT_KIND  # a registered adapter's kind

    @model_validator(mode="before")
    @classmethod
    def _kind_blocks(cls, data: Any) -> Any:
        """The kind's adapter validates its blocks; other kinds' blocks and unknown keys are errors."""
        return validate_kind_blocks(data, cls.model_fields) if isinstance(data, dict) else data

    def input_paths(self) -> list[Path]:
        """Every file or folder this dataset reads (its kind's inputs)."""
        return adapter_for(self).input_paths(self)

    def missing_inputs(self) -> list[Path]:
        return [p for p in self.input_paths() if not p.exists()]


@dataclass(frozen=True)
class Block:
    """One top-level registry key owned by a kind.

    Attributes:
        type: What the value is validated as: a pydantic model, or any type pydantic validates (``list[Path]``).
        path_keys: Keys of a mapping value that hold a path or a list of paths.
        is_path: The value itself is a path or a list of paths (``suites``).
        required: The kind needs the block (absent or empty is an error).
    """

    type: Any
    path_keys: tuple[str, ...] = ()
    is_path: bool = False
    required: bool = True

    def validate(self, value: Any) -> Any:
        """The value validated as :attr:`type` (raises pydantic's ``ValidationError``)."""
        return TypeAdapter(self.type).validate_python(value)

    def resolve_paths(self, value: Any, resolve: Callable[[Any], Any]) -> Any:
        """The raw (unvalidated) value with ``resolve`` applied to its path values."""
        if self.is_path:
            return resolve(value)
        if isinstance(value, Mapping):
            return {k: (resolve(v) if k in self.path_keys else v) for k, v in value.items()}
        return value

    def paths_in(self, value: Any) -> list[Path]:
        """The paths a validated value names, in key order (unset ones skipped)."""
        if self.is_path:
            return _as_paths(value)
        return [p for key in self.path_keys for p in _as_paths(getattr(value, key, None))]


def _as_paths(value: Any) -> list[Path]:
    if not value:
        return []
    return [Path(v) for v in value if v] if isinstance(value, (list, tuple)) else [Path(value)]


class DatasetAdapter(ABC):
    """Everything one dataset kind does differently; the rest of the pipeline is written once.

    Subclasses set :attr:`kind` and :attr:`blocks`, implement :meth:`load_cases` and :meth:`build_corpus`,
    and override the other hooks where the kind needs to. A validated kind block is an attribute of the
    dataset config under the block's name (``config.nq``, ``config.context_qa``).
    """

    #: The registry's ``kind:`` value.
    kind: ClassVar[str]
    #: The registry keys this kind owns (no other kind may set them), in the order their paths are listed.
    blocks: ClassVar[Mapping[str, Block]]

    def input_paths(self, config: DatasetSettings) -> list[Path]:
        """Every file or folder the dataset reads: by default the values of the blocks' path keys."""
        return [p for name, block in self.blocks.items() for p in block.paths_in(getattr(config, name, None))]

    @abstractmethod
    def load_cases(self, config: DatasetSettings) -> CasesBuild:
        """The queries, validated; invalid rows become rejects with file, case and reason."""

    @abstractmethod
    def build_corpus(self, config: DatasetSettings) -> CorpusBuild:
        """The documents retrievers index, with rejects and counts."""

    def pair_builder(self, config: DatasetSettings, documents: Sequence[Document]) -> PairBuilder | None:
        """How each case becomes a (query, gold documents) pair.

        Returns:
            ``None`` (the default) for benchmark-suite cases: gold FQNs resolved against the corpus,
            fix_error targets inferred, multiple-choice cases routed to the verifier (see
            :func:`retrieval_pipeline.core.pairs.build.build_pairs`). Any other case type needs a builder.
        """
        return None

    def pairs_report(self, pairs: Sequence[QAPair]) -> dict[str, Any]:
        """Counts this kind adds to the pairs' metadata (beside :func:`~retrieval_pipeline.core.pairs.build.pairs_report`)."""
        return {}

    def extra_query_columns(
        self, config: DatasetSettings, raw_cases: pd.DataFrame, corpus: pd.DataFrame, ranking: RankingMetrics
    ) -> QueryColumns | None:
        """Per-query metric columns beyond :func:`~retrieval_pipeline.core.evaluation.metrics.per_query_metrics`, or ``None``.

        Args:
            raw_cases: The ``raw_cases`` asset (JSON fields as text, see :data:`CASE_JSON_FIELDS`).
            corpus: The ``corpus`` asset.
            ranking: The evaluation's per-query ranking metrics (the evaluation passes them in; this stage
                sits below the evaluation and does not import it).

        Returns:
            A function ``(run, qrels) -> frame`` with a ``query_id`` column, merged (left) into each
            retriever's per-query metrics; ``None`` (the default) when the kind adds none.
        """
        return None

    def metadata(self, config: DatasetSettings) -> dict[str, Any]:
        """Settings recorded in the evaluation's asset metadata: JSON values by name (default: none)."""
        return {}


def gold_pair(
    case: Case,
    gold_doc_ids: Sequence[str],
    method: str,
    evidence: dict[str, Any],
    warnings: Sequence[str] = (),
    grades: Sequence[int] = (),
) -> QAPair:
    """``case`` paired with its relevant documents: resolved when there is one, unresolved when there is none.

    Args:
        gold_doc_ids: The relevant documents, most relevant first.
        method: How the gold was found (``"nq:long_answer"``).
        evidence: What the pair's report shows of how it was found.
        warnings: Problems to report with the pair (why it is unresolved).
        grades: Graded relevance aligned with ``gold_doc_ids``; empty means every gold is grade 1.
    """
    return QAPair(
        case.case_id,
        case.suite,
        case.benchmark_type,
        case.source_file,
        case.query,
        list(gold_doc_ids),
        "resolved" if gold_doc_ids else "unresolved",
        method,
        evidence,
        list(warnings),
        list(grades),
    )


_ADAPTERS: dict[str, DatasetAdapter] = {}


def register_adapter(cls: type[A]) -> type[A]:
    """Class decorator: register one instance of ``cls`` under ``cls.kind``.

    Raises:
        ValueError: another class already holds the kind, or one of the blocks belongs to another kind.
    """
    held = _ADAPTERS.get(cls.kind)
    if held is not None and type(held).__qualname__ != cls.__qualname__:
        raise ValueError(f"dataset kind {cls.kind!r} is already registered by {type(held).__qualname__}")
    owners = block_owners()
    taken = {b: owners[b] for b in cls.blocks if owners.get(b, cls.kind) != cls.kind}
    if taken:
        raise ValueError(f"dataset kind {cls.kind!r}: blocks already owned by other kinds: {taken}")
    _ADAPTERS[cls.kind] = cls()
    return cls


def unregister_adapter(kind: str) -> None:
    """Forget a kind (for tests that register a kind of their own)."""
    _ADAPTERS.pop(kind, None)


def adapters() -> Mapping[str, DatasetAdapter]:
    """Every registered adapter by kind (read-only)."""
    return MappingProxyType(_ADAPTERS)


def adapter_of_kind(kind: str) -> DatasetAdapter:
    """The adapter registered under ``kind``; a ``ValueError`` names the known kinds otherwise."""
    try:
        return _ADAPTERS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dataset kind {kind!r}; known: {', '.join(sorted(_ADAPTERS))}") from None


def adapter_for(config: DatasetSettings) -> DatasetAdapter:
    """The adapter of a dataset's kind."""
    return adapter_of_kind(config.kind)


def block_owners() -> dict[str, str]:
    """Every registered block name and the kind that owns it."""
    return {name: kind for kind, adapter in _ADAPTERS.items() for name in adapter.blocks}


def all_blocks() -> dict[str, Block]:
    """Every registered block by name (whatever its kind): what the registry resolves paths in."""
    return {name: block for adapter in _ADAPTERS.values() for name, block in adapter.blocks.items()}


def validate_kind_blocks(data: Mapping[str, Any], fields: Collection[str]) -> dict[str, Any]:
    """A raw registry entry with its kind's blocks validated (the other keys untouched).

    Args:
        data: The entry, defaults merged in.
        fields: The keys that are generic dataset settings (not blocks).

    Raises:
        ValueError: the kind is unknown, one of its required blocks is missing or empty, another kind's
            block is set, or a key is neither a setting nor a block of any kind.
    """
    kind = data.get("kind", DEFAULT_KIND)
    adapter = adapter_of_kind(kind)
    owners = block_owners()
    out: dict[str, Any] = {}
    foreign: list[str] = []
    unknown: list[str] = []
    for key, value in data.items():
        if key in fields:
            out[key] = value
        elif key in adapter.blocks:
            out[key] = value if value is None else _validated(key, adapter.blocks[key], value)
        elif key in owners:
            foreign += [key] if value else []  # an empty block of another kind is ignored
        else:
            unknown.append(key)
    if unknown:
        raise ValueError(f"unknown settings {unknown}: neither a dataset setting nor a block of any kind ({', '.join(sorted(owners))})")
    _check_blocks(kind, adapter, out, foreign)
    return out


def _validated(name: str, block: Block, value: Any) -> Any:
    try:
        return block.validate(value)
    except ValidationError as exc:  # one line per problem, the block's key path named
        problems = "; ".join(f"{'.'.join(map(str, (name, *e['loc'])))}: {e['msg']}" for e in exc.errors())
        raise ValueError(problems) from None


def _check_blocks(kind: str, adapter: DatasetAdapter, entry: Mapping[str, Any], foreign: list[str]) -> None:
    wanted = sorted(b for b, block in adapter.blocks.items() if block.required)
    missing = [b for b in wanted if not entry.get(b)]
    if missing or foreign:
        raise ValueError(
            f"kind {kind!r} needs {wanted}" + (f"; missing {missing}" if missing else "") + (f"; not allowed: {foreign}" if foreign else "")
        )
