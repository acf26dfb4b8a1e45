"""What the failure-bucket rules weigh (:mod:`~retrieval_pipeline.core.evaluation.buckets`): a text's content
words and when two words match, the documents of a miss, their kin, and when a query is vague.

* **Content words** (:func:`content_words`): the project tokenizer's tokens
  (:func:`~retrieval_pipeline.core.retrieval.engines.tokenize.tokenize`: split on non-alphanumerics, so
  ``snake_case`` and dotted names fall apart, CamelCase parts plus the whole run, lowercased), minus
  :func:`stop_words` and tokens shorter than :data:`MIN_WORD_LENGTH` characters or made of digits only.
  :func:`stop_words` is scikit-learn's ``ENGLISH_STOP_WORDS`` when scikit-learn is importable (else the
  project tokenizer's small list), without :data:`KEPT_WORDS` (words it lists that name operations and
  things in API questions: ``get``, ``name``, ``move``, ``empty`` ...), plus :data:`FRAMING_WORDS`
  (how questions are phrased: ``use``, ``way``, ``want`` ...).
* **A word matches a text word** (:func:`words_match`) when they are equal without trailing digits
  (``sha`` and ``sha256``, ``copy`` and ``copy2``), or their common prefix is at least :data:`MIN_STEM`
  characters long and at most two characters shorter than the shorter word: ``copy`` matches
  ``copystat``; ``permission`` matches ``permissions``; ``modification`` matches ``modified``; ``file``
  does not match ``filter``. A crude stemmer, symmetric on purpose. A CamelCase name gives its parts and
  its whole (``LlmAgent``: ``llm``, ``agent``, ``llmagent``), so it counts up to three words on both sides.
* **Overlap** of a query with a document: the query's content words that match a word of its text.
* **Kin** of the gold (:func:`kinship`), first that holds: for API objects (dotted names, the doc id
  and its aliases) a ``parent`` (a name that is a dotted prefix of a gold's name: ``shutil`` for
  ``shutil.copy2``, ``collections.OrderedDict`` for its methods), a ``base class`` (a class whose short
  name the gold's text cites as ``[from X]``, the corpus's inherited-member marker), a ``sibling`` (a
  name with the same immediate parent, both modules or neither: ``shutil.copy`` for ``shutil.copy2``,
  but not the module ``google.adk.agents.llm_agent`` for the class ``google.adk.agents.BaseAgent``); for passages and chunks
  (``kind`` ``passage`` or ``chunk``), ``same page``: the same ``module`` (a chunk's document) or,
  without one, the same non-empty ``title``. A member of the gold (``BaseAgent.run`` for ``BaseAgent``)
  is not kin: it is more specific, not more generic.
* **Vague** (:func:`is_vague`) for a gold against a kin: the gold's name words (content words of the
  short names of its doc id and aliases; a passage's title) that are no name word of the kin are the words
  specific to the gold; the query is vague when none of its content words says one of them. Name words
  are the same when :func:`names_match` (equal roots, or at most their last two characters differ:
  ``agents`` is ``agent``, ``copy`` is ``copy2``, ``invocation`` is not ``invocationcontext``); a query
  word also says a name word of 4+ characters that starts it (``dictionaries`` says ``dict``).
  ``copy2`` is specific to ``shutil.copy2`` against ``shutil`` (so "copy a file" is not vague there), and
  nothing is against ``shutil.copy`` (any query is vague there: the names cannot tell them apart);
  against ``BaseAgent``, ``llm`` is specific to ``LlmAgent`` and ``agent`` is not; the class
  ``InvocationContext`` has ``invocationcontext`` against its module ``invocation_context``.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property

from retrieval_pipeline.core.retrieval.engines.tokenize import STOPWORDS as TOKENIZER_STOPWORDS
from retrieval_pipeline.core.retrieval.engines.tokenize import tokenize

#: Words of scikit-learn's list that are content words in API questions ("get the name", "move a file").
KEPT_WORDS: frozenset[str] = frozenset(
    {"back", "bottom", "call", "detail", "empty", "fill", "find", "first", "full", "get", "keep", "last", "move", "name", "next",
     "part", "put", "show", "system", "top"}
)  # fmt: skip
#: How questions are phrased, not what they ask about.
FRAMING_WORDS: frozenset[str] = frozenset({"does", "need", "use", "used", "uses", "using", "want", "way"})
#: Shorter tokens are not content words (``os``, ``io``, ``a1``).
MIN_WORD_LENGTH = 3
#: Shortest common prefix that lets two different words match.
MIN_STEM = 4
#: Corpus kinds that are prose, related by page; every other kind is an API object, related by dotted name.
PROSE_KINDS: frozenset[str] = frozenset({"passage", "chunk"})

_BASE_MARKER = re.compile(r"\[from ([A-Za-z_][\w.]*)\]")


@cache
def stop_words() -> frozenset[str]:
    """Dropped from queries and texts before words are compared.

    Built on first use: scikit-learn, whose list this is, takes about 2 s to import (scipy.stats with it), and
    every Dagster process imports this module when it loads the definitions.
    """
    try:  # a well-kept list (318 words); scikit-learn comes with sentence-transformers
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as base  # noqa: PLC0415
    except ImportError:  # pragma: no cover - exercised only where scikit-learn is absent
        base = TOKENIZER_STOPWORDS
    return (frozenset(base) - KEPT_WORDS) | FRAMING_WORDS | TOKENIZER_STOPWORDS


# --- words -------------------------------------------------------------------------------------


def content_words(text: str) -> tuple[str, ...]:
    """The distinct content words of ``text`` in order of first appearance (see the module docstring).

    Args:
        text: A query, a document text or a name.

    Returns:
        Lowercase words, no stop word, none shorter than :data:`MIN_WORD_LENGTH`, none all digits.
    """
    stop = stop_words()
    words = (t for t in tokenize(text) if len(t) >= MIN_WORD_LENGTH and not t.isdigit() and t not in stop)
    return tuple(dict.fromkeys(words))


def root(word: str) -> str:
    """The word without trailing digits (``sha256`` -> ``sha``, ``copy2`` -> ``copy``); an all-digit word stays whole."""
    return word.rstrip(string.digits) or word


def words_match(word: str, other: str) -> bool:
    """Whether two words match (module docstring): equal roots, or a long enough common prefix.

    Equal roots (:func:`root`: ``sha`` and ``sha256``), or a common prefix of at least :data:`MIN_STEM`
    characters and at most two characters shorter than the shorter word (``copy`` and ``copystat``).
    """
    if root(word) == root(other):
        return True
    common = len(os.path.commonprefix([word, other]))
    return common >= max(MIN_STEM, min(len(word), len(other)) - 2)


def names_match(word: str, other: str) -> bool:
    """Whether two name words are the same name: equal roots, or they differ only in their last two characters at most.

    Stricter than :func:`words_match`: ``agent`` is ``agents`` and ``copy`` is ``copy2``, but
    ``invocation`` is not ``invocationcontext`` nor ``copy`` ``copystat``.
    """
    if root(word) == root(other):
        return True
    common = len(os.path.commonprefix([word, other]))
    return common >= max(MIN_STEM, max(len(word), len(other)) - 2)


@dataclass(frozen=True)
class Vocabulary:
    """The content words of one text, indexed by their first :data:`MIN_STEM` characters for fast matching."""

    words: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Vocabulary:
        """The vocabulary of ``text``."""
        return cls(frozenset(content_words(text)))

    @cached_property
    def _roots(self) -> frozenset[str]:
        return frozenset(map(root, self.words))

    @cached_property
    def _by_stem(self) -> dict[str, set[str]]:
        index: dict[str, set[str]] = {}
        for word in self.words:
            if len(word) >= MIN_STEM:
                index.setdefault(word[:MIN_STEM], set()).add(word)
        return index

    def matches(self, word: str) -> bool:
        """Whether ``word`` matches any word of the text (:func:`words_match`).

        Same result as trying every word; only words with the same root, or the same first
        :data:`MIN_STEM` characters, can match, so only those are tried.
        """
        if word in self.words or root(word) in self._roots:
            return True
        return len(word) >= MIN_STEM and any(words_match(word, w) for w in self._by_stem.get(word[:MIN_STEM], ()))


def overlap(query_words: Sequence[str], vocabulary: Vocabulary) -> tuple[str, ...]:
    """The query words that match a word of the text, in query order."""
    return tuple(w for w in query_words if vocabulary.matches(w))


# --- documents and kinship --------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    """One document as the rules see it.

    Attributes:
        doc_id: The corpus id (a dotted API name, or a passage/chunk id).
        text: The text its overlap is measured on.
        title: The short name (API objects) or page title (passages); may be empty.
        kind: Corpus kind: ``passage``/``chunk`` are prose, anything else an API object.
        module: A chunk's document, an API object's module; ``None`` when unknown.
        aliases: Other dotted names of the same API object.
    """

    doc_id: str
    text: str = ""
    title: str = ""
    kind: str = "function"
    module: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def is_prose(self) -> bool:
        """Passages and chunks are related by page, not by name."""
        return self.kind in PROSE_KINDS

    @property
    def names(self) -> tuple[str, ...]:
        """The doc id and its aliases."""
        return (self.doc_id, *self.aliases)

    @property
    def page(self) -> str | None:
        """The page a passage or chunk belongs to: its module (a chunk's document), else its title; ``None`` if neither."""
        return self.module or self.title or None

    @cached_property
    def vocabulary(self) -> Vocabulary:
        """The content words of the text."""
        return Vocabulary.of(self.text)

    @cached_property
    def name_words(self) -> frozenset[str]:
        """Content words of the short names (API objects) or of the title (passages)."""
        sources = [self.title] if self.is_prose else [name.rsplit(".", 1)[-1] for name in self.names]
        return frozenset(w for source in sources for w in content_words(source))

    @cached_property
    def bases(self) -> frozenset[str]:
        """Short names of the classes its text cites as ``[from X]`` (members inherited from X)."""
        return frozenset(m.rsplit(".", 1)[-1] for m in _BASE_MARKER.findall(self.text))


def _parent_name(name: str) -> str | None:
    return name.rsplit(".", 1)[0] if "." in name else None


def _is_parent(doc: Doc, gold: Doc) -> bool:
    return any(g.startswith(d + ".") for d in doc.names for g in gold.names)


def _is_base_class(doc: Doc, gold: Doc) -> bool:
    return doc.kind == "class" and doc.doc_id.rsplit(".", 1)[-1] in gold.bases


def _is_sibling(doc: Doc, gold: Doc) -> bool:
    parents = {_parent_name(g) for g in gold.names} - {None}
    same_level = (doc.kind == "module") == (gold.kind == "module")  # a module is no sibling of a class beside it
    return same_level and any(_parent_name(d) in parents for d in doc.names)


def _same_page(doc: Doc, gold: Doc) -> bool:
    return gold.page is not None and doc.page == gold.page


#: Kinship rules in order: (label, applies to prose?, predicate(doc, gold)).
KINSHIPS: tuple[tuple[str, bool, Callable[[Doc, Doc], bool]], ...] = (
    ("parent", False, _is_parent),
    ("base class", False, _is_base_class),
    ("sibling", False, _is_sibling),
    ("same page", True, _same_page),
)


def kinship(doc: Doc, gold: Doc) -> str | None:
    """How ``doc`` is a more generic relative of ``gold``: ``parent``, ``base class``, ``sibling``, ``same page`` or ``None``.

    API rules apply when both are API objects, the page rule when both are prose (module docstring).
    """
    if doc.doc_id == gold.doc_id or doc.is_prose != gold.is_prose:
        return None
    return next((label for label, prose, rule in KINSHIPS if prose == gold.is_prose and rule(doc, gold)), None)


def _names_any(word: str, words: Iterable[str]) -> bool:
    return any(names_match(word, w) for w in words)


def specific_words(gold: Doc, other: Doc) -> frozenset[str]:
    """The gold's name words that are no name word of ``other`` (:func:`names_match`): what a query says to ask for the gold itself."""
    return frozenset(w for w in gold.name_words if not _names_any(w, other.name_words))


def names_in_query(name_word: str, query_word: str) -> bool:
    """Whether a query word says a name word: the same name (:func:`names_match`) or the name word starts it (``dict``, ``dictionaries``)."""
    return names_match(name_word, query_word) or (len(name_word) >= MIN_STEM and query_word.startswith(name_word))


def is_vague(query_words: Iterable[str], gold: Doc, other: Doc) -> bool:
    """Whether the query names nothing specific to ``gold`` as against ``other``: no query word says a :func:`specific_words` word."""
    said = tuple(query_words)
    return not any(names_in_query(w, q) for w in specific_words(gold, other) for q in said)
