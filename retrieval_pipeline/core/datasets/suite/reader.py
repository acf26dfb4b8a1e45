"""Load an ADK-style benchmark suite YAML into validated :class:`Case` rows and :class:`Rejected` rows.

A suite file is a mapping with a ``benchmarks`` list. Each row carries its own ``benchmark_type``:

* ``api_understanding``: ``question`` plus gold FQNs in ``answers[].fully_qualified_class_name``;
* ``fix_error``: ``description`` plus ``fixed_file`` / ``test_file`` / ``unfixed_file`` paths;
* ``multiple_choice``: ``question``, ``options`` (letter -> text) and ``correct_answer``.

File-level problems raise :class:`InputError`; row-level problems become :class:`Rejected` rows, so
``len(cases) + len(rejects) == total`` always holds.

Suites are data, not configuration: a ``fixed_file`` / ``test_file`` / ``unfixed_file`` path must resolve
(``..``, absolute paths and symlinks followed) inside the files root, which is the suite's own folder
unless the dataset registry names one (``suite_files_root``). A path that leaves it rejects the case
with a reason naming the file, the case and the path; the file is never opened.

A ``multiple_choice`` row may carry ``code_snippet_ref: {file, section}`` (the "diagnose setup errors" and
"predict runtime behaviour" suites): ``file`` is relative to the files root, like the fix_error paths, and the
section is the text between the mkdocs-snippets markers ``# --8<-- [start:NAME]`` and ``# --8<-- [end:NAME]``
in that file (:func:`load_snippet`; a section with no end marker runs to the next marker or the file's next
test). The snippet, dedented, goes to ``Case.extra["code_snippet"]``, the file's imports and top-level definitions
outside it to ``Case.extra["code_snippet_context"]`` (:func:`snippet_context`); a malformed ref, a file that is
missing or leaves the root, or a section that is missing, empty or repeated rejects the case with a reason naming
the file and the section.

A case ``id`` becomes a query id in TREC run and qrels files and in the pipeline's tables, so it is
checked at load (:func:`case_id_problem`), not when ``evaluation_exports`` writes it: a string or an
integer (not a list, mapping, float or boolean), non-empty once stripped, without whitespace or other
control characters inside (TREC files are whitespace-separated; see
:func:`retrieval_pipeline.core.evaluation.exports.trec_writer.check_trec_id`) and at most :data:`MAX_CASE_ID_CHARS` characters.
A row with a bad id is rejected naming the file and the row's index.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.astutil import bound_names
from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import PathRefused, read_text_bounded, resolve_inside, shown
from retrieval_pipeline.core.common.types import BENCHMARK_TYPES, Case, Rejected
from retrieval_pipeline.core.common.yaml_file import read_yaml

#: YAML key -> role name used in ``Case.files`` and ``extra["missing_files"]``.
FIX_FILE_ROLES: dict[str, str] = {"fixed_file": "fixed", "test_file": "test", "unfixed_file": "unfixed"}

#: The key a multiple-choice row names its code snippet under, and the ``Case.extra`` key the snippet goes to.
SNIPPET_REF_KEY = "code_snippet_ref"
SNIPPET_KEY = "code_snippet"
#: The ``Case.extra`` key of the snippet file's module context (:func:`snippet_context`).
SNIPPET_CONTEXT_KEY = "code_snippet_context"
#: The ``Case.extra`` key of the names the snippet's suite defines outside its module context (:func:`suite_names`).
SNIPPET_SUITE_NAMES_KEY = "code_snippet_suite_names"
#: Files beside a snippet file read for :func:`suite_names`, at most.
MAX_SUITE_FILES = 64
#: mkdocs-snippets section markers (``# --8<-- [start:NAME]``), any comment prefix and spacing.
_SECTION_MARKER = re.compile(r"^\s*(?:#|//|<!--)?\s*-{2}8<-{2}\s*\[(?P<edge>start|end):(?P<name>[^\]]+)\]")

_QUERY_KEY = {"api_understanding": "question", "multiple_choice": "question", "fix_error": "description"}
#: Keys turned into typed ``Case`` fields, per type; every other key is kept in ``Case.extra``.
_COMMON_KEYS = {"id", "benchmark_type", "explanation"}
_TYPED_KEYS = {
    "api_understanding": _COMMON_KEYS | {"question"},
    "multiple_choice": _COMMON_KEYS | {"question", "options", "correct_answer"},
    "fix_error": _COMMON_KEYS | {"description"} | set(FIX_FILE_ROLES),
}

#: Longest case id accepted (ids end up in file names of reports, TREC lines and table cells).
MAX_CASE_ID_CHARS = 200
#: Longest question / description accepted, in characters (the NQ reader caps its cells at the same size).
MAX_QUERY_CHARS = 100_000
#: Most characters of text (keys and scalars, aliases counted each time they appear) in a case's extra fields.
MAX_EXTRA_CHARS = 1_000_000
#: Largest ``code_snippet_ref`` file read, in bytes (fix_error code files have the same cap).
MAX_SNIPPET_BYTES = 1_000_000


@dataclass
class SuiteLoad:
    """The outcome of loading one suite file: accepted cases, rejected rows, and the row count."""

    cases: list[Case]
    rejects: list[Rejected]
    total: int


class _CaseProblem(Exception):
    """A row-level validation failure; its message names the offending field."""


def load_suite(
    path: str | Path,
    *,
    suite: str | None = None,
    files_root: str | Path | None = None,
) -> SuiteLoad:
    """Load and validate one suite YAML file.

    Args:
        path: The suite YAML file (``{benchmarks: [...]}``).
        suite: The suite name; defaults to the name of the file's parent directory.
        files_root: Directory that ``fix_error`` file paths are relative to and must stay inside; defaults to
            the suite file's directory.

    Returns:
        The accepted cases and rejected rows, with ``len(cases) + len(rejects) == total``.

    Raises:
        InputError: The file is unreadable, is not valid YAML, or has no top-level ``benchmarks`` list.
    """
    path = Path(path)
    rows = read_benchmark_rows(path)
    suite_name = suite or path.resolve().parent.name
    root = Path(files_root) if files_root is not None else path.resolve().parent

    cases: list[Case] = []
    rejects: list[Rejected] = []
    first_seen: dict[str, int] = {}
    for index, raw in enumerate(rows):
        case_id = _raw_id(raw)
        try:
            _check_unique(case_id, index, first_seen)
            cases.append(_build_case(raw, index, path, suite_name, root))
        except _CaseProblem as problem:
            rejects.append(_reject(path, index, case_id, str(problem)))
    return SuiteLoad(cases=cases, rejects=rejects, total=len(rows))


def read_benchmark_rows(path: Path) -> list[Any]:
    """Read a suite file and return its raw ``benchmarks`` list.

    Raises:
        InputError: Unreadable file, YAML syntax error (with line and column), or wrong top-level shape.
    """
    data = read_yaml(path, "suite file")
    if not isinstance(data, Mapping) or not isinstance(data.get("benchmarks"), list):
        raise InputError("top level must be a mapping with a 'benchmarks' list", path=str(path))
    return list(data["benchmarks"])


def _raw_id(raw: Any) -> str | None:
    """Return the row's id as a stripped string, or None when missing, not a mapping, or not a usable id."""
    if not isinstance(raw, Mapping) or case_id_problem(raw.get("id")) is not None:
        return None
    return str(raw["id"]).strip()


def case_id_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a case id (the message names ``'id'``), or None when it can.

    Args:
        value: The row's ``id`` as YAML gave it.

    Returns:
        None for a string or integer that is non-empty once stripped, has no whitespace or control
        character inside and at most :data:`MAX_CASE_ID_CHARS` characters; else the reason.
    """
    if value is None:
        return "missing or empty 'id'"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"'id' must be a string or an integer, got {type(value).__name__} {shown(value)}"
    text = str(value).strip()
    if not text:
        return "missing or empty 'id'"
    if len(text) > MAX_CASE_ID_CHARS:
        return f"'id' {shown(text)} is longer than {MAX_CASE_ID_CHARS} characters"
    if any(char.isspace() for char in text):
        return f"'id' {shown(text)} contains whitespace; ids are written to whitespace-separated TREC files"
    if not text.isprintable():
        return f"'id' {shown(text)} contains a control character"
    return None


def _check_unique(case_id: str | None, index: int, first_seen: dict[str, int]) -> None:
    """Register ``case_id``; a repeat is a problem naming the first position."""
    if case_id is None:
        return
    if case_id in first_seen:
        raise _CaseProblem(f"duplicate 'id' {case_id!r} (first seen at index {first_seen[case_id]})")
    first_seen[case_id] = index


def _reject(path: Path, index: int, case_id: str | None, problem: str) -> Rejected:
    """Build a Rejected whose reason names the file and the case."""
    who = f"case {case_id!r} (index {index})" if case_id else f"case at index {index}"
    return Rejected(source_file=str(path), case_id=case_id, index=index, reason=f"file {path}, {who}: {problem}")


def _build_case(raw: Any, index: int, path: Path, suite: str, files_root: Path) -> Case:
    """Validate one raw row and turn it into a Case (raises _CaseProblem)."""
    if not isinstance(raw, Mapping):
        raise _CaseProblem(f"case is not a mapping (got {type(raw).__name__})")
    problem = case_id_problem(raw.get("id"))
    if problem is not None:
        raise _CaseProblem(problem)
    case_id = str(raw["id"]).strip()
    benchmark_type = raw.get("benchmark_type")
    if benchmark_type not in BENCHMARK_TYPES:
        expected = ", ".join(BENCHMARK_TYPES)
        raise _CaseProblem(f"unknown 'benchmark_type' {benchmark_type!r} (expected one of {expected})")
    explanation = raw.get("explanation")
    case = Case(
        case_id=case_id,
        suite=suite,
        benchmark_type=benchmark_type,
        source_file=str(path),
        index=index,
        query=_required_text(raw, _QUERY_KEY[benchmark_type]),
        explanation=str(explanation) if explanation is not None else None,
        extra=_extra_fields(raw, _TYPED_KEYS[benchmark_type]),
    )
    _FILLERS[benchmark_type](case, raw, files_root)
    return case


def _extra_fields(raw: Mapping[Any, Any], typed: set[str]) -> dict[str, Any]:
    """The row's other keys, kept in ``Case.extra``: they travel as JSON text, so every key, at any depth,
    must be text, and their text is bounded (aliases are counted each time they appear).
    """
    extra = {k: v for k, v in raw.items() if k not in typed}
    budget = [MAX_EXTRA_CHARS]
    for key, value in extra.items():
        _check_extra(value, [str(key)] if isinstance(key, str) else [], key, budget)
    return extra


def _check_extra(value: Any, where: list[str], key: Any, budget: list[int]) -> None:
    """Raise _CaseProblem for a non-text key (naming where it is) or extra fields past :data:`MAX_EXTRA_CHARS`."""
    if not isinstance(key, str):
        inside = f" in '{'.'.join(where)}'" if where else ""
        raise _CaseProblem(f"key {shown(key)} ({type(key).__name__}){inside} is not text: quote it (extra fields are stored as JSON)")
    budget[0] -= len(key)
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_extra(v, [*where, str(k)] if isinstance(k, str) else where, k, budget)
    elif isinstance(value, list):
        for item in value:
            _check_extra(item, where, "", budget)
    else:
        budget[0] -= len(value) if isinstance(value, str) else len(str(value))
    if budget[0] < 0:
        raise _CaseProblem(f"extra fields hold more than {MAX_EXTRA_CHARS:,} characters (at '{'.'.join(where)}')")


def _required_text(raw: Mapping[str, Any], key: str) -> str:
    """Return ``raw[key]`` as stripped text, or raise naming the key when missing/empty."""
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise _CaseProblem(f"'{key}' must be text, got {type(value).__name__}")
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise _CaseProblem(f"missing or empty '{key}'")
    if len(text) > MAX_QUERY_CHARS:
        raise _CaseProblem(f"'{key}' is {len(text):,} characters, over the limit of {MAX_QUERY_CHARS:,}")
    return text


def _fill_api_understanding(case: Case, raw: Mapping[str, Any], files_root: Path) -> None:
    """Attach gold FQNs; a case without any is a problem."""
    case.gold_fqns = gold_fqns_of(raw.get("answers"))
    if not case.gold_fqns:
        raise _CaseProblem("no gold FQN in 'answers[].fully_qualified_class_name'")


def gold_fqns_of(answers: Any) -> list[str]:
    """Collect ``fully_qualified_class_name`` values (string or list) in order, de-duplicated."""
    found: list[str] = []
    for answer in answers if isinstance(answers, list) else []:
        value = answer.get("fully_qualified_class_name") if isinstance(answer, Mapping) else None
        for fqn in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            text = fqn.strip() if isinstance(fqn, str) else ""
            if text and text not in found:
                found.append(text)
    return found


def _fill_multiple_choice(case: Case, raw: Mapping[str, Any], files_root: Path) -> None:
    """Attach options and the correct letter, checking the letter is one of the options."""
    options = raw.get("options")
    if not isinstance(options, Mapping):
        raise _CaseProblem(f"'options' must be a mapping letter -> text (got {type(options).__name__})")
    case.options = {str(letter).strip(): str(text) for letter, text in options.items()}
    if len(case.options) < 2:
        raise _CaseProblem(f"'options' has {len(case.options)} entries, at least 2 are needed")
    correct = raw.get("correct_answer")
    letter = str(correct).strip() if correct is not None else ""
    if letter not in case.options:
        raise _CaseProblem(f"'correct_answer' {correct!r} is not among option letters {sorted(case.options)}")
    case.correct_answer = letter
    if raw.get(SNIPPET_REF_KEY) is not None:
        case.extra[SNIPPET_KEY] = _snippet_of(raw[SNIPPET_REF_KEY], files_root)
        ref = raw[SNIPPET_REF_KEY]
        path = _resolve_path(ref["file"].strip(), files_root, f"{SNIPPET_REF_KEY}.file")
        context = snippet_context(path, ref["section"].strip())
        if context:
            case.extra[SNIPPET_CONTEXT_KEY] = context
        elsewhere = suite_names(path, context)
        if elsewhere:
            case.extra[SNIPPET_SUITE_NAMES_KEY] = elsewhere


def _snippet_of(ref: Any, files_root: Path) -> str:
    """The snippet a ``code_snippet_ref`` names (raises _CaseProblem naming the file and the section)."""
    if not isinstance(ref, Mapping) or not all(isinstance(ref.get(k), str) and ref[k].strip() for k in ("file", "section")):
        raise _CaseProblem(f"'{SNIPPET_REF_KEY}' must be a mapping with non-empty 'file' and 'section' (got {shown(ref)})")
    file, section = ref["file"].strip(), ref["section"].strip()
    path = _resolve_path(file, files_root, f"{SNIPPET_REF_KEY}.file")
    try:
        return load_snippet(path, section)
    except SnippetError as error:
        raise _CaseProblem(f"'{SNIPPET_REF_KEY}' file {file!r} section {section!r}: {error}") from None


class SnippetError(ValueError):
    """A snippet that cannot be read: the file is missing or unreadable, or the section is not delimited once."""


#: Where a section without an end marker stops, at the latest: a test of the file's own suite (it checks the answer).
_SUITE_TEST = re.compile(r"^(?:async\s+)?def\s+test|^class\s+Test")


#: A decorator line (``@pytest.mark.asyncio``): it belongs to the definition below it.
_DECORATOR = re.compile(r"^\s*@")


def _open_end(lines: list[str], start: int) -> int:
    """Where a section with no end marker ends: at the next section marker, the file's next top-level test
    (``def test_*``, ``class Test*``) with the decorators above it (``@pytest.mark.asyncio``), or the end of the file."""
    for i in range(start + 1, len(lines)):
        if _SECTION_MARKER.match(lines[i]):
            return i
        if _SUITE_TEST.match(lines[i]):
            while i - 1 > start and _DECORATOR.match(lines[i - 1]):
                i -= 1
            return i
    return len(lines)


def _section_bounds(lines: list[str], section: str, path: Path) -> tuple[int, int, bool]:
    """``(start marker, end, terminated)``: the line indexes around the section (``end``: its end marker, or where
    an unterminated section stops, :func:`_open_end`). Raises SnippetError: no start, or more than one."""
    edges = [
        (i, m.group("edge"))
        for i, m in ((i, _SECTION_MARKER.match(line)) for i, line in enumerate(lines))
        if m and m.group("name").strip() == section
    ]
    starts = [i for i, edge in edges if edge == "start"]
    if not starts:
        raise SnippetError(f"no section {section!r} in {path} (no '# --8<-- [start:{section}]' marker)")
    if len(starts) > 1:
        raise SnippetError(f"section {section!r} starts {len(starts)} times in {path} (lines {', '.join(str(i + 1) for i in starts)})")
    ends = [i for i, edge in edges if edge == "end" and i > starts[0]]
    return (starts[0], ends[0], True) if ends else (starts[0], _open_end(lines, starts[0]), False)


def load_snippet(path: str | Path, section: str) -> str:
    """The text between ``# --8<-- [start:section]`` and ``# --8<-- [end:section]`` in ``path``, dedented.

    Markers of other sections inside it are dropped (mkdocs-snippets nests sections that way). A section with a
    start marker and no end marker (some upstream files have them) runs to the next section marker, the file's
    next top-level test (``def test_*``: the suite's check of the answer, not the code under test) or the end of
    the file.

    Raises:
        SnippetError: The file is missing or unreadable, or the section has no start, starts twice, or is empty.
    """
    path = Path(path)
    if not path.is_file():
        raise SnippetError(f"the file {path} does not exist")
    try:
        lines = read_text_bounded(path, "code snippet file", MAX_SNIPPET_BYTES).splitlines()
    except PathRefused as refused:
        raise SnippetError(refused.reason) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnippetError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    start, end, _ = _section_bounds(lines, section, path)
    body = [line for line in lines[start + 1 : end] if not _SECTION_MARKER.match(line)]
    text = textwrap.dedent("\n".join(body)).strip("\n")
    if not text.strip():
        raise SnippetError(f"section {section!r} in {path} is empty")
    return text + "\n"


#: Top-level statements of a snippet file that make up the module context a section runs in.
_CONTEXT_NODES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.Try)


def snippet_context(path: str | Path, section: str) -> str:
    """The module context a section of ``path`` runs in: the file's imports and top-level definitions outside it.

    A suite's section usually holds only the code under test (``def code_under_test(): ...``); the names it uses
    are imported at the top of the file. The context is every top-level ``import``, ``def``, ``class``,
    assignment and ``try`` block (an import with a fallback) of the file that lies outside the section, in file
    order; calls, ``if`` blocks, other statements and the file's own tests (``def test_*``: they check the answer)
    are left out. Empty when the file does not parse (with the
    section's lines left out) or the section is not found.
    """
    try:
        lines = read_text_bounded(path, "code snippet file", MAX_SNIPPET_BYTES).splitlines()
        start, end, _ = _section_bounds(lines, section, Path(path))
    except (OSError, UnicodeDecodeError, SnippetError, PathRefused):
        return ""
    kept = ["" if start <= i <= end else line for i, line in enumerate(lines)]
    source = "\n".join(kept)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    out: list[str] = []
    for node in tree.body:
        if not isinstance(node, _CONTEXT_NODES) or node.end_lineno is None or _is_suite_test(node):
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        out.append("\n".join(kept[start - 1 : node.end_lineno]))
    return "\n\n".join(out) + "\n" if out else ""


def suite_names(path: str | Path, context: str) -> list[str]:
    """The names the snippet's suite defines that its module context does not: every name bound anywhere (at any
    depth) in the snippet's file and the ``.py`` files beside it (at most :data:`MAX_SUITE_FILES`), less the context's.

    A ``NameError`` on one of them shows only that the snippet is an excerpt (the name is defined in another
    section or test), so the verifier decides nothing from it.
    """
    path = Path(path)
    found: set[str] = set()
    for file in [path, *sorted(p for p in path.parent.glob("*.py") if p != path)][:MAX_SUITE_FILES]:
        try:
            found |= bound_names(read_text_bounded(file, "code snippet file", MAX_SNIPPET_BYTES))
        except (OSError, UnicodeDecodeError, PathRefused):
            continue
    return sorted(found - bound_names(context))


def _is_suite_test(node: ast.stmt) -> bool:
    """A test the file's own suite collects (``def test_*``, ``class Test*``): it checks the answer, it is no context."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test")
    return isinstance(node, ast.ClassDef) and node.name.startswith("Test")


def _fill_fix_error(case: Case, raw: Mapping[str, Any], files_root: Path) -> None:
    """Resolve solution/test file paths; existing ones go to ``files``, absent ones to ``extra``.

    A path that resolves outside ``files_root`` is a problem (the case is rejected; nothing is read).
    """
    missing: list[dict[str, str]] = []
    for key, role in FIX_FILE_ROLES.items():
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise _CaseProblem(f"'{key}' must be a non-empty path string (got {value!r})")
        resolved = _resolve_path(value.strip(), files_root, key)
        if resolved.is_file():
            case.files[role] = str(resolved)
        else:
            missing.append({"role": role, "path": str(resolved)})
    if missing:
        case.extra["missing_files"] = missing


def _resolve_path(value: str, files_root: Path, key: str) -> Path:
    """Return ``value`` resolved against ``files_root``; a path leading outside it is a problem."""
    try:
        return resolve_inside(files_root, value, key)
    except PathRefused as refused:
        raise _CaseProblem(refused.reason) from None


_FILLERS = {
    "api_understanding": _fill_api_understanding,
    "multiple_choice": _fill_multiple_choice,
    "fix_error": _fill_fix_error,
}
