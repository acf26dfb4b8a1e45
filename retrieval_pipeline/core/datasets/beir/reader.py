"""Load a BEIR-format dataset directory into documents, cases and qrels.

A BEIR directory holds::

    corpus.jsonl         {"_id", "title", "text", "metadata"?} per line
    queries.jsonl        {"_id", "text", ...} per line
    qrels/<split>.tsv    query-id, corpus-id, score

What becomes what:

* corpus row → :class:`Document` (``doc_id=_id``, ``text = title + "\\n" + text`` when the title is not
  empty, else ``text``; ``kind="passage"``, ``source="beir:<directory name>"``). ``metadata`` is not kept
  (:class:`Document` has no field for it).
* query row → :class:`Case` (``benchmark_type="beir"``, ``suite=<directory name>``, ``query=text``,
  ``index`` = 0-based line index). ``extra`` holds ``{"qrels": {doc_id: grade}}`` plus every other key the
  row carried (e.g. ``metadata``). Only queries with at least one kept qrels line in the split become
  cases. A query the split judges only in rejected lines (grades ``1.5`` or ``high``, unknown documents,
  ...) is rejected too, naming its line in ``queries.jsonl`` and the rejected qrels lines
  (``queries_without_valid_judgement``); a query the split never names is not part of the split and
  only counted (``queries_without_qrels``: ``queries.jsonl`` often holds every split's queries).
* qrels line → ``qrels[query_id][doc_id] = grade``. Grade 0 (and negative TREC grades) are kept as
  judged non-relevant.

Qrels format detection (per file):

* **Header**: the first non-blank line is a header when its last field is not a number (standard BEIR
  has ``query-id\\tcorpus-id\\tscore``; some subsets have no header). A first line ending in a non-integer
  number such as ``1.5`` is a data line, rejected for its grade. The header's fields are in the
  report as ``qrels_header`` (``None`` when there was none), so a mangled first line is visible.
* **Columns**: fields are split on tabs when the line has a tab, else on whitespace. The first data line
  with 3 or 4 fields fixes the layout for the file: 3 = ``query-id corpus-id score`` (BEIR), 4 =
  ``query-id iteration corpus-id score`` (TREC qrels; the iteration column is ignored). Lines with
  another field count are rejected.

Bad input:

* Unreadable file, invalid UTF-8, or a line that is not valid JSON: :class:`InputError` naming the file
  and line (the file is corrupt; guessing would hide it).
* Row-level problems become :class:`Rejected` rows whose reason starts ``file <path>, line <n>:`` and
  whose ``index`` is the 0-based line index: a row that is not a JSON object, missing/empty/non-string
  ``_id``, an id with whitespace (TREC run files could not hold it), empty text, a duplicate id (the
  later row is rejected), a qrels line with a wrong field count or a non-integer grade, a qrels line
  naming a query or document that is not loaded, a repeated (query, document) pair, and a valid query
  left with no valid judgement in the split, a JSON line holding an integer of more than 4,300 digits or
  nested too deeply to parse, and a grade outside the 32-bit range (:data:`MIN_GRADE` to :data:`MAX_GRADE`).

Counts add up (blank lines are skipped and not counted as rows)::

    corpus_lines = documents + corpus_rejected
    query_lines  = queries + queries_rejected
    queries      = cases + queries_without_valid_judgement + queries_without_qrels
    qrels_lines  = qrels_kept + qrels_rejected
    len(rejects) = corpus_rejected + queries_rejected + queries_without_valid_judgement + qrels_rejected

and for the split (read = accepted + rejected), ``split_queries_read = query_lines - queries_without_qrels``
``= cases + split_queries_rejected`` with ``split_queries_rejected = queries_rejected + queries_without_valid_judgement``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case, Document, Qrels, Rejected

#: ``Case.benchmark_type`` of every BEIR query.
BEIR_BENCHMARK_TYPE = "beir"

T = TypeVar("T")

_INTEGER = re.compile(r"[+-]?[0-9]+")
#: Grades accepted: a 32-bit integer (TREC grades are small; a 20-digit grade cannot be written to Parquet).
MIN_GRADE, MAX_GRADE = -(2**31), 2**31 - 1
#: Most digits of a JSON integer read (Python refuses to convert longer ones).
MAX_INT_DIGITS = 4_300


@dataclass
class BeirLoad:
    """The outcome of loading one BEIR directory and split."""

    documents: list[Document]
    cases: list[Case]
    qrels: Qrels
    rejects: list[Rejected]
    report: dict[str, Any]


class _RowProblem(Exception):
    """A row-level failure; the message says what is wrong with the row."""


@dataclass
class _IdRows(Generic[T]):
    """Rows of one JSONL file keyed by ``_id``, with what was rejected and where each id was seen."""

    path: Path
    items: dict[str, T] = field(default_factory=dict)
    line_of: dict[str, int] = field(default_factory=dict)  # accepted id -> 1-based line
    rejected_line_of: dict[str, int] = field(default_factory=dict)  # rejected id -> first rejected line
    rejects: list[Rejected] = field(default_factory=list)
    lines: int = 0


@dataclass
class _QrelsRead:
    """Kept judgements of one qrels file and the bookkeeping for the report."""

    qrels: Qrels = field(default_factory=dict)
    rejects: list[Rejected] = field(default_factory=list)
    lines: int = 0
    kept: int = 0
    header: list[str] | None = None
    columns: int | None = None
    problems: Counter[str] = field(default_factory=Counter)
    grades: Counter[int] = field(default_factory=Counter)
    rejected_lines_of: dict[str, list[int]] = field(default_factory=dict)  # loaded query id -> its rejected lines


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def load_beir(directory: str | Path, split: str = "test") -> BeirLoad:
    """Load a BEIR directory: corpus, queries, and the qrels of one split.

    See the module docstring for the mapping, the qrels format detection and the rejection rules.

    Args:
        directory: The dataset directory holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/``.
        split: Qrels split to load (``qrels/<split>.tsv``).

    Returns:
        Documents, cases (queries judged in the split, in ``queries.jsonl`` order), qrels for exactly
        those cases, rejected rows, and a report of counts that add up.

    Raises:
        InputError: A file is missing or unreadable, is not valid UTF-8, or has a line that is not JSON.
    """
    root = Path(directory)
    name = root.resolve().name
    corpus_path, queries_path, qrels_path = _beir_paths(root, split)
    corpus = _read_id_rows(corpus_path, lambda row, doc_id, line: _document(row, doc_id, f"beir:{name}"))
    queries = _read_id_rows(queries_path, lambda row, qid, line: _case(row, qid, line, name, queries_path))
    judged = _read_qrels(qrels_path, corpus, queries)
    cases = _judged_cases(queries, judged.qrels)
    qrels = {case.case_id: judged.qrels[case.case_id] for case in cases}
    unjudged = _without_valid_judgement(queries, judged, qrels_path)
    report = _report(root, split, corpus, queries, judged, cases, len(unjudged))
    rejects = [*corpus.rejects, *queries.rejects, *unjudged, *judged.rejects]
    return BeirLoad(list(corpus.items.values()), cases, qrels, rejects, report)


# --------------------------------------------------------------------------------------------------
# Files and lines
# --------------------------------------------------------------------------------------------------


def _beir_paths(root: Path, split: str) -> tuple[Path, Path, Path]:
    """The three files of a BEIR directory; raises naming the first that is missing."""
    if not root.is_dir():
        raise InputError("BEIR directory not found", path=str(root))
    paths = (root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{split}.tsv")
    for path in paths:
        if not path.is_file():
            raise InputError(f"BEIR file missing (split {split!r})", path=str(path))
    return paths


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(1-based line number, text)`` for each non-blank line, decoded as UTF-8."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                text = _decode(raw, path, number).strip("\r\n")
                if text.strip():
                    yield number, text
    except OSError as error:
        raise InputError(f"cannot read file: {error}", path=str(path)) from error


def _decode(raw: bytes, path: Path, number: int) -> str:
    """Decode one line (a leading BOM is dropped); raises naming the line on invalid UTF-8."""
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as error:
        message = f"line {number}: not valid UTF-8 ({error.reason} at byte {error.start})"
        raise InputError(message, path=str(path)) from error


def _reject(path: Path, number: int, row_id: str | None, problem: str) -> Rejected:
    """A Rejected whose reason names the file and the 1-based line; ``index`` is the 0-based line."""
    reason = f"file {path}, line {number}: {problem}"
    return Rejected(source_file=str(path), case_id=row_id, index=number - 1, reason=reason)


# --------------------------------------------------------------------------------------------------
# JSONL files (corpus and queries)
# --------------------------------------------------------------------------------------------------


def _read_id_rows(path: Path, build: Callable[[dict[str, Any], str, int], T]) -> _IdRows[T]:
    """Parse a JSONL file of ``{_id, ...}`` objects; ``build(row, id, line)`` may raise _RowProblem.

    Raises:
        InputError: A line that is not valid JSON (names file and line).
    """
    rows: _IdRows[T] = _IdRows(path)
    for number, text in _lines(path):
        rows.lines += 1
        try:
            row = _parse_json(text, path, number)
        except _RowProblem as problem:
            rows.rejects.append(_reject(path, number, None, str(problem)))
            continue
        row_id = _row_id(row)
        try:
            checked_id = _checked_id(row, row_id, rows)
            rows.items[checked_id] = build(row, checked_id, number)
            rows.line_of[checked_id] = number
        except _RowProblem as problem:
            if row_id is not None:
                rows.rejected_line_of.setdefault(row_id, number)
            rows.rejects.append(_reject(path, number, row_id, str(problem)))
    return rows


def _parse_json(text: str, path: Path, number: int) -> Any:
    """``json.loads`` one line; raises InputError naming the line and column, and _RowProblem for a valid
    line Python cannot build (an integer of more than :data:`MAX_INT_DIGITS` digits, nesting too deep).
    """
    try:
        return json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as error:
        message = f"line {number}: invalid JSON ({error.msg} at column {error.colno})"
        raise InputError(message, path=str(path)) from error
    except RecursionError:
        raise _RowProblem("nested too deeply to parse") from None


def _json_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _RowProblem(f"an integer of {len(digits.lstrip('-')):,} digits, more than {MAX_INT_DIGITS:,}")
    return int(digits)


def _row_id(row: Any) -> str | None:
    """The row's ``_id`` as a string (integers are accepted), or None when missing, empty or another type."""
    value = row.get("_id") if isinstance(row, dict) else None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value) or None


def _checked_id(row: Any, row_id: str | None, rows: _IdRows[Any]) -> str:
    """``row_id`` when usable; raise _RowProblem for a non-object row, a missing/bad ``_id``, or a repeat."""
    if not isinstance(row, dict):
        raise _RowProblem(f"expected a JSON object, got {type(row).__name__}")
    if row_id is None:
        raise _RowProblem(f"missing or empty '_id' (got {row.get('_id')!r})")
    if any(char.isspace() for char in row_id):
        raise _RowProblem(f"'_id' {row_id!r} contains whitespace (it could not be written to a TREC file)")
    if row_id in rows.items:
        raise _RowProblem(f"duplicate '_id' {row_id!r} (first seen at line {rows.line_of[row_id]}); later row rejected")
    return row_id


def _text_field(row: dict[str, Any], key: str, *, required: bool) -> str:
    """``row[key]`` as a string ('' when absent and not required); raises _RowProblem otherwise."""
    value = row.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _RowProblem(f"'{key}' must be a string (got {type(value).__name__})")
    return value


def _document(row: dict[str, Any], doc_id: str, source: str) -> Document:
    """A corpus row as a passage Document; the title, when present, is the first line of the text."""
    title = _text_field(row, "title", required=False).strip()
    body = _text_field(row, "text", required=False)
    if not title and not body.strip():
        raise _RowProblem(f"document {doc_id!r} has empty 'title' and 'text'")
    text = f"{title}\n{body}" if title else body
    return Document(doc_id=doc_id, text=text, title=title, kind="passage", source=source)


def _case(row: dict[str, Any], query_id: str, number: int, suite: str, path: Path) -> Case:
    """A queries row as a BEIR Case; qrels are attached later."""
    text = _text_field(row, "text", required=True).strip()
    if not text:
        raise _RowProblem(f"query {query_id!r} has empty 'text'")
    extra = {"qrels": {}} | {key: value for key, value in row.items() if key not in ("_id", "text")}
    return Case(
        case_id=query_id,
        suite=suite,
        benchmark_type=BEIR_BENCHMARK_TYPE,
        source_file=str(path),
        index=number - 1,
        query=text,
        extra=extra,
    )


# --------------------------------------------------------------------------------------------------
# Qrels TSV
# --------------------------------------------------------------------------------------------------


def _fields(text: str) -> list[str]:
    """Split on tabs when the line has one (ids may then hold spaces), else on any whitespace."""
    return [part.strip() for part in text.split("\t")] if "\t" in text else text.split()


def _is_int(text: str) -> bool:
    """Whether ``text`` is a plain ASCII integer (``int()`` alone would also take ``1_0`` or ``" 1"``)."""
    return _INTEGER.fullmatch(text) is not None


def _is_number(text: str) -> bool:
    """Whether ``text`` parses as a float (a header's last field does not; a bad grade like ``1.5`` does)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_qrels(path: Path, corpus: _IdRows[Document], queries: _IdRows[Case]) -> _QrelsRead:
    """Read a qrels TSV (header and layout detected), keeping judgements of loaded queries and documents."""
    read = _QrelsRead()
    for number, text in _lines(path):
        fields = _fields(text)
        if read.lines == 0 and read.header is None and not _is_number(fields[-1]):
            read.header = fields
            continue
        read.lines += 1
        try:
            query_id, doc_id, grade = _qrels_entry(fields, read)
            _check_judgement(query_id, doc_id, read, corpus, queries)
        except _RowProblem as problem:
            reason = str(problem)
            read.problems[reason.split(":", 1)[0]] += 1
            query_id = _safe_query_id(fields)
            read.rejects.append(_reject(path, number, query_id, reason))
            if query_id in queries.items:
                read.rejected_lines_of.setdefault(query_id, []).append(number)
            continue
        read.qrels.setdefault(query_id, {})[doc_id] = grade
        read.kept += 1
        read.grades[grade] += 1
    return read


def _safe_query_id(fields: list[str]) -> str | None:
    """The line's first field as the reject's case id, when there is one."""
    return fields[0] if fields and fields[0] else None


def _qrels_entry(fields: list[str], read: _QrelsRead) -> tuple[str, str, int]:
    """``(query_id, doc_id, grade)`` from one line's fields; the first 3/4-field line fixes the layout."""
    if read.columns is None and len(fields) in (3, 4):
        read.columns = len(fields)
    expected = read.columns or 3
    if len(fields) != expected:
        layout = "query-id corpus-id score" if expected == 3 else "query-id iteration corpus-id score"
        raise _RowProblem(f"wrong column count: expected {expected} ({layout}), got {len(fields)}")
    query_id, doc_id, grade = (fields[0], fields[1], fields[2]) if expected == 3 else (fields[0], fields[2], fields[3])
    if not query_id or not doc_id:
        raise _RowProblem("empty id: query-id and corpus-id must not be empty")
    if not _is_int(grade):
        raise _RowProblem(f"non-integer grade: {grade!r}")
    if len(grade.lstrip("+-")) > 10 or not MIN_GRADE <= int(grade) <= MAX_GRADE:
        raise _RowProblem(f"grade out of range: {_cut(grade)} (grades are {MIN_GRADE:,} to {MAX_GRADE:,})")
    return query_id, doc_id, int(grade)


def _cut(text: str, limit: int = 40) -> str:
    """``text`` quoted, cut to ``limit`` characters with its length when longer."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"


def _check_judgement(query_id: str, doc_id: str, read: _QrelsRead, corpus: _IdRows[Document], queries: _IdRows[Case]) -> None:
    """Raise _RowProblem when the query or document is not loaded, or the pair was already judged."""
    if query_id not in queries.items:
        raise _RowProblem(f"unknown query: {query_id!r} {_absence(query_id, queries)}")
    if doc_id not in corpus.items:
        raise _RowProblem(f"unknown document: {doc_id!r} {_absence(doc_id, corpus)}")
    previous = read.qrels.get(query_id, {}).get(doc_id)
    if previous is not None:
        pair = f"({query_id!r}, {doc_id!r})"
        raise _RowProblem(f"duplicate judgement: {pair} already judged (grade {previous}); later line rejected")


def _absence(row_id: str, rows: _IdRows[Any]) -> str:
    """Why an id is not loaded: rejected at a line of its file, or simply absent."""
    if row_id in rows.rejected_line_of:
        return f"was rejected in {rows.path.name} (line {rows.rejected_line_of[row_id]})"
    return f"is not in {rows.path.name}"


# --------------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------------


def _judged_cases(queries: _IdRows[Case], qrels: Qrels) -> list[Case]:
    """Queries that have qrels in the split, in file order, with their qrels attached."""
    cases = [case for query_id, case in queries.items.items() if query_id in qrels]
    for case in cases:
        case.extra["qrels"] = dict(qrels[case.case_id])
    return cases


def _without_valid_judgement(queries: _IdRows[Case], judged: _QrelsRead, qrels_path: Path) -> list[Rejected]:
    """A reject per loaded query the split judges only in rejected lines (it would vanish otherwise)."""
    rejects = []
    for query_id, lines in judged.rejected_lines_of.items():
        if query_id in judged.qrels:
            continue
        shown = ", ".join(map(str, lines[:5])) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
        problem = (
            f"query {query_id!r} has no valid judgement in {qrels_path}: its {len(lines)} qrels line(s) there were rejected (line {shown})"
        )
        rejects.append(_reject(queries.path, queries.line_of[query_id], query_id, problem))
    return sorted(rejects, key=lambda r: r.index or 0)


def _report(
    root: Path,
    split: str,
    corpus: _IdRows[Document],
    queries: _IdRows[Case],
    judged: _QrelsRead,
    cases: list[Case],
    unjudged: int,
) -> dict[str, Any]:
    """Counts that add up (see the module docstring)."""
    without_relevant = sum(1 for case in cases if not any(g >= 1 for g in case.extra["qrels"].values()))
    not_in_split = len(queries.items) - len(cases) - unjudged
    return {
        "directory": str(root),
        "split": split,
        "corpus_lines": corpus.lines,
        "documents": len(corpus.items),
        "corpus_rejected": len(corpus.rejects),
        "query_lines": queries.lines,
        "queries": len(queries.items),
        "queries_rejected": len(queries.rejects),
        "cases": len(cases),
        "queries_without_valid_judgement": unjudged,
        "queries_without_qrels": not_in_split,
        "split_queries_read": queries.lines - not_in_split,
        "split_queries_rejected": len(queries.rejects) + unjudged,
        "cases_without_relevant": without_relevant,
        "qrels_header": judged.header,
        "qrels_columns": judged.columns,
        "qrels_lines": judged.lines,
        "qrels_kept": judged.kept,
        "qrels_rejected": len(judged.rejects),
        "qrels_rejected_by_reason": dict(judged.problems),
        "qrels_grades": dict(sorted(judged.grades.items())),
    }
