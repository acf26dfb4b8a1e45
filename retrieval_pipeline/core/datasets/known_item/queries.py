"""Known-item queries drawn from the installed-packages corpus, and the nested subsets the scale benchmark uses.

**Known-item queries.** A document whose docstring's first sentence has at least ``min_words`` words and
is the first sentence of no other document is eligible (the docstring is read back from the document's
text, see :func:`docstring_of`); ``n_queries`` of them are drawn with a seeded
generator. The query is that sentence, the gold is that document, and the gold's indexed text has the
sentence removed (every occurrence, whatever the line wrapping): left in, the query would be a verbatim
substring of its own gold and every lexical retriever would find it trivially; removed, the retriever
has to recognise the object from the rest of its text (name, signature, the remaining docstring). A
sentence shared by two documents would have two golds, so it is skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets.known_item.corpus import InstalledCorpus
from retrieval_pipeline.core.datasets.sentences import collapse, first_sentence, remove_sentence


@dataclass(frozen=True)
class KnownItemSettings:
    """How known-item queries are drawn: ``n_queries`` sentences of at least ``min_words`` words, seeded."""

    n_queries: int = 2000
    min_words: int = 6
    seed: int = 13


@dataclass(frozen=True)
class KnownItemQuery:
    """One known-item query: the gold's first docstring sentence (whitespace collapsed) and the gold's id."""

    query_id: str
    query: str
    gold_doc_id: str
    removed: int  # occurrences of the sentence removed from the gold's text


@dataclass
class KnownItemSet:
    """Queries, and the corpus with each gold's sentence removed; ``counts`` says how the sample was drawn.

    ``counts``: ``candidates`` (documents with a docstring) ``== skipped_too_short + skipped_cut +
    skipped_duplicate + eligible``; ``skipped_in_neighbour + sampled <= eligible``.
    """

    queries: list[KnownItemQuery]
    documents: list[Document]
    counts: dict[str, int]


def docstring_of(doc: Document) -> str:
    """The docstring part of an introspected document's text, read back from the text itself.

    :func:`~retrieval_pipeline.core.datasets.api_index.introspect_modules` writes ``name (kind)``, the FQN, the
    signature when Python knows it, then the (capped) docstring. Leading lines that start with ``name(`` are
    dropped with the blank lines around them: the signature line, and the signature that C functions put
    at the top of their docstring (``encode_basestring(string) -> string``), which is not a sentence.
    """
    lines = doc.text.split("\n")[2:]
    while lines and (not lines[0].strip() or lines[0].startswith(f"{doc.title}(")):
        lines.pop(0)
    return "\n".join(lines).strip()


# -- subsets: the same documents and queries at every size --------------------------------------


@dataclass(frozen=True)
class Subset:
    """One size's documents (positions in the corpus, ascending) and the queries whose gold it holds."""

    size: int
    positions: list[int]
    query_ids: list[str]


def nested_subsets(
    doc_ids: Sequence[str], golds: Sequence[tuple[str, str]], sizes: Sequence[int], *, seed: int, gold_share: float
) -> tuple[dict[int, Subset], list[str]]:
    """Nested, seeded subsets that hold the gold of every query kept at their size.

    Queries are shuffled first (seeded); the subset of ``n`` documents keeps the first
    ``min(len(golds), round(n x gold_share))`` of them and holds their golds, and is filled with other
    documents in a seeded order (golds of queries never kept come last, as plain documents). Since both
    prefixes only grow with ``n``, a smaller subset is contained in every larger one.

    Args:
        doc_ids: The corpus's document ids, in corpus order.
        golds: ``(query_id, gold_doc_id)`` of every query.
        sizes: Subset sizes (each at most ``len(doc_ids)``).
        seed: Seed of both shuffles.
        gold_share: Kept queries per document (0 < share <= 1).

    Returns:
        ``({size: Subset}, query ids in the shuffled order)``.

    Raises:
        ValueError: A size outside ``1..len(doc_ids)``, a share outside ``(0, 1]``, or a gold not in the corpus.
    """
    if not 0 < gold_share <= 1:
        raise ValueError(f"gold_share must be in (0, 1], got {gold_share}")
    bad = [s for s in sizes if not 1 <= s <= len(doc_ids)]
    if bad:
        raise ValueError(f"subset sizes {bad} are outside 1..{len(doc_ids):,} (the corpus size)")
    position = {d: i for i, d in enumerate(doc_ids)}
    missing = [q for q, g in golds if g not in position]
    if missing:
        raise ValueError(f"{len(missing)} queries have a gold that is not in the corpus, e.g. {missing[:3]}")
    rng = np.random.default_rng(seed)
    order = [golds[i] for i in rng.permutation(len(golds))]
    gold_positions = {position[g] for _, g in golds}
    fillers = [int(i) for i in rng.permutation(len(doc_ids)) if int(i) not in gold_positions]
    fillers += [position[g] for _, g in order]  # used only when the plain documents run out
    subsets: dict[int, Subset] = {}
    for size in sorted(set(sizes)):
        kept = order[: min(len(order), max(1, round(size * gold_share)), size)]
        chosen = {position[g] for _, g in kept}
        for i in fillers:
            if len(chosen) == size:
                break
            chosen.add(i)
        subsets[size] = Subset(size, sorted(chosen), [q for q, _ in kept])
    return subsets, [q for q, _ in order]


def known_items(corpus: InstalledCorpus, settings: KnownItemSettings, *, label: str = "installed corpus") -> KnownItemSet:
    """Draw the known-item queries and remove each one's sentence from its gold's text.

    Candidates are documents with a docstring (:func:`docstring_of`); a candidate is skipped when its first
    sentence has fewer than ``min_words`` words, when it runs into the docstring cap (``…``: not a whole
    sentence), or when another document has the same first sentence (case and whitespace ignored).
    The rest (sorted by id) are shuffled with ``numpy.random.default_rng(seed).permutation`` and taken in
    that order, passing over one whose sentence appears in the text of a *neighbour* (a document of the same
    module, or of the same name elsewhere: a copied docstring, an alias, a longer sibling), until
    ``n_queries`` are taken. Neighbours only: searching all 500,000 texts per query would take minutes,
    and the neighbours are where such copies are (a full search found 30 of 2,000 queries elsewhere, all
    in a neighbour).

    Raises:
        InputError: Fewer eligible documents than ``n_queries``, or too many passed over.
    """
    sentences = {d.doc_id: first_sentence(docstring_of(d)) for d in corpus.documents}
    sentences = {k: v for k, v in sentences.items() if v}
    shared = Counter(collapse(s).casefold() for s in sentences.values())
    counts = Counter(candidates=len(sentences))
    eligible: list[str] = []
    for doc_id in sorted(sentences):
        reason = _skip_reason(sentences[doc_id], shared, settings.min_words)
        counts[reason or "eligible"] += 1
        if reason is None:
            eligible.append(doc_id)
    order = [eligible[i] for i in np.random.default_rng(settings.seed).permutation(len(eligible))]
    chosen, passed = _take(order, sentences, corpus.documents, settings.n_queries)
    counts["skipped_in_neighbour"] = passed
    if len(chosen) < settings.n_queries:
        raise InputError(
            f"{label}: only {len(chosen):,} documents are usable known items, n_queries={settings.n_queries:,}; {dict(counts)}"
        )
    queries, documents = _apply(sorted(chosen), sentences, corpus.documents)
    counts["sampled"] = len(queries)
    keys = ("candidates", "skipped_too_short", "skipped_cut", "skipped_duplicate", "eligible", "skipped_in_neighbour", "sampled")
    return KnownItemSet(queries, documents, {k: counts[k] for k in keys})


def _skip_reason(sentence: str, shared: Counter[str], min_words: int) -> str | None:
    """Why a candidate is not eligible (a ``counts`` key), or ``None`` when it is."""
    if len(sentence.split()) < min_words:
        return "skipped_too_short"
    if sentence.endswith("…"):
        return "skipped_cut"
    if shared[collapse(sentence).casefold()] > 1:
        return "skipped_duplicate"
    return None


def _take(order: Sequence[str], sentences: dict[str, str], documents: Sequence[Document], n: int) -> tuple[list[str], int]:
    """The first ``n`` ids of ``order`` whose sentence no neighbour's text holds, and how many were passed over."""
    neighbours: dict[str, list[int]] = {}
    for i, doc in enumerate(documents):
        neighbours.setdefault(f"module:{doc.module}", []).append(i)
        neighbours.setdefault(f"name:{doc.title}", []).append(i)
    index = {doc.doc_id: i for i, doc in enumerate(documents)}
    folded: dict[int, str] = {}
    chosen: list[str] = []
    passed = 0
    for doc_id in order:
        if len(chosen) == n:
            break
        gold = documents[index[doc_id]]
        query = collapse(sentences[doc_id]).casefold()
        near = set(neighbours[f"module:{gold.module}"]) | set(neighbours[f"name:{gold.title}"])
        if any(i != index[doc_id] and query in folded.setdefault(i, collapse(documents[i].text).casefold()) for i in near):
            passed += 1
        else:
            chosen.append(doc_id)
    return chosen, passed


def _apply(chosen: Iterable[str], sentences: dict[str, str], documents: Sequence[Document]) -> tuple[list[KnownItemQuery], list[Document]]:
    """The queries, and the documents with each chosen gold's sentence removed (the others unchanged)."""
    edited: dict[str, tuple[str, int]] = {doc_id: ("", 0) for doc_id in chosen}
    out: list[Document] = []
    for doc in documents:
        if doc.doc_id in edited:
            text, count = remove_sentence(doc.text, sentences[doc.doc_id])
            edited[doc.doc_id] = (text, count)
            doc = replace(doc, text=text)
        out.append(doc)
    queries = [KnownItemQuery(f"ki:{d}", collapse(sentences[d]), d, edited[d][1]) for d in sorted(edited)]
    return queries, out
