"""Natural Questions (NQ) CSV: rows in; a deduplicated passage corpus, cases and qrels out.

The CSV has a header and three columns (any order, extra columns ignored)::

    question,long_answer,short_answer

``long_answer`` is the passage that answers the question; ``short_answer`` holds one or more short
answers joined with ``" | "``. Fields may span several lines when quoted.

**Rows and lines.** Messages name the *row* as a spreadsheet shows it (header = row 1, first data
row = row 2, a quoted multi-line field still one row) and, where it differs, the physical *line*
of the file where the row starts.

**Validation.** File-level problems raise :class:`~retrieval_pipeline.core.common.errors.InputError`
naming the file: unreadable, not UTF-8 (with the byte offset, row and line of the first bad byte),
empty, a required column missing, malformed CSV such as an unclosed quote (with the row). A data
row with an empty ``question`` or ``long_answer``, with non-empty fields past the header, with a
cell longer than :data:`MAX_CELL_CHARS`, or repeating an earlier row's question and long answer
(an exact duplicate would count one question twice) becomes a
:class:`~retrieval_pipeline.core.common.types.Rejected` whose reason names the file, the row and the
column, so ``len(rows) + len(rejects) == total``. Blank lines are skipped and not counted.

**Cell sizes.** Python's csv module refuses fields over 131,072 characters by default, which would
fail the whole file on one long cell; the limit is raised to the length of the file's text (at least
:data:`CSV_FIELD_LIMIT`), so no field fails the file: a cell over :data:`MAX_CELL_CHARS` rejects only its
row, however long, and the other rows are kept. An unclosed quote still fails the file, at its end
("unexpected end of data"), naming the row where the quote opened.

**Question ids** are ``nq_q000000``, ``nq_q000001``, ... from the 0-based position of the data row
(blank lines skipped, rejected rows counted), so an id stays the same whatever other rows are
rejected.

**The corpus** is the set of long answers: several questions can share one passage, and identical
passages become one chunk (see :func:`dedupe_chunks`), relevant to every question that produced it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.atomic import atomic_write_text
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case, Document, Qrels, Rejected

#: The ``document_id`` every NQ chunk carries (all passages come from one dataset).
NQ_DOCUMENT_ID = "natural_questions"
#: Columns the header must have.
REQUIRED_COLUMNS: tuple[str, ...] = ("question", "long_answer", "short_answer")
#: Columns that must be non-empty in a row (an empty ``short_answer`` is allowed).
NON_EMPTY_COLUMNS: tuple[str, ...] = ("question", "long_answer")
#: How several short answers are joined in one cell.
SHORT_ANSWER_SEPARATOR = " | "
#: The benchmark type of NQ cases.
NQ_BENCHMARK_TYPE = "nq"

#: Smallest field limit the csv parser is given, in characters (its default, 131,072, is raised to this,
#: or to the length of the text parsed when that is larger).
CSV_FIELD_LIMIT = 10 * 1024 * 1024
#: Largest ``question`` / ``long_answer`` / ``short_answer`` cell accepted; a longer one rejects its row.
MAX_CELL_CHARS = 100_000

_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass
class NQRow:
    """One accepted data row.

    Attributes:
        question_id: ``nq_q`` + the 0-based data-row position, zero-padded to 6 digits.
        question: The question, stripped.
        long_answer: The passage, stripped (inner whitespace kept as in the file).
        short_answers: The short answers, split on ``" | "``, stripped, empties dropped.
        row_number: Spreadsheet row (header = 1).
        index: 0-based data-row position (the number in ``question_id``).
    """

    question_id: str
    question: str
    long_answer: str
    short_answers: list[str]
    row_number: int
    index: int


@dataclass
class NQLoad:
    """The outcome of :func:`load_nq_csv`: ``len(rows) + len(rejects) == total``.

    Attributes:
        rows: Accepted rows, in file order.
        rejects: Rejected rows, each with the reason.
        total: Data rows read (blank lines not counted; at most ``sample_size`` when sampling).
    """

    rows: list[NQRow]
    rejects: list[Rejected]
    total: int

    def first(self, n: int) -> NQLoad:
        """The outcome for the first ``n`` data rows only: what ``load_nq_csv(path, sample_size=n)`` returns.

        A row is rejected as a duplicate of an earlier row only, so cutting a load of the whole file at ``n``
        gives the rows and rejects of reading ``n`` rows.
        """
        rows = [row for row in self.rows if row.index < n]
        rejects = [reject for reject in self.rejects if reject.index is not None and reject.index < n]
        return NQLoad(rows, rejects, len(rows) + len(rejects))


@dataclass
class NQChunks:
    """The deduplicated corpus from :func:`dedupe_chunks`: ``len(chunks) + duplicates == len(rows)``.

    Attributes:
        chunks: One dict per distinct long answer, in first-appearance order.
        question_chunk: ``{question_id: chunk_id}`` for every input row.
        duplicates: Rows whose long answer merged into an earlier chunk.
    """

    chunks: list[dict[str, Any]]
    question_chunk: dict[str, str]
    duplicates: int


# -- loading ---------------------------------------------------------------------------------------


def question_id(index: int) -> str:
    """The id of the data row at 0-based position ``index``: ``nq_q000042``."""
    return f"nq_q{index:06d}"


def load_nq_csv(path: str | Path, sample_size: int | None = None) -> NQLoad:
    """Read and validate an NQ CSV.

    ``sample_size`` keeps the first N data rows (file order, blank lines skipped) and ``total``
    counts only those, so ``len(rows) + len(rejects) == total`` holds either way.

    Args:
        path: The CSV file (UTF-8, optionally with a byte-order mark).
        sample_size: Read only the first N data rows; ``None`` reads all.

    Returns:
        Accepted rows, rejected rows (empty ``question`` or ``long_answer``, stray fields) and the
        number of data rows read.

    Raises:
        InputError: The file cannot be read, is not UTF-8 (the message gives the byte offset, row
            and line), is empty, lacks a required column, or is malformed CSV (the message gives the
            row and line).
        ValueError: ``sample_size`` is below 1.
    """
    if sample_size is not None and sample_size < 1:
        raise ValueError(f"sample_size must be >= 1 or None, got {sample_size}")
    path = Path(path)
    records = _records(_read_text(path), path)
    first = next(records, None)
    if first is None:
        raise InputError(f"the file is empty; expected a header row {','.join(REQUIRED_COLUMNS)}", path=str(path))
    header = _header(first[0], path)
    rows: list[NQRow] = []
    rejects: list[Rejected] = []
    first_row: dict[tuple[str, str], NQRow] = {}  # (question, long answer), whitespace folded -> first row
    for index, (record, row_number, line) in enumerate(islice(_data_records(records), sample_size)):
        problem = _row_problem(record, header)
        row = None if problem else _row(record, header, index, row_number)
        if row is not None:
            key = (normalise_whitespace(row.question), normalise_whitespace(row.long_answer))
            first = first_row.setdefault(key, row)
            if first is not row:
                problem = f"exact duplicate of row {first.row_number} ({first.question_id}): same question and long answer"
        if problem:
            reason = f"file {path}, {_where(row_number, line)}: {problem}"
            rejects.append(Rejected(str(path), question_id(index), index, reason))
        else:
            rows.append(row)
    return NQLoad(rows, rejects, len(rows) + len(rejects))


def _read_text(path: Path) -> str:
    """The file decoded as strict UTF-8 (a leading BOM dropped); errors name the byte, row and line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the NQ CSV: {exc.strerror or exc}", path=str(path)) from exc
    start = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data, start, exc) from exc


def _not_utf8(path: Path, data: bytes, start: int, exc: UnicodeDecodeError) -> InputError:
    """An :class:`InputError` locating the first invalid byte by offset, row and line."""
    offset = start + exc.start
    prefix = data[start:offset].decode("utf-8")  # everything before the first bad byte is valid
    line = _line_of_offset(prefix)
    row = _row_of_line(data[start:].decode("utf-8", errors="replace"), line)
    bad = data[offset : start + exc.end].hex(" ")
    return InputError(
        f"not valid UTF-8 in {_where(row, line)}, byte offset {offset} (0x{bad}: {exc.reason}); re-save the file as UTF-8",
        path=str(path),
    )


def _line_of_offset(prefix: str) -> int:
    """1-based physical line on which the text after ``prefix`` starts (same line breaks as csv)."""
    lines = io.StringIO(prefix, newline="").readlines()
    if not lines:
        return 1
    return len(lines) + 1 if lines[-1].endswith(("\n", "\r")) else len(lines)


def _row_of_line(text: str, line: int) -> int:
    """Spreadsheet row (header = 1) of the CSV record that contains physical ``line``."""
    row = 0
    try:
        for row, (_, _, last_line) in enumerate(_spans(text), start=1):
            if last_line >= line:
                return row
    except csv.Error:
        pass
    return row + 1


def _spans(text: str) -> Iterator[tuple[list[str], int, int]]:
    """Each CSV record with its first and last physical line (1-based); blank lines give ``[]``."""
    limit = max(CSV_FIELD_LIMIT, len(text) + 1)  # no field is longer than the text: none fails the file
    if csv.field_size_limit() < limit:  # process-wide: raise it, never lower what someone else set
        csv.field_size_limit(limit)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    last = 0
    for record in reader:
        yield record, last + 1, reader.line_num
        last = reader.line_num


def _records(text: str, path: Path) -> Iterator[tuple[list[str], int, int]]:
    """``(record, row_number, first_line)`` for every record, header included; csv errors name the row."""
    spans = _spans(text)
    row_number, next_line = 0, 1
    while True:
        try:
            record, first_line, last_line = next(spans)
        except StopIteration:
            return
        except csv.Error as exc:
            where = _where(row_number + 1, next_line)
            hint = (
                f" (a field over {CSV_FIELD_LIMIT:,} characters: an unclosed quote?)"
                if "field limit" in str(exc)
                else " (an unclosed quote?)"
            )
            raise InputError(f"malformed CSV in {where}: {exc}{hint}", path=str(path)) from exc
        row_number, next_line = row_number + 1, last_line + 1
        yield record, row_number, first_line


def _data_records(records: Iterator[tuple[list[str], int, int]]) -> Iterator[tuple[list[str], int, int]]:
    """The non-blank records after the header."""
    return (r for r in records if r[0])


@dataclass(frozen=True)
class _Header:
    """Where the required columns are, and how many fields the header has."""

    positions: dict[str, int]
    width: int


def _header(record: Sequence[str], path: Path) -> _Header:
    """Locate the required columns (names stripped, case-insensitive); extra columns are ignored."""
    names = [name.strip().lower() for name in record]
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise InputError(
            f"missing required column(s) {', '.join(missing)}; the header has {', '.join(map(repr, record))} "
            f"(expected {','.join(REQUIRED_COLUMNS)})",
            path=str(path),
        )
    repeated = [c for c in REQUIRED_COLUMNS if names.count(c) > 1]
    if repeated:
        raise InputError(f"column(s) {', '.join(repeated)} appear more than once in the header", path=str(path))
    return _Header({c: names.index(c) for c in REQUIRED_COLUMNS}, len(record))


def _cell(record: Sequence[str], position: int) -> str:
    """A stripped cell; a field missing from a short row counts as empty."""
    return record[position].strip() if position < len(record) else ""


def _row_problem(record: Sequence[str], header: _Header) -> str | None:
    """Why a data row is rejected (empty required cell, non-empty fields past the header), or ``None``."""
    long = [(c, len(record[p])) for c, p in header.positions.items() if p < len(record) and len(record[p]) > MAX_CELL_CHARS]
    if long:
        cells = " and ".join(f"{c!r} ({n:,} characters)" for c, n in long)
        return f"{cells} over the per-cell limit of {MAX_CELL_CHARS:,} characters"
    empty = [c for c in NON_EMPTY_COLUMNS if not _cell(record, header.positions[c])]
    if empty:
        return f"empty {' and '.join(repr(c) for c in empty)}"
    if any(value.strip() for value in record[header.width :]):
        return f"{len(record)} fields but the header has {header.width} (an unquoted comma or quote?)"
    return None


def _row(record: Sequence[str], header: _Header, index: int, row_number: int) -> NQRow:
    """Build an accepted row."""
    positions = header.positions
    return NQRow(
        question_id=question_id(index),
        question=_cell(record, positions["question"]),
        long_answer=_cell(record, positions["long_answer"]),
        short_answers=split_short_answers(_cell(record, positions["short_answer"])),
        row_number=row_number,
        index=index,
    )


def split_short_answers(cell: str) -> list[str]:
    """Split a ``short_answer`` cell on ``" | "``; parts are stripped and empty ones dropped.

    Args:
        cell: The cell text, e.g. ``"291 | 291 episodes"``.

    Returns:
        The answers, e.g. ``["291", "291 episodes"]``.
    """
    return [part.strip() for part in cell.split(SHORT_ANSWER_SEPARATOR) if part.strip()]


def _where(row: int, line: int) -> str:
    """``row 7`` or ``row 7 (line 9)`` when multi-line fields shift the physical line."""
    return f"row {row}" if row == line else f"row {row} (line {line})"


# -- corpus, cases, qrels --------------------------------------------------------------------------


def chunk_id(position: int) -> str:
    """The id of the chunk at 0-based ``position`` in first-appearance order: ``nq_000042``."""
    return f"nq_{position:06d}"


def normalise_whitespace(text: str) -> str:
    """Collapse every run of whitespace (Unicode, line breaks included) to one space and strip.

    This is the dedup key: the same passage copied with different spacing or line breaks is one
    passage. Case and punctuation are kept, so passages differing in anything else stay distinct.
    """
    return " ".join(text.split())


def dedupe_chunks(rows: Sequence[NQRow]) -> NQChunks:
    """Make the corpus: one chunk per distinct long answer, relevant to every question that has it.

    Two long answers are the same passage when they are equal after :func:`normalise_whitespace`.
    Chunks are numbered ``nq_000000``, ``nq_000001``, ... in the order their passage first appears.
    Each chunk is exactly::

        {"chunk_id": "nq_000000", "document_id": "natural_questions",
         "content": <long answer of the first row that has it, as read>,
         "metadata": {"question": ..., "short_answer": ..., "question_id": ...,
                      "question_ids": [...]}}

    ``question``, ``short_answer`` (the short answers joined with ``" | "``) and ``question_id``
    describe the FIRST question that produced the chunk; ``question_ids`` lists ALL questions whose
    long answer it is, in row order (the first one included).

    Args:
        rows: Accepted rows, in file order.

    Returns:
        The chunks, ``{question_id: chunk_id}`` for every row, and how many rows merged into an
        earlier chunk (``len(rows) - len(chunks)``).
    """
    chunks: list[dict[str, Any]] = []
    by_passage: dict[str, dict[str, Any]] = {}
    question_chunk: dict[str, str] = {}
    for row in rows:
        key = normalise_whitespace(row.long_answer)
        chunk = by_passage.get(key)
        if chunk is None:
            chunk = by_passage[key] = _new_chunk(len(chunks), row)
            chunks.append(chunk)
        else:
            chunk["metadata"]["question_ids"].append(row.question_id)
        question_chunk[row.question_id] = chunk["chunk_id"]
    return NQChunks(chunks, question_chunk, len(rows) - len(chunks))


def _new_chunk(position: int, row: NQRow) -> dict[str, Any]:
    """A chunk for ``row``'s long answer, with ``row`` as its first question."""
    return {
        "chunk_id": chunk_id(position),
        "document_id": NQ_DOCUMENT_ID,
        "content": row.long_answer,
        "metadata": {
            "question": row.question,
            "short_answer": SHORT_ANSWER_SEPARATOR.join(row.short_answers),
            "question_id": row.question_id,
            "question_ids": [row.question_id],
        },
    }


def nq_documents(chunks: Sequence[dict[str, Any]]) -> list[Document]:
    """The chunks as retrievable passages (``doc_id`` = ``chunk_id``, ``source`` = ``nq:<document_id>``).

    Args:
        chunks: Output of :func:`dedupe_chunks`.

    Returns:
        One :class:`Document` of kind ``"passage"`` per chunk, in chunk order.
    """
    return [
        Document(
            doc_id=chunk["chunk_id"],
            text=chunk["content"],
            kind="passage",
            module=None,
            source=f"nq:{chunk['document_id']}",
        )
        for chunk in chunks
    ]


def nq_cases(rows: Sequence[NQRow], source_file: str | Path, suite: str = NQ_DOCUMENT_ID) -> list[Case]:
    """The rows as benchmark cases of type ``"nq"`` (``case_id`` = ``question_id``).

    Args:
        rows: Accepted rows.
        source_file: The CSV they came from.
        suite: Suite name recorded on each case.

    Returns:
        One :class:`Case` per row; ``extra`` holds ``long_answer`` and ``short_answers``.
    """
    return [
        Case(
            case_id=row.question_id,
            suite=suite,
            benchmark_type=NQ_BENCHMARK_TYPE,
            source_file=str(source_file),
            index=row.index,
            query=row.question,
            extra={"long_answer": row.long_answer, "short_answers": list(row.short_answers)},
        )
        for row in rows
    ]


def nq_qrels(chunks: Sequence[dict[str, Any]]) -> Qrels:
    """``{question_id: {chunk_id: 1}}``: each question's one relevant chunk, ordered by question id.

    Args:
        chunks: Output of :func:`dedupe_chunks` (reads ``metadata.question_ids``).

    Returns:
        The qrels; question ids sort in file order, so this is row order.
    """
    qrels: Qrels = {}
    for chunk in chunks:
        for qid in chunk["metadata"]["question_ids"]:
            qrels[qid] = {chunk["chunk_id"]: 1}
    return dict(sorted(qrels.items()))


def write_chunks_json(chunks: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write the chunks as a UTF-8 JSON list (indented, non-ASCII kept), creating the folder.

    Args:
        chunks: Output of :func:`dedupe_chunks`.
        path: Target file.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(list(chunks), ensure_ascii=False, indent=2) + "\n")
    return path
