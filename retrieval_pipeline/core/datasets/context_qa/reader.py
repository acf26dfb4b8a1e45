"""Load context-QA data: question/answer pairs that carry the expected context text, not chunk ids.

The file is a JSON list of objects with at least ``question`` and ``context`` (the passage the answer
came from), usually ``answer`` and any number of other fields (ids, annotation metadata, stale chunk
offsets); all of them are kept in ``Case.extra``. Relevance is judged later by similarity between the
expected context and the corpus chunks (:mod:`retrieval_pipeline.core.datasets.context_qa.similarity`); the corpus
documents are read by :mod:`~retrieval_pipeline.core.datasets.context_qa.documents`.

Quirks handled, each counted in :attr:`ContextQALoad.report`:

* **Parser junk.** Markdown-AST reprs leaked into the text, e.g. ``[<RawText children='Suicide'>]``.
  Any ``<Name children=...>`` node (children a quoted Python string or a ``[...]`` list of nodes,
  optionally inside ``[...]``) is replaced by its text, children concatenated. Junk that does not
  parse is left as it is and counted as ``junk_unparsed``.
* **Repeated questions.** The same question (after whitespace folding) with a different context is
  kept: each row has its own id ``qa_<row:04d>`` and ``extra["repeat_of"]`` names the first one.
* **Exact duplicates.** The same question and the same context (after junk cleaning and whitespace
  folding) as an earlier row: the later row is rejected, naming the earlier one.
* **Empty fields.** A missing, non-string or empty ``question`` or ``context`` is rejected with the
  file and the row.
* **Unreadable rows.** A row holding an integer of more than :data:`MAX_INT_DIGITS` digits, or nested too
  deeply for the JSON parser, is rejected with the file, the row and the line; the other rows are read.

File-level problems (unreadable, malformed JSON, not a list) raise :class:`InputError`. Every row ends
up a case or a reject: ``len(cases) + len(rejects) == total``.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case, Rejected

BENCHMARK_TYPE = "context_qa"
#: Fields read as the answer, first present wins.
ANSWER_FIELDS = ("answer", "answers", "ground_truth", "expected_answer", "reference_answer")
#: ``extra`` keys set by the loader; a source field with the same name is kept as ``source_<name>``
#: (a source ``answer`` field is not renamed: it is what ``extra["answer"]`` holds).
_LOADER_KEYS = ("expected_context", "raw_context", "cleaning", "repeat_of")
#: The counters of :attr:`ContextQALoad.report`, in order, with what each one counts.
REPORT_COUNTERS: dict[str, str] = {
    "total": "rows in the file",
    "accepted": "rows that became cases",
    "rejected": "rows that did not (the sum of the five reject counters below)",
    "empty_question": "rejected: question missing, not a string, or empty",
    "empty_context": "rejected: context missing, not a string, or empty (also after junk removal)",
    "not_an_object": "rejected: the row is not a JSON object",
    "exact_duplicates": "rejected: same question and context as an earlier row",
    "unreadable_rows": "rejected: an integer of more than 4,300 digits, or nested too deeply to parse",
    "repeated_questions": "cases whose question an earlier case already asked (with another context)",
    "repeated_question_strings": "distinct questions asked by more than one case",
    "junk_cleaned_rows": "cases with parser junk replaced in the question or context",
    "junk_fragments": "parser-junk fragments replaced, over all cases",
    "junk_unparsed": "junk-like fragments that did not parse and were kept as they are",
    "no_answer": "cases with no answer field",
}
REPORT_KEYS = tuple(REPORT_COUNTERS)


@dataclass
class ContextQALoad:
    """The outcome of loading one context-QA file.

    Attributes:
        cases: One case per accepted QA pair, in file order.
        rejects: Rows that were not accepted, each with its reason.
        total: Rows in the file (``len(cases) + len(rejects)``).
        report: Quirk counters (see :data:`REPORT_COUNTERS`).
    """

    cases: list[Case]
    rejects: list[Rejected]
    total: int
    report: dict[str, int] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# Parser junk: ``[<RawText children='X'>]`` and friends
# --------------------------------------------------------------------------------------------------

#: Deepest ``[<Node children=[<Node ...`` nesting that is parsed as junk (deeper is left as it is, counted unparsed).
MAX_JUNK_DEPTH = 50
#: Most digits of a JSON integer read (Python refuses to convert longer ones).
MAX_INT_DIGITS = 4_300

_JUNK_START = re.compile(r"\[?\s*<[A-Za-z_]\w* children=")
_NODE_HEAD = re.compile(r"<([A-Za-z_]\w*) children=")
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_SEPARATOR = re.compile(r",\s*")
_SPACE = re.compile(r"\s*")


class _NotJunk(Exception):
    """The text at this position does not parse as an AST repr."""


def _parse_children(text: str, pos: int, depth: int) -> tuple[str, int]:
    """Parse a quoted string or a ``[node, ...]`` list at ``pos``; return its text and the end."""
    quoted = _QUOTED.match(text, pos)
    if quoted:
        return ast.literal_eval(quoted.group()), quoted.end()
    if text.startswith("[", pos):
        return _parse_list(text, pos, depth + 1)
    raise _NotJunk


def _parse_node(text: str, pos: int, depth: int = 0) -> tuple[str, int]:
    """Parse ``<Name children=...>`` at ``pos``."""
    head = _NODE_HEAD.match(text, pos)
    if head is None:
        raise _NotJunk
    inner, end = _parse_children(text, head.end(), depth)
    if not text.startswith(">", end):
        raise _NotJunk
    return inner, end + 1


def _parse_list(text: str, pos: int, depth: int = 0) -> tuple[str, int]:
    """Parse ``[node, node, ...]`` at ``pos`` (the ``[``); the nodes' texts are concatenated."""
    if depth > MAX_JUNK_DEPTH:
        raise _NotJunk
    parts: list[str] = []
    pos = _SPACE.match(text, pos + 1).end()
    while not text.startswith("]", pos):
        if parts:
            separator = _SEPARATOR.match(text, pos)
            if separator is None:
                raise _NotJunk
            pos = separator.end()
        inner, pos = _parse_node(text, pos, depth)
        parts.append(inner)
        pos = _SPACE.match(text, pos).end()
    return "".join(parts), pos + 1


def _parse_junk(text: str, start: int) -> tuple[str, int, int]:
    """Parse one junk expression at ``start``: a ``[...]`` node list, else the bare node inside it.

    Returns ``(text, begin, end)``: the replacement and the span ``[begin, end)`` it replaces.
    """
    if text.startswith("[", start):
        try:
            inner, end = _parse_list(text, start)
            return inner, start, end
        except (_NotJunk, ValueError, SyntaxError):
            pass
    begin = text.index("<", start)
    inner, end = _parse_node(text, begin)
    return inner, begin, end


def clean_parser_junk(text: str) -> tuple[str, int, int]:
    """Replace leaked markdown-AST reprs by their text.

    ``[<RawText children='Suicide'>]`` → ``Suicide``; ``[<Strong children=[<RawText children='a'>]>,
    <RawText children=' b'>]`` → ``a b``. Strings are unescaped as Python literals. When a ``[`` does
    not open a node list, only the bare ``<Name children=...>`` node after it is replaced.

    Args:
        text: The raw text.

    Returns:
        ``(cleaned, fragments_replaced, fragments_left_unparsed)``.
    """
    out, pos, replaced, unparsed = [], 0, 0, 0
    for match in _JUNK_START.finditer(text):
        if match.start() < pos:
            continue
        try:
            inner, begin, end = _parse_junk(text, match.start())
        except (_NotJunk, ValueError, SyntaxError):
            unparsed += 1
            continue
        out += [text[pos:begin], inner]
        pos, replaced = end, replaced + 1
    out.append(text[pos:])
    return "".join(out), replaced, unparsed


# --------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Whitespace-folded form used to detect repeats: runs of whitespace become one space."""
    return " ".join(text.split())


class _RowProblem(Exception):
    """A row-level failure; ``kind`` is the report counter it increments."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _text_field(row: dict[str, Any], key: str, index: int) -> str:
    value = row.get(key)
    if value is None:
        raise _RowProblem(f"empty_{key}", f"row {index}: missing {key!r}")
    if not isinstance(value, str):
        raise _RowProblem(f"empty_{key}", f"row {index}: {key!r} must be a string, got {type(value).__name__}")
    return value


def _cleaned(row: dict[str, Any], key: str, index: int, counts: Counter[str], cleaning: list[str]) -> str:
    """A text field with junk replaced and outer whitespace stripped; rejects it when empty.

    Notes on what was changed go to ``cleaning``, junk counters to ``counts``.
    """
    raw = _text_field(row, key, index)
    text, replaced, unparsed = clean_parser_junk(raw)
    if replaced:
        cleaning.append(f"{key}: replaced {replaced} parser-junk fragment(s) like [<RawText children='X'>] by X")
        counts["junk_fragments"] += replaced
    if unparsed:
        cleaning.append(f"{key}: {unparsed} parser-junk-like fragment(s) did not parse and were kept as they are")
        counts["junk_unparsed"] += unparsed
    if text != text.strip():
        cleaning.append(f"{key}: stripped surrounding whitespace")
    if not text.strip():
        why = " after removing parser junk" if raw.strip() else ""
        raise _RowProblem(f"empty_{key}", f"row {index}: empty {key!r}{why}")
    return text.strip()


def _answer(row: dict[str, Any]) -> Any:
    return next((row[key] for key in ANSWER_FIELDS if row.get(key) not in (None, "", [])), None)


def _extra(row: dict[str, Any], context: str, answer: Any, cleaning: list[str]) -> dict[str, Any]:
    extra: dict[str, Any] = {
        (f"source_{key}" if key in _LOADER_KEYS else key): value
        for key, value in row.items()
        if key not in ("question", "context", "answer")
    }
    extra |= {"expected_context": context, "raw_context": row["context"], "answer": answer, "cleaning": cleaning}
    return extra


@dataclass
class _Seen:
    """First case id per folded question and per folded (question, context) pair."""

    questions: dict[str, str] = field(default_factory=dict)
    pairs: dict[tuple[str, str], str] = field(default_factory=dict)


def _case(row: Any, index: int, path: str, suite: str, seen: _Seen, report: Counter[str]) -> Case:
    """Validate one row into a case, or raise :class:`_RowProblem`.

    Repeats are recorded in ``seen``; the row's quirk counters are added to ``report`` only when the
    row is accepted, so the report describes the cases.
    """
    if isinstance(row, _Unreadable):
        raise _RowProblem("unreadable_rows", f"row {index} ({row.where}): {row.why}")
    if not isinstance(row, dict):
        raise _RowProblem("not_an_object", f"row {index}: expected a JSON object, got {type(row).__name__}")
    case_id, cleaning, counts = f"qa_{index:04d}", [], Counter[str]()
    question = _cleaned(row, "question", index, counts, cleaning)
    context = _cleaned(row, "context", index, counts, cleaning)
    pair_key = (_fold(question), _fold(context))
    if pair_key in seen.pairs:
        first = seen.pairs[pair_key]
        raise _RowProblem("exact_duplicates", f"row {index}: exact duplicate of {first} (same question and context)")
    seen.pairs[pair_key] = case_id
    answer = _answer(row)
    extra = _extra(row, context, answer, cleaning)
    if pair_key[0] in seen.questions:
        extra["repeat_of"] = seen.questions[pair_key[0]]
        counts["repeated_questions"] += 1
    seen.questions.setdefault(pair_key[0], case_id)
    counts["junk_cleaned_rows"] += counts["junk_fragments"] > 0
    counts["no_answer"] += answer is None
    report.update(counts)
    return Case(
        case_id=case_id,
        suite=suite,
        benchmark_type=BENCHMARK_TYPE,
        source_file=path,
        index=index,
        query=question,
        correct_answer=answer if isinstance(answer, str) else None,
        extra=extra,
    )


@dataclass
class _Unreadable:
    """A row JSON could not turn into a value: why, and where it starts (``line L``)."""

    why: str
    where: str


_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _read_rows(path: Path) -> list[Any]:
    """The top-level list's rows, one at a time: a row that cannot be built becomes :class:`_Unreadable`."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not JSON: dropped
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read context-QA file: {exc}", path=str(path)) from exc
    if not text.strip():
        raise InputError("the file is empty; expected a JSON list of QA objects", path=str(path))
    long_numbers: list[int] = []
    decoder = json.JSONDecoder(parse_int=lambda digits: _json_int(digits, long_numbers))
    pos = _JSON_SPACE.match(text).end()
    try:
        if not text.startswith("[", pos):
            got = type(decoder.decode(text)).__name__
            raise InputError(f"expected a JSON list of QA objects at the top level, got {got}", path=str(path))
        return _list_rows(text, pos, decoder, long_numbers, path)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InputError(f"malformed JSON at {where}: {exc.msg}", path=str(path)) from exc
    except RecursionError:
        raise InputError("the top level is nested too deeply to parse; expected a JSON list of QA objects", path=str(path)) from None


def _json_int(digits: str, long_numbers: list[int]) -> int | None:
    """``int(digits)``, or None with the length noted in ``long_numbers`` past :data:`MAX_INT_DIGITS` digits."""
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        long_numbers.append(len(digits.lstrip("-")))
        return None
    return int(digits)


def _list_rows(text: str, pos: int, decoder: json.JSONDecoder, long_numbers: list[int], path: Path) -> list[Any]:
    """Decode the rows of the list opening at ``pos`` one by one (same messages as ``json.loads``)."""
    rows: list[Any] = []
    pos = _JSON_SPACE.match(text, pos + 1).end()
    if text.startswith("]", pos):
        end = _JSON_SPACE.match(text, pos + 1).end()
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
        return rows
    while True:
        long_numbers.clear()
        try:
            row, end = decoder.raw_decode(text, pos)
        except RecursionError:
            row, end = _Unreadable("nested too deeply to parse", _line(text, pos)), _skip_value(text, pos)
        if long_numbers:
            row = _Unreadable(f"an integer of {max(long_numbers):,} digits, more than {MAX_INT_DIGITS:,}", _line(text, pos))
        rows.append(row)
        pos = _JSON_SPACE.match(text, end).end()
        if text.startswith(",", pos):
            pos = _JSON_SPACE.match(text, pos + 1).end()
            continue
        if not text.startswith("]", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        end = _JSON_SPACE.match(text, pos + 1).end()
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
        return rows


def _skip_value(text: str, pos: int) -> int:
    """The end of the (deeply nested) array or object at ``pos``, matched by brackets outside strings."""
    depth = 0
    for match in _JSON_BRACKET.finditer(text, pos):
        token = match.group()
        depth += token in "[{"
        depth -= token in "]}"
        if depth == 0:
            return match.end()
    raise json.JSONDecodeError("Expecting ',' delimiter", text, len(text))


def _line(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}"


def load_context_qa(path: str | Path, *, suite: str | None = None) -> ContextQALoad:
    """Load a context-QA JSON file into cases and rejects, counting every quirk handled.

    Each accepted row becomes a :class:`Case` with ``case_id = "qa_<row:04d>"`` (0-based row, so ids
    are distinct even for repeated questions), ``benchmark_type = "context_qa"``, ``query`` = the
    cleaned question, ``correct_answer`` = the answer when it is a string, and ``extra`` holding
    ``expected_context`` (cleaned), ``raw_context`` (as in the file), ``answer`` (first of
    :data:`ANSWER_FIELDS` present, else None), ``cleaning`` (notes on what was changed), ``repeat_of``
    (for a repeated question: the first case id with that question) and every other field of the row.

    Args:
        path: The JSON file (a list of objects).
        suite: Suite name for the cases; defaults to the file's parent directory name.

    Returns:
        Cases, rejects, the row count and ``report`` with the counters of :data:`REPORT_COUNTERS`
        (``repeated_question_strings`` counts distinct questions that occur in more than one case).

    Raises:
        InputError: The file cannot be read, is not valid JSON (line and column given), or is not a list.
    """
    path = Path(path)
    rows = _read_rows(path)
    suite_name = suite or path.resolve().parent.name
    report: Counter[str] = Counter()
    seen = _Seen()
    cases: list[Case] = []
    rejects: list[Rejected] = []
    for index, row in enumerate(rows):
        try:
            cases.append(_case(row, index, str(path), suite_name, seen, report))
        except _RowProblem as problem:
            report[problem.kind] += 1
            rejects.append(Rejected(str(path), f"qa_{index:04d}", index, f"file {path}, {problem}"))
    repeats = Counter(_fold(case.query) for case in cases)
    report |= {
        "total": len(rows),
        "accepted": len(cases),
        "rejected": len(rejects),
        "repeated_question_strings": sum(1 for n in repeats.values() if n > 1),
    }
    return ContextQALoad(cases, rejects, len(rows), {key: int(report[key]) for key in REPORT_KEYS})
