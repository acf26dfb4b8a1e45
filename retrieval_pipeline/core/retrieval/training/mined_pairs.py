"""Training pairs mined from a dataset's corpus alone (never from its queries), for domain adaptation.

A pair is ``(anchor, doc_id)``: a short text that the corpus itself says is about one of its documents.
The rules (:class:`MiningSettings.rules`):

* ``docstring``: the first sentence of an API object's docstring (read back from the document's text:
  ``name (kind)``, the FQN, the signature, then the docstring; see
  :mod:`~retrieval_pipeline.core.datasets.api_index`) -> that object's document.
* ``member``: a method's or property's first docstring sentence -> the document of its class (the FQN
  minus its last part, when the corpus holds it).
* ``heading``: a chunk's heading (a Markdown ``#`` line at its start, else its ``title`` when that is
  prose, not an id) -> the chunk; passages only.
* ``lead``: a passage's first sentence -> the passage; passages only (NQ-style paragraphs have no heading).

An anchor shorter than ``min_words`` words is dropped, and so is an anchor (lower-cased, whitespace
collapsed) read from two different documents (the same sentence on two objects): a known item has one
answer. A member's sentence is kept twice, for the method and for its class. Nothing here
reads a query, a qrel or a case: the functions take documents only, which is what keeps evaluation
questions out of training (``retrieval_pipeline_tests/core/retrieval/training/test_finetune_leakage.py`` checks the real ADK
questions against the mined pairs).

:func:`split_pairs` holds back a seeded share of the *documents* (all their pairs with them) for choosing
settings: a known-item split of the mined pairs, so that no held-out anchor or positive is trained on.
:func:`held_out_corpus` removes every held-out anchor from its gold's text, as the ``known_item`` datasets
do, so that a held-out query is never a verbatim substring of its answer. :func:`bm25_negatives` adds one
hard negative per pair: the best BM25 hit for the anchor that is not its positive;
:func:`anchor_negatives` several, none of them a positive of the same anchor (for a cross-encoder).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets.sentences import collapse, first_sentence, remove_sentence
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever

Rule = Literal["docstring", "member", "heading", "lead"]
#: Document kinds that are API objects (their text is ``name (kind)``, the FQN, a signature, the docstring).
API_KINDS = frozenset({"module", "class", "function", "method", "property"})
#: Kinds whose docstring sentence also describes the enclosing class (rule ``member``).
MEMBER_KINDS = frozenset({"method", "property"})
#: A signature line at the top of an API document's docstring part: ``name(...)`` or ``__init__(...)``.
_SIGNATURE = re.compile(r"^[A-Za-z_][\w.]*\s*\(")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_WORD = re.compile(r"\w+")


class MiningSettings(BaseModel):
    """How pairs are mined from a corpus (part of a fine-tuned model's cache key).

    Attributes:
        rules: Which rules run (see the module docstring).
        min_words: The fewest words an anchor may have.
        max_anchor_chars: Anchors are cut to this many characters (a run-on first "sentence").
        hard_negatives: Add the best non-positive BM25 hit of each anchor as its hard negative.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[Rule, ...] = ("docstring", "member", "heading", "lead")
    min_words: int = Field(4, ge=1)
    max_anchor_chars: int = Field(300, ge=20)
    hard_negatives: bool = False


@dataclass(frozen=True)
class MinedPair:
    """One training pair: ``anchor`` is about document ``doc_id``; ``rule`` says how it was found.

    ``negative`` is a hard negative's doc id (:func:`bm25_negatives`), or ``None``.
    """

    anchor: str
    doc_id: str
    rule: str
    negative: str | None = None


def docstring_text(doc: Document) -> str:
    """The docstring part of an API document's text: after the header and FQN lines and a signature line,
    up to the ``Members:`` list; ``""`` for a passage or an object without a docstring."""
    if doc.kind not in API_KINDS:
        return ""
    lines = doc.text.split("\n")[2:]
    while lines and (not lines[0].strip() or _SIGNATURE.match(lines[0])):
        lines.pop(0)
    if "Members:" in lines:
        lines = lines[: lines.index("Members:")]
    return "\n".join(lines).strip()


def _heading(doc: Document) -> str:
    first = doc.text.lstrip().split("\n", 1)[0]
    match = _HEADING.match(first)
    if match:
        return match.group(1)
    title = doc.title.strip()
    # an id-like title (no space, or the doc id itself) says nothing a user would ask
    return title if " " in title and title != doc.doc_id else ""


def _anchor(text: str, settings: MiningSettings) -> str:
    anchor = collapse(text)[: settings.max_anchor_chars].strip()
    return anchor if len(_WORD.findall(anchor)) >= settings.min_words else ""


def _candidates(documents: Sequence[Document], settings: MiningSettings) -> Iterable[tuple[MinedPair, str]]:
    """Every candidate pair with the document its anchor was read from (a member's anchor: the method)."""
    ids = {d.doc_id for d in documents}
    rules = set(settings.rules)
    for doc in documents:
        if doc.kind in API_KINDS:
            sentence = _anchor(first_sentence(docstring_text(doc)), settings)
            if not sentence:
                continue
            if "docstring" in rules:
                yield MinedPair(sentence, doc.doc_id, "docstring"), doc.doc_id
            parent = doc.doc_id.rsplit(".", 1)[0]
            if "member" in rules and doc.kind in MEMBER_KINDS and parent != doc.doc_id and parent in ids:
                yield MinedPair(sentence, parent, "member"), doc.doc_id
            continue
        heading = _anchor(_heading(doc), settings) if "heading" in rules else ""
        if heading:
            yield MinedPair(heading, doc.doc_id, "heading"), doc.doc_id
        if "lead" in rules:
            body = doc.text
            if heading:
                body = body.lstrip().split("\n", 1)[1] if "\n" in body.lstrip() else ""
            lead = _anchor(first_sentence(body), settings)
            if lead and lead != heading:
                yield MinedPair(lead, doc.doc_id, "lead"), doc.doc_id


def mine_pairs(documents: Sequence[Document], settings: MiningSettings | None = None, exclude: Sequence[str] = ()) -> list[MinedPair]:
    """The corpus's own training pairs, in corpus order (see the module docstring).

    Args:
        documents: The corpus, and nothing else (no queries).
        settings: The rules and bounds; default :class:`MiningSettings`.
        exclude: Texts no anchor may copy (decontamination): an anchor that is a :func:`near_copy` of one,
            or contains one of at least 4 words, is dropped. For a corpus that holds its own queries'
            text (one Natural Questions question is its passage's first sentence); empty by default.

    Returns:
        One pair per distinct (anchor, document); anchors tied to two documents are dropped, and so are
        duplicate (anchor, document) pairs found by two rules (the first rule wins).
    """
    settings = settings or MiningSettings()
    found = list(_candidates(documents, settings))
    sources: dict[str, set[str]] = {}  # anchor -> the documents it was read from
    for pair, source in found:
        sources.setdefault(_key(pair.anchor), set()).add(source)
    seen: set[tuple[str, str]] = set()
    pairs = []
    for pair, _ in found:
        key = (_key(pair.anchor), pair.doc_id)
        if len(sources[key[0]]) == 1 and key not in seen:
            seen.add(key)
            pairs.append(pair)
    if exclude:
        prepared = _prepared(exclude)
        pairs = [p for p in pairs if not _copies(p.anchor, prepared)]
    if settings.hard_negatives:
        pairs = bm25_negatives(pairs, documents)
    return pairs


def normalised(text: str) -> str:
    """Lower-cased words joined by one space (punctuation dropped)."""
    return " ".join(_WORD.findall(text.lower()))


def copies_any(anchor: str, texts: Sequence[str]) -> bool:
    """Whether ``anchor`` is a near copy of one of ``texts`` (:func:`near_copy`) or contains one of >= 4 words."""
    return _copies(anchor, _prepared(texts))


#: The Jaccard overlap of word sets from which two texts are near copies (:func:`near_copy`).
NEAR_COPY = 0.8
#: A text of ``exclude`` as :func:`_copies` compares it: normalised, its words, and how many words the normalised text has.
_Prepared = tuple[str, frozenset[str], int]


def _prepared(texts: Sequence[str]) -> list[_Prepared]:
    return [(plain, frozenset(tokens(t)), len(plain.split())) for t in texts for plain in [normalised(t)]]


def _copies(anchor: str, prepared: Sequence[_Prepared]) -> bool:
    """:func:`copies_any` against texts normalised once.

    Word sets whose sizes differ by more than the near-copy share cannot reach it (the overlap is at most
    the smaller over the larger), so they are not intersected: NQ's 1,596 anchors against its 1,656
    questions took 9.5 s, nearly all of it in sets that could not match.
    """
    plain, words = normalised(anchor), tokens(anchor)
    size = len(words)
    for text, text_words, length in prepared:
        if text == plain or (length >= 4 and text in plain):
            return True
        smaller, larger = sorted((size, len(text_words)))
        # J <= smaller/larger, and division rounds monotonically: no pair that passes is skipped
        if smaller and smaller / larger >= NEAR_COPY and len(words & text_words) / len(words | text_words) >= NEAR_COPY:
            return True
    return False


def _key(text: str) -> str:
    return collapse(text).lower()


def held_out_document(doc_id: str, held_out_share: float, seed: int) -> bool:
    """Whether a document is held out: a seeded hash of its id below ``held_out_share``.

    The choice depends on the id alone, not on which pairs were mined, so every mining variant of one
    corpus holds out the same documents and their scores can be compared.
    """
    digest = hashlib.sha256(f"{seed}\0{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < held_out_share


def split_pairs(pairs: Sequence[MinedPair], held_out_share: float, seed: int) -> tuple[list[MinedPair], list[MinedPair]]:
    """``(train, held_out)``: the pairs of a seeded ``held_out_share`` of the positive documents are held out
    (:func:`held_out_document`).

    Pairs whose anchor (normalised) also occurs in the held-out part go to the held-out part only, so no
    held-out anchor is ever trained on; a training pair whose hard negative is a held-out document loses it.
    """
    if not 0.0 < held_out_share < 1.0:
        raise ValueError(f"held_out_share must be in (0, 1), got {held_out_share}")
    held_docs = {p.doc_id for p in pairs if held_out_document(p.doc_id, held_out_share, seed)}
    held = [p for p in pairs if p.doc_id in held_docs]
    held_anchors = {_key(p.anchor) for p in held}
    train = [
        p if p.negative not in held_docs else replace(p, negative=None)
        for p in pairs
        if p.doc_id not in held_docs and _key(p.anchor) not in held_anchors
    ]
    return train, held


def held_out_corpus(documents: Sequence[Document], held_out: Sequence[MinedPair]) -> list[Document]:
    """The corpus with every held-out anchor removed from its gold's text (a known-item evaluation)."""
    anchors: dict[str, list[str]] = {}
    for pair in held_out:
        anchors.setdefault(pair.doc_id, []).append(pair.anchor)
    out = []
    for doc in documents:
        text = doc.text
        for anchor in anchors.get(doc.doc_id, []):
            text, _ = remove_sentence(text, anchor)
        out.append(doc if text == doc.text else replace(doc, text=text))
    return out


def bm25_negatives(pairs: Sequence[MinedPair], documents: Sequence[Document], depth: int = 5) -> list[MinedPair]:
    """Each pair with ``negative``: the best BM25 hit of its anchor that is not its positive (or ``None``)."""
    out = []
    for pair, ranked in zip(pairs, _bm25_ranks(pairs, documents, depth)):
        negative = next((doc_id for doc_id in ranked if doc_id != pair.doc_id), None)
        out.append(replace(pair, negative=negative))
    return out


def anchor_negatives(pairs: Sequence[MinedPair], documents: Sequence[Document], count: int) -> list[list[str]]:
    """Per pair, the best ``count`` BM25 hits of its anchor that are a positive of no pair with that anchor.

    A member's sentence is mined for the method and for its class (two pairs, one anchor): neither is
    ever the other's negative. Fewer than ``count`` when the top ``count + 5`` hits hold fewer.
    """
    positives: dict[str, set[str]] = {}
    for pair in pairs:
        positives.setdefault(_key(pair.anchor), set()).add(pair.doc_id)
    ranks = _bm25_ranks(pairs, documents, count + 5)
    return [[d for d in ranked if d not in positives[_key(p.anchor)]][:count] for p, ranked in zip(pairs, ranks)]


def _bm25_ranks(pairs: Sequence[MinedPair], documents: Sequence[Document], depth: int) -> list[list[str]]:
    """The top ``depth`` BM25 documents of every pair's anchor over ``documents``."""
    if not pairs:
        return []
    index = BM25Retriever.build([d.doc_id for d in documents], [d.text for d in documents])
    return [[doc_id for doc_id, _ in ranked] for ranked in index.search([p.anchor for p in pairs], depth)]


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """SHA-256 of the corpus as the miner and the trainer see it: every document's id, kind, title and text."""
    digest = hashlib.sha256()
    for doc in documents:
        for part in (doc.doc_id, doc.kind, doc.title, doc.text):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
        digest.update(b"\n")
    return digest.hexdigest()


def tokens(text: str) -> set[str]:
    """Lower-cased word tokens (for near-copy checks)."""
    return {t.lower() for t in _WORD.findall(text)}


def near_copy(a: str, b: str, threshold: float = NEAR_COPY) -> bool:
    """Whether two texts are the same after :func:`normalised`, or their word sets' Jaccard overlap is at
    least ``threshold``."""
    if normalised(a) == normalised(b):
        return True
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return False
    return len(ta & tb) / len(ta | tb) >= threshold
