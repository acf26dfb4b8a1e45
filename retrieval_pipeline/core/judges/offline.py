"""The deterministic offline forward-RAG judge (``offline_lexical``).

Forward-RAG filtering keeps a (query, gold) pair only when the gold context is **sufficient** (the
question can be answered from it alone) and **necessary** (random contexts do not answer it). An LLM
makes that call when one is configured; offline, this judge stands in with a lexical proxy:

    coverage(q, c) = Σ_{t ∈ T(q) ∩ T(c)} idf(t) / Σ_{t ∈ T(q)} idf(t)

where ``T(x)`` is the set of tokens of ``x`` and ``idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))``
over the corpus. A pair is kept when ``max_gold coverage >= min_sufficiency`` and the gold covers
strictly more than every one of ``random_contexts`` seeded random non-gold documents.

It is a stand-in, and says so: a lexical judge favours pairs whose gold shares words with the question,
so a dataset filtered by it leans towards lexical retrievers. Every decision records the judge's name.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from retrieval_pipeline.core.retrieval.tokenize import tokenize

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


class OfflineLexicalJudge:
    """Sufficiency and necessity by idf-weighted token coverage (see module docstring)."""

    name = JUDGE_NAME

    def __init__(
        self,
        corpus: Mapping[str, str],
        *,
        random_contexts: int = 3,
        min_sufficiency: float = 0.2,
        seed: int = 13,
    ) -> None:
        if not corpus:
            raise ValueError("the offline judge needs a non-empty corpus")
        self._doc_ids = list(corpus)
        self._tokens = {doc_id: frozenset(tokenize(text)) for doc_id, text in corpus.items()}
        df = Counter(t for toks in self._tokens.values() for t in toks)
        n = len(self._doc_ids)
        self._idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self._default_idf = math.log(1.0 + (n + 0.5) / 0.5)  # a term no document has
        self.random_contexts = random_contexts
        self.min_sufficiency = min_sufficiency
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
        digest = hashlib.sha256(f"{self.seed}:{query_id}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        pool = [d for d in self._doc_ids if d not in exclude]
        return rng.sample(pool, min(self.random_contexts, len(pool)))

    def decide(self, query_id: str, query: str, gold_doc_ids: Sequence[str]) -> FilterDecision:
        """Keep or drop one pair; the reason carries the measured coverages."""
        golds = [g for g in gold_doc_ids if g in self._tokens]
        if not golds:
            return FilterDecision(query_id, False, self.name, "dropped: no gold document in the corpus")
        suff = max(self.coverage(query, g) for g in golds)
        randoms = self._random_docs(query_id, set(golds))
        best_random = max((self.coverage(query, d) for d in randoms), default=0.0)
        if suff < self.min_sufficiency:
            reason = f"dropped (insufficient): gold covers {suff:.2f} of the query's idf mass < {self.min_sufficiency:.2f}"
            keep = False
        elif best_random >= suff:
            reason = f"dropped (not necessary): a random context covers {best_random:.2f} >= gold {suff:.2f}"
            keep = False
        else:
            reason = f"kept: gold covers {suff:.2f} >= {self.min_sufficiency:.2f}; best of {len(randoms)} random contexts {best_random:.2f}"
            keep = True
        return FilterDecision(query_id, keep, self.name, reason, suff, best_random, randoms)


def passthrough_decision(query_id: str) -> FilterDecision:
    """The decision recorded when filtering is switched off (``judge: none``)."""
    return FilterDecision(query_id, True, "none", "kept: filter disabled in the dataset config")
