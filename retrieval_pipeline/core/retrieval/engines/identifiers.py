"""Code-aware lexical scoring: identifiers named in a query matched against documents' names and FQNs.

**Identifiers in a query** (:func:`query_identifiers`): every name inside backticks (```LlmAgent```,
```run_async()```, ```google.adk.runners.Runner```), and outside backticks every name that is
dotted (``os.path.join``), snake_case (``max_iterations``) or CamelCase (``SequentialAgent``). A plain
word outside backticks is prose, not an identifier. Each identifier keeps its dotted components and its
words (camel, snake and dot parts, lowercased; ``LlmAgent.run_async`` -> ``llm``, ``agent``, ``run``,
``async``). The same identifier named twice counts once.

**Features of a document** for one identifier (:class:`NameIndex`), names compared lowercased:

* ``exact``: the document's name (its ``title``, else the last component of its ``doc_id``) is the
  identifier's last component.
* ``suffix``: the identifier has two or more components, and they appear in order among the components of
  the document's FQN (its ``doc_id`` or one of its ``aliases``), the last ending it:
  ``agents.LlmAgent`` and ``google.adk.agents.LlmAgent`` both match ``google.adk.agents.llm_agent.LlmAgent``.
* ``component``: the identifier's last component is an enclosing component of the document's FQN (a
  method of the named class, a member of the named module).
* ``part``: the Dice overlap of the identifier's words and the document name's words,
  :math:`2|W_q \\cap W_d| / (|W_q| + |W_d|)` (1 for the same words: ``LoopAgent`` and ``loop_agent``).

**The score** of a document for a query (:class:`CodeLexicalRetriever`), with the base retriever's
scores min-max normalised over its top ``depth`` (:func:`~retrieval_pipeline.core.retrieval.engines.fusion.minmax_normalise`;
0 outside them):

.. math::  s(d) = w_{text} \\hat b(d) + \\sum_{q} \\big( w_{exact} E_q(d) + w_{suffix} S_q(d)
           + w_{component} C_q(d) + w_{part} P_q(d) \\big) + w_{prior} \\pi(d)

where :math:`\\pi(d) \\in [0, 1]` is an optional corpus prior (e.g. ``usage_score`` of a ranked-targets
file, :func:`prior_values`), absent unless configured. A query with no identifier is ranked by the base
alone. Candidates are the base's hits (its last one included, whose normalised score is 0) and every
document with a positive score; ties are broken by the base's rank, then corpus order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval_pipeline.core.common.types import Document, Hit
from retrieval_pipeline.core.retrieval.base import QueryResult, Retriever, each_from_base
from retrieval_pipeline.core.retrieval.engines.fusion import minmax_normalise
from retrieval_pipeline.core.retrieval.engines.tokenize import split_camel

#: A name as written in code, dotted or not: ``os.path.join``, ``max_length``, ``OrderedDict``.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: A backticked span (inline code).
_BACKTICKS_RE = re.compile(r"`([^`\n]+)`")
#: A CamelCase boundary inside a run of letters and digits.
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")
#: Letters and digits: the words of a name once split at ``_`` and ``.``.
_ALNUM_RE = re.compile(r"[A-Za-z0-9]+")


def name_words(name: str) -> frozenset[str]:
    """The words of a name, split at dots, underscores and CamelCase boundaries, lowercased.

    ``LlmAgent.run_async`` -> ``{llm, agent, run, async}``; ``HTTPServer`` -> ``{http, server}``.
    """
    return frozenset(part.lower() for run in _ALNUM_RE.findall(name) for part in split_camel(run) if part)


@dataclass(frozen=True)
class Identifier:
    """One identifier of a query: ``text`` as written, its dotted ``components`` and its ``words`` (lowercased)."""

    text: str
    components: tuple[str, ...]
    words: frozenset[str]

    @property
    def last(self) -> str:
        return self.components[-1]


def _identifier(text: str) -> Identifier | None:
    components = tuple(c.lower() for c in text.split(".") if c)
    if not components or not name_words(text):
        return None
    return Identifier(text, components, name_words(text))


def _code_like(name: str) -> bool:
    """Outside backticks a name is an identifier when it is dotted, snake_case or CamelCase."""
    return "." in name or "_" in name.strip("_") or _CAMEL_RE.search(name) is not None


def query_identifiers(query: str) -> list[Identifier]:
    """The identifiers a query names (see the module docstring), in order of first mention, each once.

    Args:
        query: The query text.

    Returns:
        The identifiers; empty for plain prose.
    """
    found: dict[tuple[str, ...], Identifier] = {}

    def add(names: Iterable[str]) -> None:
        for name in names:
            ident = _identifier(name)
            if ident is not None:
                found.setdefault(ident.components, ident)

    prose = _BACKTICKS_RE.sub(" ", query)
    for span in _BACKTICKS_RE.findall(query):
        add(_NAME_RE.findall(span))
    add(name for name in _NAME_RE.findall(prose) if _code_like(name))
    return list(found.values())


def _ends_in_order(needle: Sequence[str], fqn: Sequence[str]) -> bool:
    """``needle``'s components occur in order in ``fqn``, the last one ending it."""
    if not needle or not fqn or needle[-1] != fqn[-1]:
        return False
    rest = iter(fqn[:-1])
    return all(part in rest for part in needle[:-1])


class NameIndex:
    """Every document's name, FQNs and name words, for the identifier features of the module docstring.

    Args:
        documents: The corpus, in corpus order.
    """

    def __init__(self, documents: Sequence[Document]) -> None:
        self.n_docs = len(documents)
        self._fqns: list[list[tuple[str, ...]]] = []
        self._by_name: dict[str, list[int]] = {}
        self._by_enclosing: dict[str, list[int]] = {}
        self._by_word: dict[str, list[int]] = {}
        self._n_words = np.zeros(len(documents), dtype=np.float64)
        for position, doc in enumerate(documents):
            fqns = [tuple(c.lower() for c in fqn.split(".") if c) for fqn in (doc.doc_id, *doc.aliases)]
            self._fqns.append([f for f in fqns if f])
            name = (doc.title or doc.doc_id.rsplit(".", 1)[-1]).lower()
            self._by_name.setdefault(name, []).append(position)
            enclosing = {c for fqn in self._fqns[-1] for c in fqn[:-1]}
            for component in enclosing:
                self._by_enclosing.setdefault(component, []).append(position)
            words = name_words(doc.title or doc.doc_id.rsplit(".", 1)[-1])
            self._n_words[position] = len(words)
            for word in words:
                self._by_word.setdefault(word, []).append(position)

    def features(self, ident: Identifier) -> dict[str, np.ndarray]:
        """``exact``, ``suffix``, ``component`` and ``part`` of every document for one identifier (corpus order)."""
        exact = np.zeros(self.n_docs)
        suffix = np.zeros(self.n_docs)
        component = np.zeros(self.n_docs)
        shared = np.zeros(self.n_docs)
        named = self._by_name.get(ident.last, [])
        exact[named] = 1.0
        if len(ident.components) > 1:
            for position in named:
                if any(_ends_in_order(ident.components, fqn) for fqn in self._fqns[position]):
                    suffix[position] = 1.0
        component[self._by_enclosing.get(ident.last, [])] = 1.0
        for word in ident.words:
            shared[self._by_word.get(word, [])] += 1.0
        part = 2.0 * shared / (len(ident.words) + self._n_words)
        return {"exact": exact, "suffix": suffix, "component": component, "part": part}


@dataclass(frozen=True)
class FeatureWeights:
    """The weights of :class:`CodeLexicalRetriever`'s score (see the module docstring)."""

    text: float = 1.0
    exact: float = 1.0
    suffix: float = 0.5
    component: float = 0.25
    part: float = 0.5
    prior: float = 0.0


def prior_values(doc_ids: Sequence[str], scores: Mapping[str, float]) -> np.ndarray:
    """A corpus prior in [0, 1]: :math:`\\log(1 + s) / \\log(1 + \\max s)` of each document's score ``s``.

    Args:
        doc_ids: The corpus ids, in corpus order.
        scores: A non-negative score by doc id (e.g. ``usage_score``); a document not named gets 0.

    Returns:
        One value per document, in corpus order (all 0 when no document has a positive score).
    """
    raw = np.array([max(float(scores.get(doc_id, 0.0)), 0.0) for doc_id in doc_ids], dtype=np.float64)
    top = float(raw.max()) if len(raw) else 0.0
    if top <= 0.0:
        return np.zeros(len(doc_ids))
    return np.log1p(raw) / math.log1p(top)


class CodeLexicalRetriever:
    """A base retriever's scores plus identifier matches on names and FQNs (see the module docstring).

    Args:
        name: The retriever's name in runs and reports.
        base: The retriever whose scores are the text part (e.g. BM25 with the code tokenizer).
        documents: The corpus, in corpus order.
        weights: The feature weights.
        depth: Hits read from the base per query.
        prior: One prior value per document in corpus order, or ``None`` (no prior).
    """

    def __init__(
        self,
        name: str,
        base: Retriever,
        documents: Sequence[Document],
        weights: FeatureWeights | None = None,
        depth: int = 100,
        prior: np.ndarray | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if prior is not None and len(prior) != len(documents):
            raise ValueError(f"prior has {len(prior)} values for {len(documents)} documents")
        self.name = name
        self.base = base
        self.weights = weights or FeatureWeights()
        self.depth = depth
        self.prior = prior
        self.doc_ids = [d.doc_id for d in documents]
        self._position = {doc_id: i for i, doc_id in enumerate(self.doc_ids)}
        self.names = NameIndex(documents)

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        """Top-``k`` hits per query, by the combined score (a query the base failed on keeps its error)."""
        return each_from_base(self.base, queries, k, self.depth, self._rank)

    def scores(self, query: str, base_hits: Sequence[Hit]) -> np.ndarray:
        """The combined score of every document (corpus order) for a query and the base's hits for it."""
        w = self.weights
        total = np.zeros(len(self.doc_ids))
        for doc_id, value in minmax_normalise(base_hits).items():
            total[self._position[doc_id]] += w.text * value
        for ident in query_identifiers(query):
            features = self.names.features(ident)
            total += w.exact * features["exact"] + w.suffix * features["suffix"]
            total += w.component * features["component"] + w.part * features["part"]
        if self.prior is not None and w.prior:
            total += w.prior * self.prior
        return total

    def _rank(self, query: str, hits: list[Hit], k: int) -> list[Hit]:
        total = self.scores(query, hits)
        base_rank = np.full(len(self.doc_ids), len(hits), dtype=np.int64)
        for rank, (doc_id, _) in enumerate(hits):
            base_rank[self._position[doc_id]] = rank
        candidates = np.flatnonzero((total > 0) | (base_rank < len(hits)))
        order = np.lexsort((candidates, base_rank[candidates], -total[candidates]))[:k]
        return [(self.doc_ids[p], float(total[p])) for p in candidates[order].tolist()]
