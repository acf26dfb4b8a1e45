"""The default tokenizer, shared by BM25 and the offline judge.

Rules:

1. **Split on non-alphanumerics**, the underscore and the dot included, so snake_case and dotted
   names fall apart on their own: ``os.path.join`` -> ``os``, ``path``, ``join``;
   ``max_length`` -> ``max``, ``length``. Digits are kept (``3.14`` -> ``3``, ``14``).
2. **Split identifiers.** A run with a CamelCase boundary (lower or digit then upper, ``aB`` /
   ``4B``; or an acronym's last capital starting a word of 2+ lowercase letters, ``HTTPServer``)
   yields its parts followed by the whole run: ``OrderedDict`` -> ``ordered``, ``dict``,
   ``ordereddict``; ``XMLHttpRequest`` -> ``xml``, ``http``, ``request``, ``xmlhttprequest``.
   Digits stay with the part before them (``Float64Array`` -> ``float64``, ``array``,
   ``float64array``); plural acronyms stay whole (``URLs`` -> ``urls``). Boundaries are ASCII.
3. **Lowercase** (``str.lower``) every token.
4. **Drop stopwords**: the small fixed list :data:`STOPWORDS` (a whole identifier is kept even when
   a part is dropped: ``isEmpty`` -> ``empty``, ``isempty``).

Tokens come out in text order; the output is a deterministic function of the text. Texts with no
CamelCase boundary (most prose) take a fast path: one ``lower`` and one precompiled ``findall``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: A tokenizer: text in, tokens out.
Tokenizer = Callable[[str], list[str]]

#: English function words dropped after lowercasing. Deliberately small: only words that carry no
#: topic, so short API questions ("what does X return") keep their content words.
STOPWORDS: frozenset[str] = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "did", "do", "does", "for",
        "from", "had", "has", "have", "he", "her", "his", "i", "if", "in", "into", "is", "it", "its",
        "me", "my", "of", "on", "or", "our", "she", "so", "than", "that", "the", "their", "them",
        "then", "there", "these", "they", "this", "those", "to", "was", "we", "were", "which", "who",
        "whom", "will", "with", "you", "your",
    }
)  # fmt: skip

#: An alphanumeric run (Unicode letters and digits; ``_`` excluded).
_WORD_RE = re.compile(r"[^\W_]+")
#: Somewhere a CamelCase part starts: ``aB``/``1B``, or an acronym's last capital before a word
#: of 2+ lowercase letters (``HTTPServer``; but not ``URLs``/``IDs``, which stay whole).
_CAMEL_BOUNDARY_RE = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]{2}")
#: The zero-width positions where a new CamelCase part starts.
_CAMEL_SPLIT_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")


def split_camel(word: str) -> list[str]:
    """Split one alphanumeric run at its CamelCase boundaries, case preserved.

    Args:
        word: An alphanumeric run such as ``"OrderedDict"``.

    Returns:
        The parts, e.g. ``["Ordered", "Dict"]``; ``[word]`` when there is no boundary.
    """
    return _CAMEL_SPLIT_RE.split(word)


def _word_tokens(word: str) -> list[str]:
    """Tokens of one alphanumeric run: its CamelCase parts then the whole, lowercased, no stopwords."""
    whole = word.lower()
    if whole == word or _CAMEL_BOUNDARY_RE.search(word) is None:
        return [] if whole in STOPWORDS else [whole]
    tokens = [part for part in map(str.lower, split_camel(word)) if part not in STOPWORDS]
    if whole not in STOPWORDS:
        tokens.append(whole)
    return tokens


def tokenize(text: str) -> list[str]:
    """Tokenize text for lexical retrieval (see the module docstring for the rules).

    Args:
        text: Any text: prose, code, identifiers.

    Returns:
        Lowercase tokens in text order, stopwords removed.
    """
    if _CAMEL_BOUNDARY_RE.search(text) is None:  # fast path: no identifier to split
        return [token for token in _WORD_RE.findall(text.lower()) if token not in STOPWORDS]
    return [token for word in _WORD_RE.findall(text) for token in _word_tokens(word)]


#: An identifier as written in code: ``os.path.join``, ``max_length``, ``OrderedDict``.
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def tokenize_code(text: str) -> list[str]:
    """Like :func:`tokenize`, and every multi-part identifier is also kept whole, lowercased.

    ``os.path.join`` -> ``os``, ``path``, ``join``, ``os.path.join``; ``max_length`` -> ``max``,
    ``length``, ``max_length``; ``LlmAgent`` -> ``llm``, ``agent``, ``llmagent`` (as :func:`tokenize`).
    A dotted name also keeps its last two parts (``path.join``), the way questions often cite it.
    So a query naming the exact identifier matches it as one rare term, and words still match parts.
    """
    tokens = tokenize(text)
    for match in _IDENTIFIER_RE.finditer(text):
        ident = match.group(0).strip("_")
        if not ident or ("_" not in ident and "." not in ident):
            continue  # a plain word or CamelCase run: tokenize already handled it
        whole = ident.lower()
        tokens.append(whole)
        parts = whole.split(".")
        if len(parts) > 2:
            tokens.append(".".join(parts[-2:]))
    return tokens


#: Tokenizers by their registry name.
TOKENIZERS: dict[str, Tokenizer] = {"default": tokenize, "code": tokenize_code}
