"""Claims and proofs for questions about a code snippet ("what happens when this code runs").

A question of the "diagnose setup errors" or "predict runtime behaviour" suites carries a snippet
(``Case.extra["code_snippet"]``, loaded by :func:`~retrieval_pipeline.core.datasets.suite.reader.load_snippet`).
Running it in the sandbox is exactly what proves such options, so each option becomes a ``snippet`` claim
with one of these outcomes (:data:`OUTCOMES`, first match wins):

* ``raises``: "It raises `ValueError`", "`KeyError` is raised": the snippet raises that exception (or a subclass);
* ``runs``: "It runs without error": the snippet raises nothing;
* ``prints``: "It prints `3`": what the snippet writes to stdout, stripped, is that text;
* ``value``: "`x.count` ends up `2`", "`d['a']` is `[1]`", "`f(2)` returns `4`": after the snippet ran, the
  expression equals the literal (same type, as the offline prover compares values);
* ``output`` (:func:`output_details`, only for an option no other reading takes): a plain text option of a
  question that asks what the code returns, prints, which message comes out or which error it gives: the text is
  in that output (or in the error's message or one of its per-field errors).

Every outcome ``decides`` the truth: the snippet is run, not just inspected. A snippet that raises makes every
``value`` and ``prints`` option false (the state it describes is never reached), with the exception as the
reason. An option none of these patterns reads becomes ``unknown`` (undecided): an option of a snippet question
is never decomposed without its snippet, since ``x`` there means the snippet's ``x``. The proof that runs the
snippet and checks the outcome is ``_prove_snippet`` of :mod:`..sandbox_side.proof_kinds`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

#: A backticked or bare dotted exception name.
_EXC = r"`?(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Iteration))`?"


#: Words that join an outcome to what it says more ("No error, but ...", "RuntimeError on initialization").
_JOIN = re.compile(r"^[\s.,;:!\-\u2013\u2014]*(?:(?:but|and|so|yet)\b\s*)?", re.I)
#: Words after an exception name that introduce a description of its message, not a quote of it.
_DESCRIBES = r"(?:indicating|saying|stating|that\s+says|that\s+states|explaining|complaining|because|about|which\s+says)"


def _rest(text: str) -> str | None:
    """What an option says beyond its outcome, without the joining words; None when nothing is left."""
    rest = _JOIN.sub("", text or "", count=1).strip()
    return rest if re.search(r"\w", rest) else None


def _raises(match: re.Match[str]) -> dict[str, Any] | None:
    details: dict[str, Any] = {"outcome": "raises", "exception": match.group("exc")}
    groups = match.groupdict()
    tail = (groups.get("tail") or "").strip()
    if groups.get("message"):
        details["message"] = groups["message"].strip()
    elif groups.get("describes"):
        details["describes"] = groups["describes"].strip()
    elif tail.startswith(":") and _rest(tail[1:]):
        details["message"] = tail[1:].strip()
    elif re.match(rf"^{_DESCRIBES}\b", tail, re.I):
        details["describes"] = re.sub(rf"^{_DESCRIBES}\b\s*", "", tail, flags=re.I).strip()
    elif _rest(tail):
        details["rest"] = _rest(tail)
    return details


def _runs(match: re.Match[str]) -> dict[str, Any] | None:
    rest = _rest(match.groupdict().get("tail") or "")
    return {"outcome": "runs", **({"rest": rest} if rest else {})}


def _prints(match: re.Match[str]) -> dict[str, Any] | None:
    return {"outcome": "prints", "printed": match.group("text")}


def _value(match: re.Match[str]) -> dict[str, Any] | None:
    expr, value = match.group("expr").strip(), match.group("value").strip()
    try:
        ast.parse(expr, mode="eval")
        ast.literal_eval(value)
    except (SyntaxError, ValueError):
        return None
    return {"outcome": "value", "expr": expr, "expected": value}


#: Option pattern -> the claim details it gives (None: not this outcome after all). First match wins.
OUTCOMES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], dict[str, Any] | None]], ...] = (
    (re.compile(rf"^(?:it\s+)?(?:raises|fails with|throws)\s+(?:an?\s+)?{_EXC}(?P<tail>.*)$", re.I | re.S), _raises),
    (re.compile(rf"^(?:an?\s+)?{_EXC}\s+is\s+(?:raised|thrown)(?P<tail>.*)$", re.I | re.S), _raises),
    (re.compile(rf"^{_EXC}\s*:\s*(?P<message>\S.*)$", re.S), _raises),
    (re.compile(rf"^(?:an?\s+)?{_EXC}\s+{_DESCRIBES}\b\s*(?P<describes>\S.*)$", re.I | re.S), _raises),
    (re.compile(rf"^(?:an?\s+)?{_EXC}(?P<tail>(?:\s.*|[.!]\s*)?)$", re.S), _raises),
    (re.compile(r"^(?:it\s+)?runs\s+(?:without|with no)\s+(?:an?\s+)?(?:error|exception)s?\b(?P<tail>.*)$", re.I | re.S), _runs),
    (re.compile(r"^no\s+(?:error|exception)s?(?:\s+(?:is|are)\s+(?:raised|thrown)|\s+occurs)?\b(?P<tail>.*)$", re.I | re.S), _runs),
    (re.compile(r"^(?:it\s+)?(?:runs|works|succeeds)\b(?P<tail>.*)$", re.I | re.S), _runs),
    (re.compile(r"^(?:it\s+)?prints\s+`(?P<text>[^`]*)`", re.I), _prints),
    (re.compile(r"^`(?P<expr>[^`]+)`\s+(?:is|equals|ends up(?: as)?|evaluates to|returns|==)\s+`(?P<value>[^`]+)`", re.I), _value),
)


def snippet_details(option: str, snippet: str) -> dict[str, Any] | None:
    """The ``snippet`` claim details for one option text, or None when no outcome pattern reads it."""
    text = option.strip()
    for pattern, build in OUTCOMES:
        match = pattern.match(text)
        details = build(match) if match else None
        if details is not None:
            return {**details, "snippet": snippet, "decides": "truth"}
    return None


#: A question that asks for the text the code gives (its output, what it prints or returns, a message or substring).
_ASKS_TEXT = re.compile(r"\b(?:substring|output|prints?|printed|returns?|returned|message)\b", re.I)


#: A question that asks which error or message the code gives ("What validation errors occur ...?", "Predict the error").
_ASKS_ERROR = re.compile(r"\b(?:what|which)\b[^?]*\b(?:errors?|exceptions?)\b|\bpredict\s+the\s+(?:errors?|exceptions?)\b", re.I)


def output_details(option: str, question: str, snippet: str) -> dict[str, Any] | None:
    """An ``output`` claim for a plain-text option of a question that asks for the text the code gives, else None.

    ``asks_error``: the question asks which error the code gives (not a text it returns or prints, nor a message
    substring), so the text is an error's: false when it differs from every raised text while another option quotes
    one. ``substring``: the question asks
    for a substring, so only the text word for word is true (its key terms alone make it consistent)."""
    text = option.strip()
    asks_text = _ASKS_TEXT.search(question) is not None
    asks_error = not asks_text and _ASKS_ERROR.search(question) is not None
    if not (asks_text or asks_error) or not re.search(r"\w", text) or len(text) > 300:
        return None
    marks = {"asks_error": asks_error, "substring": re.search(r"\bsubstring\b", question, re.I) is not None}
    return {"outcome": "output", "output_text": text, "snippet": snippet, "decides": "truth", **{k: True for k, v in marks.items() if v}}


def snippet_names(snippet: str) -> dict[str, list[str]]:
    """The names a snippet (with its module context) imports and the names it defines (assigns, defines, takes as
    arguments): ``{"imported": [...], "defined": [...]}``. Code that does not parse gives empty lists."""
    imported: set[str] = set()
    defined: set[str] = set()
    try:
        tree = ast.parse(snippet)
    except (SyntaxError, ValueError):
        return {"imported": [], "defined": []}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return {"imported": sorted(imported), "defined": sorted(defined - imported)}


def hypothesis(details: dict[str, Any]) -> str:
    """What the claim says, in words."""
    text = {
        "raises": lambda d: (
            f"running the snippet raises {d['exception']}"
            + (f" with the message {d['message']!r}" if d.get("message") else "")
            + (f", indicating {d['describes']!r}" if d.get("describes") else "")
        ),
        "runs": lambda d: "the snippet runs without an exception",
        "prints": lambda d: f"the snippet prints {d['printed']!r}",
        "value": lambda d: f"after the snippet runs, {d['expr']} == {d['expected']}",
        "output": lambda d: f"what the snippet returns or prints holds {d['output_text']!r}",
    }[details["outcome"]](details)
    return text + (f"; and: {details['rest']!r}" if details.get("rest") else "")
