"""Tests for markdown-aware chunking: heading paths, packing, sentence splits, overlap, word boundaries."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets.context_qa.chunking import chunk_markdown

DOC = """Intro line before any heading.

# Auto Policy

## Coverage

### Collision

Collision pays for repairs.

### Theft

Theft pays for stolen cars.

## Exclusions

War is excluded.
"""


def spans(text: str, chunks: list[Document]) -> list[tuple[int, int]]:
    """Where each chunk sits in the text (chunks are in order; texts here are unique)."""
    found, cursor = [], 0
    for chunk in chunks:
        start = text.index(chunk.text, cursor)
        found.append((start, start + len(chunk.text)))
        cursor = start + 1
    return found


def test_heading_paths_ids_and_fields() -> None:
    chunks = chunk_markdown("auto", DOC, source="docs/auto.md")
    assert [(c.doc_id, c.title, c.text) for c in chunks] == [
        ("auto#0", "auto", "Intro line before any heading."),
        ("auto#1", "Auto Policy > Coverage > Collision", "Collision pays for repairs."),
        ("auto#2", "Auto Policy > Coverage > Theft", "Theft pays for stolen cars."),
        ("auto#3", "Auto Policy > Exclusions", "War is excluded."),
    ]
    assert {(c.kind, c.module, c.source) for c in chunks} == {("chunk", "auto", "docs/auto.md")}
    assert chunk_markdown("auto", DOC)[0].source == "auto"


def test_heading_markup_is_cleaned_and_rules_are_dropped() -> None:
    text = "#### **1. Preamble**  \nBody one.\n\n---\n\n##### `3.1` Fire ##\nBody two.\n"
    chunks = chunk_markdown("home", text)
    assert [(c.title, c.text) for c in chunks] == [("1. Preamble", "Body one."), ("1. Preamble > 3.1 Fire", "Body two.")]


def test_heading_inside_code_fence_is_not_a_heading() -> None:
    text = "# Top\n\n```\n# not a heading\nx = 1\n```\n\nAfter.\n"
    chunks = chunk_markdown("d", text)
    assert [c.title for c in chunks] == ["Top"]
    assert chunks[0].text == "```\n# not a heading\nx = 1\n```\n\nAfter."


def test_paragraphs_and_list_items_are_packed_up_to_size() -> None:
    items = "\n".join(f"- **Item {i}**:  \n  Detail number {i} here." for i in range(6))
    text = f"# List\n\nLead paragraph.\n\n{items}\n"
    chunks = chunk_markdown("d", text, size=80, overlap=0)
    assert all(len(c.text) <= 80 for c in chunks)
    assert chunks[0].text.startswith("Lead paragraph.\n\n- **Item 0**")
    for chunk in chunks:  # a list item is never split from its continuation line
        assert chunk.text.count("- **Item") == chunk.text.count("Detail number")


def test_oversize_paragraph_splits_at_sentence_boundaries() -> None:
    paragraph = " ".join(f"Sentence number {i} ends here." for i in range(12))
    chunks = chunk_markdown("d", f"# S\n\n{paragraph}\n", size=100, overlap=0)
    assert len(chunks) > 1
    assert all(len(c.text) <= 100 and c.text.startswith("Sentence") and c.text.endswith("here.") for c in chunks)
    assert " ".join(c.text for c in chunks) == paragraph


def test_abbreviation_with_lowercase_next_word_is_not_a_sentence_break() -> None:
    paragraph = "Perils (e.g. floods and storms) are covered. " * 4
    chunks = chunk_markdown("d", paragraph.strip(), size=60, overlap=0)
    assert all(not c.text.endswith("e.g.") for c in chunks)


def test_overlap_is_carried_within_a_section_only() -> None:
    first = " ".join(f"Alpha {i} one." for i in range(10))
    second = " ".join(f"Beta {i} two." for i in range(10))
    text = f"# A\n\n{first}\n\n# B\n\n{second}\n"
    chunks = chunk_markdown("d", text, size=60, overlap=20)
    for previous, current in zip(chunks, chunks[1:]):
        if previous.title != current.title:
            assert current.text.startswith("Beta 0")  # no carry across sections
            continue
        carried = next(n for n in range(len(current.text), 0, -1) if previous.text.endswith(current.text[:n]))
        assert 0 < carried <= 20
        assert len(current.text) <= 60


def test_no_chunk_cuts_inside_a_word() -> None:
    rng = random.Random(7)
    for trial in range(20):
        words = [f"w{n}" + "x" * rng.randint(0, 12) + rng.choice(["", ".", ",", "?"]) for n in range(rng.randint(20, 300))]
        paragraphs, start = [], 0
        while start < len(words):
            end = start + rng.randint(1, 60)
            paragraphs.append(" ".join(words[start:end]))
            start = end
        text = "# T\n\n" + "\n\n".join(paragraphs) + "\n"
        size = rng.randint(15, 300)
        chunks = chunk_markdown("d", text, size=size, overlap=rng.randint(0, size - 1))
        located = spans(text, chunks)
        for (start, end), chunk in zip(located, chunks):
            assert text[start - 1].isspace() and (end == len(text) or text[end].isspace())
            assert len(chunk.text) <= size or " " not in chunk.text.strip()
        body_words = {m.start() for m in re.finditer(r"\S+", text) if m.start() > 4}
        covered = {s for s in body_words if any(a <= s < b for a, b in located)}
        assert covered == body_words, f"trial {trial}: words lost"


def test_single_word_longer_than_size_stays_whole() -> None:
    word = "x" * 50
    chunks = chunk_markdown("d", f"short {word} tail", size=20, overlap=5)
    assert word in [c.text for c in chunks]


def test_deterministic() -> None:
    text = DOC * 3
    assert chunk_markdown("d", text, 50, 10) == chunk_markdown("d", text, 50, 10)


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_bad_size_or_overlap(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="overlap"):
        chunk_markdown("d", DOC, size=size, overlap=overlap)


@pytest.mark.integration
def test_insurance_documents_chunk_cleanly(shared_data: Path) -> None:
    for path in sorted((shared_data / "insurance" / "documents").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for size, overlap in [(400, 100), (800, 100), (1500, 150)]:
            chunks = chunk_markdown(path.stem, text, size, overlap)
            assert chunks and all(len(c.text) <= size for c in chunks)
            assert all(" > " in c.title or c.title == "Policy Document" for c in chunks[1:])
            spans(text, chunks)  # every chunk is a span of the document
