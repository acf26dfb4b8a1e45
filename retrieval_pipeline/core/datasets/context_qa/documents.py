"""Load the corpus of a context-QA dataset: markdown files, or the Python language reference topics.

Each document is ``(document_id, text)``; the chunker (:mod:`~retrieval_pipeline.core.datasets.context_qa.chunking`)
cuts it into the chunks that relevance is judged on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Rejected


def load_documents(paths: Sequence[str | Path], rejects: list[Rejected] | None = None) -> list[tuple[str, str]]:
    """Read markdown documents as ``(document_id, text)``, ``document_id`` being the file stem.

    A leading UTF-8 byte-order mark is dropped (it would hide a first ``# heading``).

    Args:
        paths: Markdown files, in the order wanted.
        rejects: When given, an empty or whitespace-only document is left out and recorded here
            (``Rejected`` naming the file), instead of being returned to contribute no chunk unnoticed.

    Returns:
        ``[(stem, text), ...]`` in the given order.

    Raises:
        InputError: A file cannot be read or is not UTF-8, or two files share a stem (their chunk ids would clash).
    """
    documents: list[tuple[str, str]] = []
    seen: dict[str, Path] = {}
    for raw in paths:
        path = Path(raw)
        if path.stem in seen:
            raise InputError(f"document id {path.stem!r} already used by {seen[path.stem]}", path=str(path))
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read document: {exc}", path=str(path)) from exc
        seen[path.stem] = path
        if rejects is not None and not text.strip():
            what = "empty (0 characters)" if not text else f"whitespace only ({len(text)} character{'s' * (len(text) != 1)})"
            rejects.append(Rejected(str(path), path.stem, None, f"file {path}: document {path.stem!r} is {what}: it contributes no chunk"))
            continue
        documents.append((path.stem, text))
    return documents


_REST_UNDERLINE = {"*": "##", "=": "###", "-": "####", "~": "#####"}


def _topic_markdown(topic: str, text: str) -> str:
    """``# <topic>`` followed by the topic text with reST-underlined titles turned into ATX headings.

    The pydoc text underlines titles (``*`` for the statement's title, then ``=``, ``-``, ``~``); each
    ``title`` + underline pair becomes ``## title`` .. ``##### title``. Everything else is kept.
    """
    lines = text.splitlines()
    out: list[str] = [f"# {topic}", ""]
    index = 0
    while index < len(lines):
        line, underline = lines[index], lines[index + 1] if index + 1 < len(lines) else ""
        marker = underline[:1]
        is_title = (
            marker in _REST_UNDERLINE and set(underline) == {marker} and len(underline) >= 3 and line.strip() and not line[:1].isspace()
        )
        if is_title:
            out.append(f"{_REST_UNDERLINE[marker]} {line.strip()}")
            index += 2
        else:
            out.append(line)
            index += 1
    return "\n".join(out).rstrip() + "\n"


def pydoc_topic_documents(topics: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """Documents from the Python language reference topics that ship with CPython (``pydoc_data``).

    Each topic (``"assert"``, ``"try"``, ...) becomes ``(topic, markdown)``: a ``# <topic>`` heading,
    then the topic's text with its underlined titles as ATX headings (see :func:`_topic_markdown`).
    The text is the running interpreter's, so it can differ slightly between Python versions.

    Args:
        topics: Topic names in the order wanted; None for every topic, sorted.

    Returns:
        ``[(topic, markdown), ...]``.

    Raises:
        ValueError: A topic is unknown, or ``pydoc_data`` is missing from this Python.
    """
    try:
        from pydoc_data.topics import topics as available
    except ImportError as exc:  # some distributions strip pydoc_data
        raise ValueError("pydoc_data.topics is not available in this Python installation") from exc
    names = sorted(available) if topics is None else list(topics)
    unknown = [name for name in names if name not in available]
    if unknown:
        raise ValueError(f"unknown pydoc topic(s) {unknown}; known: {', '.join(sorted(available))}")
    return [(name, _topic_markdown(name, available[name])) for name in names]
