"""Resolve gold FQN strings from a benchmark to document ids of a corpus.

Benchmarks name API objects the way users import them (``google.adk.agents.BaseAgent``) while the
index lists where they are defined (``google.adk.agents.base_agent.BaseAgent``). Resolution tries, in
order: an exact id match, an alias match, then suffix matching (same final name under the gold's
package); whatever stays ambiguous or unmatched is ``unresolved``, with candidates listed.

A re-export under another name (``google.adk.Agent`` is ``LlmAgent``) defeats all three; only the library
knows it. :func:`resolve_golds` hands the golds still unresolved to a :class:`GoldImporter`, in one call
per dataset: :class:`~retrieval_pipeline.core.pairs.import_resolver.ImportResolver` imports them in the
library's own environment and maps each object's canonical path to a document (method ``import``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

from retrieval_pipeline.core.common.types import Case, Document

ResolutionMethod = Literal["exact", "alias", "suffix", "import", "unresolved"]
#: Every resolution method, in the order they are tried (``unresolved`` last).
RESOLUTION_METHODS: tuple[str, ...] = get_args(ResolutionMethod)


@dataclass
class GoldResolution:
    """How one gold string maps to a corpus document (``doc_id`` is None when unresolved)."""

    gold: str
    doc_id: str | None
    method: ResolutionMethod
    candidates: list[str] = field(default_factory=list)
    note: str = ""


class CorpusLookup:
    """Id, alias and short-name indexes over a corpus, built once and queried many times."""

    def __init__(self, documents: Iterable[Document]):
        """Index ``documents``; on repeated ids the first document wins."""
        self._kinds: dict[str, str] = {}
        self._aliases: dict[str, list[str]] = {}
        self._by_alias: dict[str, list[str]] = {}
        self._by_name: dict[str, list[str]] = {}
        for doc in documents:
            if doc.doc_id not in self._kinds:
                self._add(doc)

    @classmethod
    def from_documents(cls, documents: Iterable[Document]) -> CorpusLookup:
        """Build a lookup over ``documents``."""
        return cls(documents)

    def _add(self, doc: Document) -> None:
        """Register one document under its id, aliases and short names."""
        self._kinds[doc.doc_id] = doc.kind
        self._aliases[doc.doc_id] = list(doc.aliases)
        names = {_last(doc.doc_id), doc.title} | {_last(a) for a in doc.aliases}
        for name in sorted(n for n in names if n):
            self._by_name.setdefault(name, []).append(doc.doc_id)
        for alias in doc.aliases:
            ids = self._by_alias.setdefault(alias, [])
            if doc.doc_id not in ids:
                ids.append(doc.doc_id)

    def __contains__(self, doc_id: object) -> bool:
        """True when ``doc_id`` is a document id of the corpus."""
        return doc_id in self._kinds

    def __len__(self) -> int:
        """The number of distinct documents."""
        return len(self._kinds)

    @property
    def ids(self) -> list[str]:
        """All document ids, in corpus order."""
        return list(self._kinds)

    def kind(self, doc_id: str) -> str | None:
        """The kind of a document (``class``, ``method``...), or None when not in the corpus."""
        return self._kinds.get(doc_id)

    def aliases(self, doc_id: str) -> list[str]:
        """The aliases of a document ([] when it has none or is not in the corpus)."""
        return list(self._aliases.get(doc_id, []))

    def by_alias(self, alias: str) -> list[str]:
        """Ids of the documents that list ``alias`` among their aliases, in corpus order."""
        return list(self._by_alias.get(alias, []))

    def by_name(self, name: str) -> list[str]:
        """Ids whose short name (last id component, title, or last alias component) is ``name``."""
        return list(self._by_name.get(name, []))


def resolve_gold(gold: str, lookup: CorpusLookup) -> GoldResolution:
    """Resolve one gold FQN: exact id, then alias, then suffix match; else unresolved.

    Args:
        gold: A dotted name as written in the benchmark.
        lookup: The corpus indexes.

    Returns:
        The resolution; ``candidates`` lists the other plausible ids (for ``suffix``) or all of them
        (for an ambiguous ``unresolved``).
    """
    gold = gold.strip()
    if gold in lookup:
        return GoldResolution(gold, gold, "exact", note="id match")
    aliased = lookup.by_alias(gold)
    if len(aliased) == 1:
        return GoldResolution(gold, aliased[0], "alias", note=f"alias of {aliased[0]}")
    if aliased:
        return GoldResolution(gold, None, "unresolved", aliased, note=f"alias claimed by {len(aliased)} documents")
    return _resolve_by_suffix(gold, lookup)


class GoldImporter(Protocol):
    """Resolves, in one call, golds the corpus indexes could not (e.g. by importing them in the library)."""

    def resolve(self, golds: Sequence[str], lookup: CorpusLookup) -> dict[str, GoldResolution]: ...


def resolve_golds(golds: Iterable[str], lookup: CorpusLookup, importer: GoldImporter | None = None) -> dict[str, GoldResolution]:
    """Resolve distinct gold strings: exact, alias, suffix; then the rest through ``importer`` in ONE call.

    Args:
        golds: Gold strings (duplicates are resolved once; keys are stripped).
        lookup: The corpus indexes.
        importer: Asked about every gold left unresolved; None leaves them unresolved.

    Returns:
        Gold (stripped) -> its resolution. An importer's answer replaces an ``unresolved`` one only; a gold
        the importer does not answer keeps its index resolution.
    """
    resolved = {gold: resolve_gold(gold, lookup) for gold in dict.fromkeys(g.strip() for g in golds)}
    pending = [gold for gold, resolution in resolved.items() if resolution.doc_id is None]
    if importer is not None and pending:
        answers = importer.resolve(pending, lookup)
        resolved |= {gold: answers[gold] for gold in pending if gold in answers}
    return resolved


def resolve_case_golds(case: Case, lookup: CorpusLookup, resolved: Mapping[str, GoldResolution] | None = None) -> list[GoldResolution]:
    """Resolve every gold FQN of a case, in the case's order; ``resolved`` (from :func:`resolve_golds`) is used first."""
    known = resolved or {}
    return [known.get(gold.strip()) or resolve_gold(gold, lookup) for gold in case.gold_fqns]


def resolution_counts(resolutions: Iterable[GoldResolution]) -> dict[str, int]:
    """Count resolutions per method (every method of :data:`RESOLUTION_METHODS` present, zeros included)."""
    counts = dict.fromkeys(RESOLUTION_METHODS, 0)
    for resolution in resolutions:
        counts[resolution.method] += 1
    return counts


def resolution_shares(counts: Mapping[str, int]) -> dict[str, float]:
    """Each method's share of all resolutions (NaN for every method when there are none)."""
    total = sum(counts.values())
    return {method: (counts.get(method, 0) / total if total else float("nan")) for method in RESOLUTION_METHODS}


def _resolve_by_suffix(gold: str, lookup: CorpusLookup) -> GoldResolution:
    """Match ids with the gold's final name that sit under the gold's package; pick the closest."""
    ranked = sorted(suffix_candidates(gold, lookup), key=lambda doc_id: _closeness(gold, doc_id))
    if not ranked:
        return GoldResolution(gold, None, "unresolved", note="no id, alias or suffix match")
    best_key = _closeness(gold, ranked[0])
    tied = [doc_id for doc_id in ranked if _closeness(gold, doc_id) == best_key]
    if len(tied) > 1:
        note = f"suffix match ambiguous: {len(tied)} ids equally close"
        return GoldResolution(gold, None, "unresolved", ranked, note=note)
    note = f"suffix match: {-best_key[0]} shared leading components, {best_key[1]} extra"
    return GoldResolution(gold, ranked[0], "suffix", ranked[1:], note=note)


def suffix_candidates(gold: str, lookup: CorpusLookup) -> list[str]:
    """Ids ending in the gold's final name whose id starts with the gold's package prefix."""
    package, _, name = gold.rpartition(".")
    return [
        doc_id
        for doc_id in lookup.by_name(name)
        if _last(doc_id) == name and doc_id != gold and (not package or doc_id.startswith(package + "."))
    ]


def _closeness(gold: str, doc_id: str) -> tuple[int, int]:
    """Sort key, best first: longest shared dotted prefix, then fewest extra components."""
    gold_parts, doc_parts = gold.split("."), doc_id.split(".")
    shared = 0
    for a, b in zip(gold_parts, doc_parts):
        if a != b:
            break
        shared += 1
    return (-shared, len(doc_parts) - len(gold_parts))


def _last(dotted: str) -> str:
    """The last component of a dotted name."""
    return dotted.rsplit(".", 1)[-1]
