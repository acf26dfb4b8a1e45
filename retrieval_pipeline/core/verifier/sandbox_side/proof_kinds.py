"""The proofs of the claim kinds proven by their own bodies: one function per kind, the claim's data as its arguments.

Runs INSIDE the sandbox, in the library's interpreter, standard library only. This file is read as text and put
after the prelude (``sandbox_side/proof_prelude.py``) in each proof, so it runs in the prelude's namespace: the
helpers named under ``TYPE_CHECKING`` below are the prelude's. A proof's test calls one of these functions with
the claim's data (:func:`~retrieval_pipeline.core.verifier.proofs.proof_source.proof_test`), and the function ends the
test the prelude's way: :func:`_true` (it returns), :func:`_false` or :func:`_undecided` (they raise).

* :func:`_prove_import`: an import statement runs (its warnings are recorded);
* :func:`_prove_exists`: a dotted path exists (the last part as a class attribute, field or slot);
* :func:`_prove_signature`: a callable's parameters (names and kinds) and whether it is async are as expected;
* :func:`_prove_accepts`: a callable accepts, or rejects, a keyword;
* :func:`_prove_expression`: an expression evaluates, raises an exception, returns a value or gives a match;
* :func:`_prove_snippet`: a code snippet raises, runs, prints or leaves a value as the option says.
"""

import ast
import contextlib
import inspect
import io
import re
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the prelude this file is put after
    _Missing = _Unimportable = Exception
    _accepts = _exception_matches = _fingerprint = _ignored_keywords = _load = _namespace = _parameters = _same = _walk = None
    _false = _true = _undecided = None


def _prove_import(statement):
    """The import statement runs without an ImportError."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(statement, {})
        except ImportError as exc:
            _false(statement + " raises " + type(exc).__name__ + ": " + str(exc))
    notes = sorted({type(w.message).__name__ + ": " + str(w.message) for w in caught})
    _true(statement + " works", warnings=notes)


def _prove_exists(path, names, head_from_question):
    """``path`` exists; a missing head the question itself names leaves the option undecided."""
    try:
        _walk(path, names, last_exists_only=True)
    except _Unimportable as exc:
        _undecided(str(exc))
    except _Missing as exc:
        if exc.head and head_from_question:
            _undecided("the question's subject is missing: " + str(exc))
        if exc.head and path[:1].islower() and "." in path:
            # `ctx.agent_name`: a lower-case head that is no module may be the option's own variable, not a claim
            _undecided(
                "no module or builtin is named " + repr(path.split(".")[0]) + ", which may be a variable of the option's: " + str(exc)
            )
        _false(str(exc))
    except ImportError as exc:
        _undecided("import failed: " + type(exc).__name__ + ": " + str(exc))
    _true(path + " exists")


def _subject(subject, names):
    """The callable a signature claim is about; undecided when it cannot be loaded."""
    try:
        return _load(subject, names)
    except (_Missing, _Unimportable, ImportError) as exc:
        _undecided("cannot load " + subject + ": " + type(exc).__name__ + ": " + str(exc))


def _prove_signature(subject, names, expected, expect_async):
    """The parameters (``[name, kind]`` each) and async-ness of ``subject`` are exactly the expected ones."""
    target = _subject(subject, names)
    params = _parameters(target)
    if params is None:
        _undecided("no introspectable signature for " + subject)
    actual = [[p.name, p.kind.name] for p in params.values()]
    is_async = inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)
    if actual != expected or is_async != expect_async:
        _false(
            "actual signature: " + ("async " if is_async else "") + str(inspect.signature(target)),
            actual=actual,
            is_async=is_async,
        )
    _true("signature matches: " + str(inspect.signature(target)))


def _prove_accepts(subject, names, param, expect_accepted, value_source, named_only):
    """``subject`` accepts the keyword ``param`` (with the option's value, when it names one) as expected."""
    target = _subject(subject, names)
    value = None if value_source is None else ast.literal_eval(value_source)
    accepted, how = _accepts(target, param, value, named_only=named_only)
    if accepted is None:
        _undecided(subject + " " + how)
    if accepted != expect_accepted:
        _false(subject + (" accepts " if accepted else " does not accept ") + param + ": " + how)
    _true(subject + (" accepts " if accepted else " does not accept ") + param + ": " + how)


def _prove_expression(names, free, setup, expr, mode, exception=None, expected=None):
    """``expr`` (after ``setup``) evaluates, raises ``exception``, or returns/matches the literal ``expected``."""
    try:
        ns = _namespace(names, free)
        if setup:
            exec(setup, ns)
    except (_Missing, ImportError, AttributeError) as exc:
        (_false if mode == "evaluates" else _undecided)("cannot set up: " + type(exc).__name__ + ": " + str(exc))
    except _Unimportable as exc:
        _undecided(str(exc))
    try:
        code = compile(expr, "<option>", "eval")
    except (SyntaxError, ValueError) as exc:
        _undecided("the expression does not compile: " + type(exc).__name__ + ": " + str(exc))
    raised = None
    try:
        result = eval(code, ns)
    except Exception as exc:
        raised = exc
    if mode == "evaluates":
        if raised is not None:
            _false(expr + " raises " + type(raised).__name__ + ": " + str(raised))
        ignored = _ignored_keywords(expr, ns)
        if ignored:  # accepted and dropped (or swallowed): that it evaluates says nothing about them
            _undecided(expr + " evaluates, but " + ", ".join(ignored) + " reach(es) no named parameter or field: the library may ignore it")
        _true(expr + " evaluates", fingerprint=_fingerprint(result))
    elif mode == "raises":
        if raised is None:
            _false(expr + " returns " + repr(result) + " without raising")
        if not _exception_matches(raised, exception, names):
            _false(expr + " raises " + type(raised).__name__ + ", not " + exception)
        _true(expr + " raises " + type(raised).__name__ + ": " + str(raised))
    elif mode == "match":
        value = ast.literal_eval(expected)
        if raised is not None:
            _false(expr + " raises " + type(raised).__name__ + ": " + str(raised))
        if not isinstance(result, re.Match) or result.group(0) != value:
            _false(expr + " returns " + repr(result))
        _true(expr + " returns " + repr(result))
    else:
        value = ast.literal_eval(expected)
        if raised is not None:
            _false(expr + " raises " + type(raised).__name__ + ": " + str(raised) + "; expected " + repr(value))
        if not _same(result, value):
            _false(expr + " returns " + repr(result) + ", not " + repr(value), actual=repr(result))
        _true(expr + " returns " + repr(result), fingerprint=_fingerprint(result))


def _run_snippet(snippet):
    """Run the snippet as ``__snippet__``: (its namespace, what it printed, the exception it raised or None)."""
    ns = {"__name__": "__snippet__"}
    out = io.StringIO()
    raised = None
    try:
        code = compile(snippet, "<snippet>", "exec")
    except (SyntaxError, ValueError) as exc:
        _undecided("the snippet does not compile: " + type(exc).__name__ + ": " + str(exc))
    with contextlib.redirect_stdout(out):
        try:
            exec(code, ns)
        except Exception as exc:
            raised = exc
    return ns, out.getvalue(), raised


def _prove_snippet(snippet, details):
    """The snippet has the outcome ``details`` names: it raises, runs, prints, or leaves an expression's value."""
    ns, printed, raised = _run_snippet(snippet)
    outcome = details["outcome"]
    what = "raises " + type(raised).__name__ + ": " + str(raised) if raised is not None else "runs without an exception"
    if outcome == "raises":
        if raised is None:
            _false("the snippet " + what)
        if not _exception_matches(raised, details["exception"], {}):
            _false("the snippet " + what + ", not " + details["exception"])
        _true("the snippet " + what)
        return
    if outcome == "runs":
        if raised is not None:
            _false("the snippet " + what)
        _true("the snippet " + what)
        return
    if raised is not None:
        _false("the snippet " + what + " before that state is reached")
    if outcome == "prints":
        if printed.strip() != details["printed"].strip():
            _false("the snippet prints " + repr(printed.strip()))
        _true("the snippet prints " + repr(printed.strip()))
        return
    expected = ast.literal_eval(details["expected"])
    try:
        result = eval(compile(details["expr"], "<option>", "eval"), ns)
    except Exception as exc:
        _false(details["expr"] + " raises " + type(exc).__name__ + ": " + str(exc) + " after the snippet")
    if not _same(result, expected):
        _false(details["expr"] + " is " + repr(result) + " after the snippet")
    _true(details["expr"] + " is " + repr(result) + " after the snippet")
