"""Markdown-aware chunking: documents into heading-scoped, size-bounded passages.

Rules (:func:`chunk_markdown`), applied in this order:

1. **Sections.** ATX headings (``#`` to ``######`` at line start, outside code fences) split the
   document into sections. Each section's heading path is the stack of enclosing headings: a heading
   of level ``L`` closes every open heading of level ``>= L``. Heading text is cleaned of ``*``,
   backticks, trailing ``#`` and surrounding whitespace. Setext (underlined) headings are not
   recognised; ``---`` lines are horizontal rules.
2. **Blocks.** A section's body is cut into blocks: paragraphs end at a blank line, a horizontal
   rule (``---``, ``***``, ``___``) or a heading; a list item (``-``, ``*``, ``+`` or ``1.``/``1)``
   after optional indentation) starts a new block, and its indented continuation lines belong to it.
   A fenced code block (```` ``` ```` or ``~~~``) is one block. Rules and blank lines belong to no block.
3. **Units.** A block of at most ``size`` characters is one unit. A longer block is split at sentence
   boundaries (whitespace after ``.``, ``!`` or ``?``, optionally followed by closing quotes or
   brackets, when the next character is an uppercase letter, a digit, or an opening quote, bracket or
   markdown marker); a sentence still longer than ``size`` is split at whitespace into pieces of at
   most ``size`` characters. A single word longer than ``size`` stays whole (the only case where a
   chunk exceeds ``size``).
4. **Packing.** Units of one section are packed greedily in order: a unit joins the current chunk if
   the chunk's span, from its first character to the unit's last, stays within ``size`` characters.
   Otherwise the chunk is closed and the next chunk starts with an **overlap**: the longest tail of the
   closed chunk that starts at a word, is at most ``overlap`` characters long and still lets the new
   unit fit within ``size`` (no overlap when none fits). Overlap never crosses a section boundary.

Every chunk is a contiguous span of the source text (``text[start:end]``, original whitespace and
markup kept, heading lines excluded), which starts and ends at a word boundary: no chunk cuts inside
a word. Chunks are numbered ``<document_id>#<n>`` from 0 in document order; the output depends only
on the arguments.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from retrieval_pipeline.core.common.types import Document

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*$")
_CLOSING_HASHES = re.compile(r"[ \t]+#+$")
_RULE = re.compile(r"^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"')\]’”]*(\s+)(?=[A-Z0-9\"'(\[*_`‘“-])")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class _Span:
    """A half-open character range ``[start, end)`` of the document text."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass
class _Section:
    path: tuple[str, ...]
    blocks: list[_Span]


def chunk_markdown(
    document_id: str,
    text: str,
    size: int = 800,
    overlap: int = 100,
    *,
    source: str | None = None,
) -> list[Document]:
    """Split a markdown document into heading-scoped chunks of at most ``size`` characters.

    See the module docstring for the exact rules.

    Args:
        document_id: The document's id; chunk ids are ``<document_id>#<n>``.
        text: The markdown text.
        size: Maximum chunk length in characters (exceeded only by a single longer word).
        overlap: Maximum number of characters carried over from a chunk to the next one of the same
            section, cut at a word start.
        source: Recorded in ``Document.source``; defaults to ``document_id``.

    Returns:
        Documents with ``doc_id = "<document_id>#<n>"``, ``kind = "chunk"``, ``module = document_id``,
        ``title`` = the heading path joined with ``" > "`` (``document_id`` before the first heading),
        and the chunk span as ``text``.

    Raises:
        ValueError: If ``size < 1`` or ``overlap`` is not in ``[0, size)``.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size, got size={size}, overlap={overlap}")
    chunks: list[Document] = []
    for section in _sections(text):
        title = " > ".join(section.path) or document_id
        units = [unit for block in section.blocks for unit in _units(text, block, size)]
        for span in _pack(text, units, size, overlap):
            chunks.append(
                Document(
                    doc_id=f"{document_id}#{len(chunks)}",
                    text=text[span.start : span.end],
                    title=title,
                    kind="chunk",
                    module=document_id,
                    source=source if source is not None else document_id,
                )
            )
    return chunks


# --------------------------------------------------------------------------------------------------
# 1-2. Sections and blocks
# --------------------------------------------------------------------------------------------------


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line with its start offset (line breaks excluded)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        yield offset, line.rstrip("\r\n")
        offset += len(line)


def _heading_title(raw: str) -> str:
    title = _CLOSING_HASHES.sub("", raw)
    return " ".join(title.replace("*", "").replace("`", "").split())


def _sections(text: str) -> list[_Section]:
    """The document's sections, each with its heading path and its block spans."""
    sections = [_Section((), [])]
    stack: list[tuple[int, str]] = []
    block: _Span | None = None
    in_fence = False

    def close() -> None:
        nonlocal block
        if block is not None:
            sections[-1].blocks.append(block)
            block = None

    for offset, line in _lines(text):
        stripped = line.strip()
        line_span = _Span(offset + len(line) - len(line.lstrip()), offset + len(line.rstrip()))
        if in_fence:  # inside a code fence: everything up to the closing fence is one block
            block = _Span(block.start, line_span.end) if block is not None and stripped else block
            if _FENCE.match(line):
                in_fence = False
                close()
            continue
        if _FENCE.match(line):
            close()
            block, in_fence = line_span, True
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            level = len(heading.group(1))
            stack = [(lvl, title) for lvl, title in stack if lvl < level] + [(level, _heading_title(heading.group(2)))]
            sections.append(_Section(tuple(title for _, title in stack), []))
        elif not stripped or _RULE.match(line):
            close()
        elif _LIST_ITEM.match(line) or block is None:
            close()
            block = line_span
        else:
            block = _Span(block.start, line_span.end)
    close()
    return [section for section in sections if section.blocks]


# --------------------------------------------------------------------------------------------------
# 3. Units: blocks, sentences, word-bounded pieces
# --------------------------------------------------------------------------------------------------


def _units(text: str, block: _Span, size: int) -> list[_Span]:
    """The block itself if it fits, else its sentences, each split at whitespace when still too long."""
    if block.length <= size:
        return [block]
    units: list[_Span] = []
    for sentence in _sentences(text, block):
        units.extend([sentence] if sentence.length <= size else _word_pieces(text, sentence, size))
    return units


def _sentences(text: str, block: _Span) -> list[_Span]:
    """Sentence spans of a block, split at the whitespace of each sentence break."""
    spans, start = [], block.start
    for match in _SENTENCE_BREAK.finditer(text, block.start, block.end):
        spans.append(_Span(start, match.start(1)))
        start = match.end(1)
    spans.append(_Span(start, block.end))
    return spans


def _word_pieces(text: str, span: _Span, size: int) -> list[_Span]:
    """Greedy runs of whole words of at most ``size`` characters (a longer single word stays whole)."""
    pieces: list[_Span] = []
    for word in _WORD.finditer(text, span.start, span.end):
        if pieces and word.end() - pieces[-1].start <= size:
            pieces[-1] = _Span(pieces[-1].start, word.end())
        else:
            pieces.append(_Span(word.start(), word.end()))
    return pieces


# --------------------------------------------------------------------------------------------------
# 4. Packing with overlap
# --------------------------------------------------------------------------------------------------


def _pack(text: str, units: list[_Span], size: int, overlap: int) -> list[_Span]:
    """Greedy packing of one section's units into chunk spans, with a word-aligned overlap."""
    chunks: list[_Span] = []
    current: _Span | None = None
    for unit in units:
        if current is None:
            current = unit
        elif unit.end - current.start <= size:
            current = _Span(current.start, unit.end)
        else:
            chunks.append(current)
            start = _overlap_start(text, current, unit.end, overlap, size)
            current = _Span(start if start is not None else unit.start, unit.end)
    if current is not None:
        chunks.append(current)
    return chunks


def _overlap_start(text: str, chunk: _Span, next_end: int, overlap: int, size: int) -> int | None:
    """Start of the overlap carried from ``chunk`` into the next chunk (which ends at ``next_end``), or None.

    The smallest ``start`` with ``chunk.start < start < chunk.end`` such that ``text[start]`` begins a
    word (non-space after whitespace), the tail ``[start, chunk.end)`` is at most ``overlap``
    characters, and the new chunk ``[start, next_end)`` is at most ``size`` characters.
    """
    earliest = max(chunk.end - overlap, next_end - size, chunk.start + 1)
    for start in range(earliest, chunk.end):
        if not text[start].isspace() and text[start - 1].isspace():
            return start
    return None
