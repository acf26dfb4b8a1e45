"""Sentences of documentation text: the first sentence of a docstring, and removing a sentence from a text.

Shared by the known-item queries (:mod:`~retrieval_pipeline.core.datasets.known_item.queries`: a query is a
document's first sentence, removed from the document) and by the training pairs mined from a corpus
(:mod:`~retrieval_pipeline.core.retrieval.training.mined_pairs`). It lives in the datasets stage because the
known-item query defines what a sentence is; the training pairs, a floor above, import that same definition.
"""

from __future__ import annotations

import re

#: Words that end in a period without ending a sentence.
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "cf", "approx", "resp", "no", "mr", "dr"})
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, as written (line breaks kept), or the whole
    paragraph when no ``.``, ``!`` or ``?`` ends a sentence in it; abbreviations (``e.g.``) do not end one."""
    paragraph = re.split(r"\n\s*\n", docstring.strip(), maxsplit=1)[0]
    for match in _SENTENCE_END.finditer(paragraph):
        before = paragraph[: match.start()].split()
        if not before or before[-1].lower() not in _ABBREVIATIONS:
            return paragraph[: match.end()].strip()
    return paragraph.strip()


def collapse(text: str) -> str:
    """``text`` with every run of whitespace made one space (the query form of a sentence)."""
    return " ".join(text.split())


def remove_sentence(text: str, sentence: str) -> tuple[str, int]:
    """``text`` with every occurrence of ``sentence`` removed, whatever the whitespace between its words.

    Returns:
        The new text (trailing spaces and runs of blank lines left by the removal tidied) and how many
        occurrences were removed.
    """
    words = sentence.split()
    if not words:
        return text, 0
    pattern = re.compile(r"\s+".join(map(re.escape, words)))
    removed, count = pattern.subn("", text)
    if count:
        removed = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", removed)).strip()
    return removed, count
