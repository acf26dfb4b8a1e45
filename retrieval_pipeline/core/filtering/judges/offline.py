"""The deterministic offline forward-RAG judge (``offline_lexical``).

Forward-RAG filtering keeps a (query, gold) pair only when the gold context is **sufficient** (the
question can be answered from it alone) and **necessary** (random contexts do not answer it). An LLM
makes that call when one is configured. Offline, no model understands the question, so this judge is
deliberately conservative: it drops a pair only on evidence a lexical rule can see.

* **sufficiency**: the gold context must carry an answer at all: at least ``min_description_tokens``
  distinct tokens beyond those of its own id (``cached_property(func)`` with no docstring tells a
  reader nothing the name does not; ``uuid4()`` "Generate a random UUID." is enough);
* **necessity**: the question must be specific: it is dropped when one of ``random_contexts`` seeded
  random non-gold documents covers it at least as well as the gold does *and* covers at least
  ``max_random_coverage`` of it, with

    coverage(q, c) = Σ_{t ∈ T(q) ∩ T(c)} idf(t) / Σ_{t ∈ T(q)} idf(t)

  where ``T(x)`` is the token set of ``x`` and ``idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))``.

Requiring lexical overlap between question and gold would keep only questions that repeat the
documentation's words, tilting the dataset towards BM25; this judge does not. Every decision records
the judge's name and the numbers behind it.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval_pipeline.core.retrieval.engines.tokenize import tokenize

JUDGE_NAME = "offline_lexical"


@dataclass
class FilterDecision:
    """One keep/drop decision with the numbers behind it."""

    query_id: str
    keep: bool
    judge: str
    reason: str
    sufficiency: float | None = None
    best_random: float | None = None
    random_doc_ids: list[str] = field(default_factory=list)
    undecided: bool = False  # the judge could not decide (e.g. every LLM call failed); never kept
    details: dict[str, Any] = field(default_factory=dict)  # the judge's answers and rationales


class OfflineLexicalJudge:
    """Sufficiency and necessity by idf-weighted token coverage (see module docstring)."""

    name = JUDGE_NAME

    def __init__(
        self,
        corpus: Mapping[str, str],
        *,
        random_contexts: int = 3,
        min_description_tokens: int = 2,
        max_random_coverage: float = 0.5,
        seed: int = 13,
    ) -> None:
        if not corpus:
            raise ValueError("the offline judge needs a non-empty corpus")
        self._doc_ids = list(corpus)
        self._tokens = {doc_id: frozenset(tokenize(text)) for doc_id, text in corpus.items()}
        self._described = {doc_id: len(toks - set(tokenize(doc_id))) for doc_id, toks in self._tokens.items()}
        df = Counter(t for toks in self._tokens.values() for t in toks)
        n = len(self._doc_ids)
        self._idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self._default_idf = math.log(1.0 + (n + 0.5) / 0.5)  # a term no document has
        self.random_contexts = random_contexts
        self.min_description_tokens = min_description_tokens
        self.max_random_coverage = max_random_coverage
        self.seed = seed

    def coverage(self, query: str, doc_id: str) -> float:
        """Share of the query's idf mass found in the document (0 for a query with no tokens)."""
        q = set(tokenize(query))
        total = sum(self._idf.get(t, self._default_idf) for t in q)
        if total == 0:
            return 0.0
        doc = self._tokens[doc_id]
        return sum(self._idf.get(t, self._default_idf) for t in q if t in doc) / total

    def _random_docs(self, query_id: str, exclude: set[str]) -> list[str]:
        return random_documents(self._doc_ids, query_id, exclude, self.random_contexts, self.seed)

    def decide(self, query_id: str, query: str, gold_doc_ids: Sequence[str]) -> FilterDecision:
        """Keep or drop one pair; the reason carries the measured coverages."""
        golds = [g for g in gold_doc_ids if g in self._tokens]
        if not golds:
            return FilterDecision(query_id, False, self.name, "dropped: no gold document in the corpus")
        described = max(self._described[g] for g in golds)
        suff = max(self.coverage(query, g) for g in golds)
        randoms = self._random_docs(query_id, set(golds))
        best_random = max((self.coverage(query, d) for d in randoms), default=0.0)
        if described < self.min_description_tokens:
            keep = False
            reason = (
                f"dropped (insufficient): the gold context has {described} distinct tokens beyond its name "
                f"(< {self.min_description_tokens}): nothing to answer from"
            )
        elif best_random >= self.max_random_coverage and best_random >= suff:
            keep = False
            reason = (
                f"dropped (not necessary): a random context covers {best_random:.2f} of the query "
                f"(>= {self.max_random_coverage:.2f}), as much as the gold ({suff:.2f})"
            )
        else:
            keep = True
            reason = (
                f"kept: gold context has {described} distinct tokens beyond its name; gold covers {suff:.2f} of the query, "
                f"best of {len(randoms)} random contexts {best_random:.2f}"
            )
        return FilterDecision(query_id, keep, self.name, reason, suff, best_random, randoms)


def random_documents(doc_ids: Sequence[str], query_id: str, exclude: set[str], n: int, seed: int) -> list[str]:
    """``n`` documents drawn at random, seeded by (seed, query id): the same draw on every run and by every judge."""
    digest = hashlib.sha256(f"{seed}:{query_id}".encode()).hexdigest()
    rng = random.Random(int(digest[:16], 16))
    pool = [d for d in doc_ids if d not in exclude]
    return rng.sample(pool, min(n, len(pool)))


def passthrough_decision(query_id: str) -> FilterDecision:
    """The decision recorded when filtering is switched off (``judge: none``)."""
    return FilterDecision(query_id, True, "none", "kept: filter disabled in the dataset config")
