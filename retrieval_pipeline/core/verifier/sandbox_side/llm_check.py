"""Run a check an LLM wrote and decide the option by its ``assert`` statements alone.

Runs INSIDE the sandbox, in the library's interpreter, standard library only. This file is read as text and put
after the prelude (``sandbox_side/proof_prelude.py``) in each LLM proof
(:func:`~retrieval_pipeline.core.verifier.proofs.llm_prover.wrap_check`), so it runs in the prelude's namespace: the
helpers named under ``TYPE_CHECKING`` below are the prelude's. The proof's test calls :func:`_prove_generated`
with the generated source.

The check runs in a namespace of its own, compiled under :data:`GENERATED_FILE`; an assertion counts only when an
``assert`` statement of the check fails (the innermost frame of the ``AssertionError`` is one of its assert lines);
an ``AssertionError`` raised anywhere else, or any other exception, leaves the option undecided. With a refutation
(a second check, written independently, whose assertions hold exactly when the option is false; compiled under
:data:`REFUTATION_FILE`) the option is decided only when the two agree: a small model's wrong but plausible test
then meets a refutation that contradicts it, and the option stays undecided instead of turning false.
"""

import ast
import asyncio
import inspect
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the prelude this file is put after
    _false = _true = _undecided = None

#: The file names the generated check and its refutation are compiled under; only their own assert statements decide.
GENERATED_FILE = "<generated check>"
REFUTATION_FILE = "<generated refutation>"


def _assert_lines(generated):
    """The line numbers of the generated code's assert statements."""
    return frozenset(
        line
        for node in ast.walk(ast.parse(generated))
        if isinstance(node, ast.Assert)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    )


def _from_generated_assert(exc, generated, filename=GENERATED_FILE):
    """True when the innermost frame is an assert statement of the generated code (not the library, not ``raise``)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == filename and tb.tb_lineno in _assert_lines(generated)


def _run_generated(generated, filename=GENERATED_FILE):
    """Define ``check()`` in a namespace of its own and call it (awaited when it returns an awaitable)."""
    namespace = {"__name__": "generated_check"}
    exec(compile(generated, filename, "exec"), namespace)
    result = namespace["check"]()
    if inspect.isawaitable(result):
        asyncio.run(result)


def _outcome(generated, filename):
    """``("held" | "failed" | "undecided", why)`` of one generated ``check()``."""
    try:
        _run_generated(generated, filename)
    except AssertionError as exc:
        if not _from_generated_assert(exc, generated, filename):
            return "undecided", (
                "an AssertionError that no assert statement of the generated code raised: "
                + "".join(traceback.format_exception_only(type(exc), exc)).strip()[:300]
            )
        return "failed", (str(exc) or "an assertion failed")[:300]
    except BaseException as exc:
        return "undecided", "the generated code errored (" + type(exc).__name__ + ": " + str(exc)[:300] + "), which decides nothing"
    return "held", "every assertion held"


def _prove_generated(generated, refutation=None):
    """Decide the option by the check's own assertions, and, given a refutation, only when the two agree.

    Alone: true when every assertion of the check holds, false only when one of them fails. With the
    independently written refutation (whose assertions hold exactly when the option is false): true when the
    check holds and the refutation fails, false when the check fails and the refutation holds; any other
    pair leaves the option undecided, so one wrong generated test cannot decide it.
    """
    check, why = _outcome(generated, GENERATED_FILE)
    if check == "undecided":
        _undecided(why)
    if refutation is None:
        if check == "failed":
            _false("a generated assertion failed: " + why)
        _true("every assertion of the generated check held")
        return
    against, why_against = _outcome(refutation, REFUTATION_FILE)
    if against == "undecided":
        _undecided("the refutation: " + why_against)
    if check == "held" and against == "failed":
        _true("the check held and the independent refutation failed: " + why_against)
        return
    if check == "failed" and against == "held":
        _false("the check failed (" + why + ") and the independent refutation held")
    _undecided(
        "the check and the independent refutation disagree: the check "
        + ("held" if check == "held" else "failed (" + why + ")")
        + ", the refutation "
        + ("held" if against == "held" else "failed (" + why_against + ")")
        + "; one of them is wrong, so neither decides"
    )
