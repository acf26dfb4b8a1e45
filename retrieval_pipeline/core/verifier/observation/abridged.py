"""An observation caused by the snippet being abridged decides nothing.

A suite's snippet is an excerpt: it stands for "some code like this", and its author leaves out what the question
is not about. Run as it is, it can fail for that reason alone, and such a failure says nothing about the question's
premise. :func:`abridged` names the cause when what was raised comes from one of these, else returns None:

* **a placeholder used as a value**: a literal ``...`` passed or assigned as a value (``Agent(config=...)``), and
  the exception speaks of the Ellipsis; or a stub function (its body only ``pass``, ``...`` or a docstring) whose
  call is used as a value, and the exception speaks of ``None``;
* **a required argument the question does not mention**: ``TypeError: ... missing 1 required positional argument:
  'x'`` or pydantic's ``Field required`` at ``x``, where neither the question nor any option names ``x`` (as
  written, or with ``_`` read as a space). A question about a missing argument names it, at least in an option;
* **an argument the question does not mention, refused as unknown**: ``unexpected keyword argument 'x'`` or pydantic's
  ``Extra inputs are not permitted`` at ``x``, where neither the question nor any option names ``x``: the snippet passes
  something other than what the question describes (the question sets ``ttl_seconds``, the snippet ``ttl``);
* **a function run without the arguments it takes**: the section's function requires arguments (a tool context, a
  request: what the framework calls it with), the observer calls it with none, and the ``TypeError`` is that call's
  (``prepare_request() missing 1 required positional argument: 'tool_context'``), whatever the question mentions;
* **a name defined elsewhere in the suite**: a ``NameError`` for a name that the snippet's file (or a file beside
  it) defines somewhere outside the module context the snippet runs in, e.g. inside another section or test. The
  loader lists those names (``Case.extra["code_snippet_suite_names"]``) and they travel in the snippet's context as
  one comment line (:func:`suite_names_line`).

The verdict step then leaves every option of the question undecided, so neither Incorrect nor Valid rests on it.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable, Mapping
from typing import Any

from retrieval_pipeline.core.common.astutil import bound_names

#: The comment line, in a snippet's module context, that lists the names its suite defines elsewhere.
SUITE_NAMES_PREFIX = "# retrieval_pipeline: names defined elsewhere in the suite: "
#: A TypeError of a call that lacks required arguments: ``f() missing 2 required positional arguments: 'a' and 'b'``.
_MISSING_ARGUMENT = re.compile(r"missing \d+ required (?:positional |keyword-only )?arguments?: (?P<names>.+)$", re.M)
_ELLIPSIS = re.compile(r"\bellipsis\b", re.I)
_NONE = re.compile(r"\bNone(?:Type)?\b")


def abridged(observation: Mapping[str, Any], section: str, context: str, question: str, options: Iterable[str]) -> str | None:
    """Why what the snippet raised comes from the snippet being abridged (see the module docstring), or None."""
    raised = observation.get("raised") or {}
    if not raised:
        return None
    text = " ".join([str(raised.get("message", ""))] + [str(e.get("msg", "")) for e in raised.get("errors") or []])
    placeholder = _placeholder(section, text)
    if placeholder:
        return f"the snippet is abridged: {placeholder}, and what it raised ({raised.get('type')}) speaks of it"
    uncalled = _call_without_arguments(observation, section)
    if uncalled:
        return uncalled
    said = " ".join([question, *options])
    unmentioned = [name for name in missing_arguments(raised) if not _mentioned(name, said)]
    if unmentioned:
        return (f"the snippet is abridged: it leaves out the required argument(s) {', '.join(unmentioned)}, which neither the "
                f"question nor an option mentions ({raised.get('type')}: {_first_line(raised)})")  # fmt: skip
    refused = [name for name in refused_arguments(raised) if not _mentioned(name, said)]
    if refused:
        return (f"the snippet is not the code the question describes: the library refuses its argument(s) {', '.join(refused)}, "
                f"which neither the question nor an option mentions ({raised.get('type')}: {_first_line(raised)})")  # fmt: skip
    name = raised.get("name") if raised.get("type") == "NameError" else None
    if name and name in suite_names(context) - bound_names(section) and not hasattr(builtins, name):
        return f"the snippet is abridged: {name!r} is defined elsewhere in its suite, not in the code the snippet runs with"
    return None


def _call_without_arguments(observation: Mapping[str, Any], section: str) -> str | None:
    """Why the TypeError is the observer's own call of the section's function without the arguments it requires (a
    function the framework calls with a tool context, a request, ...), or None: that says nothing about its code."""
    called, raised = observation.get("called"), observation.get("raised") or {}
    if not called or raised.get("type") != "TypeError" or not str(raised.get("message", "")).startswith(f"{called}()"):
        return None
    try:
        tree = ast.parse(section)
    except (SyntaxError, ValueError):
        return None
    required: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == called:
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            required |= {a.arg for a in positional[: len(positional) - len(args.defaults)]}
            required |= {a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is None}
    missing = missing_arguments(raised)
    if not missing or not set(missing) <= required:
        return None
    return (
        f"the snippet is a function that takes {', '.join(missing)}, which whatever calls it gives it: run with no "
        f"arguments, it raised {raised.get('type')}: {_first_line(raised)}, which says nothing about its code"
    )


def missing_arguments(raised: Mapping[str, Any]) -> list[str]:
    """The required arguments a raised error says are missing: a call's TypeError, or pydantic's ``missing`` errors."""
    found: list[str] = []
    if raised.get("type") == "TypeError":
        for match in _MISSING_ARGUMENT.finditer(str(raised.get("message", ""))):
            found += re.findall(r"'([A-Za-z_]\w*)'", match.group("names"))
    for error in raised.get("errors") or []:
        if error.get("type") == "missing" and error.get("loc"):
            found.append(str(error["loc"][-1]))
    return list(dict.fromkeys(found))


#: A call refusing a keyword: ``f() got an unexpected keyword argument 'x'``.
_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '([A-Za-z_]\w*)'")


def refused_arguments(raised: Mapping[str, Any]) -> list[str]:
    """The arguments a raised error refuses as unknown: a call's ``unexpected keyword argument``, pydantic's
    ``extra_forbidden`` errors."""
    found = _UNEXPECTED_KEYWORD.findall(str(raised.get("message", ""))) if raised.get("type") == "TypeError" else []
    for error in raised.get("errors") or []:
        if error.get("type") == "extra_forbidden" and error.get("loc"):
            found.append(str(error["loc"][-1]))
    return list(dict.fromkeys(found))


def _mentioned(name: str, text: str) -> bool:
    """Whether ``text`` names ``name`` as a word (``app_name``), or its words in order (``app name``)."""
    spaced = re.escape(name).replace("_", r"[\s_-]+")
    return re.search(rf"(?<![\w]){re.escape(name)}(?!\w)|(?<!\w){spaced}(?!\w)", text, re.I) is not None


def _first_line(raised: Mapping[str, Any]) -> str:
    return str(raised.get("message", "")).strip().splitlines()[0][:200] if str(raised.get("message", "")).strip() else ""


def _placeholder(section: str, raised_text: str) -> str | None:
    """The placeholder the section uses as a value, when what was raised speaks of it; else None."""
    try:
        tree = ast.parse(section)
    except (SyntaxError, ValueError):
        return None
    statements = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # a bare `...` is a body
    if _ELLIPSIS.search(raised_text) and any(
        isinstance(node, ast.Constant) and node.value is Ellipsis and id(node) not in statements for node in ast.walk(tree)
    ):
        return "it uses a literal `...` as a value"
    stubs = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_stub(node)}
    used = [
        node.func.id for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in stubs and id(node) not in statements
    ]  # fmt: skip
    if used and _NONE.search(raised_text):
        return f"it uses what the stub {used[0]}() (its body only `pass`) returns, None, as a value"
    return None


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose body is only ``pass``, ``...`` or a docstring: it stands for code the excerpt leaves out."""
    return all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and (s.value.value is Ellipsis or isinstance(s.value.value, str)))
        for s in node.body
    )  # fmt: skip


def suite_names_line(names: Iterable[str]) -> str:
    """The comment line that carries the names a snippet's suite defines elsewhere in its module context ("" for none)."""
    names = sorted(set(names))
    return SUITE_NAMES_PREFIX + " ".join(names) + "\n" if names else ""


def suite_names(context: str) -> set[str]:
    """The names listed by the :data:`SUITE_NAMES_PREFIX` line of a snippet's module context."""
    for line in context.splitlines():
        if line.startswith(SUITE_NAMES_PREFIX):
            return set(line[len(SUITE_NAMES_PREFIX) :].split())
    return set()
