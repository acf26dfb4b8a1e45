"""Run a check an LLM wrote and decide the option by its ``assert`` statements alone.

Runs INSIDE the sandbox, in the library's interpreter, standard library only. This file is read as text and put
after the prelude (``sandbox_files/proof_prelude.py``) in each LLM proof
(:func:`~retrieval_pipeline.core.verifier.llm_prover.wrap_check`), so it runs in the prelude's namespace: the
helpers named under ``TYPE_CHECKING`` below are the prelude's. The proof's test calls :func:`_prove_generated`
with the generated source.

The check runs in a namespace of its own, compiled under :data:`GENERATED_FILE`. The option is false only
when an ``assert`` statement of the check fails (the innermost frame of the ``AssertionError`` is one of its
assert lines); an ``AssertionError`` raised anywhere else, or any other exception, leaves it undecided.
"""

import ast
import asyncio
import inspect
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the prelude this file is put after
    _false = _true = _undecided = None

#: The file name the generated code is compiled under; only assert statements from it decide.
GENERATED_FILE = "<generated check>"


def _assert_lines(generated):
    """The line numbers of the generated check's assert statements."""
    return frozenset(
        line
        for node in ast.walk(ast.parse(generated))
        if isinstance(node, ast.Assert)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    )


def _from_generated_assert(exc, generated):
    """True when the innermost frame is an assert statement of the generated check (not the library, not ``raise``)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == GENERATED_FILE and tb.tb_lineno in _assert_lines(generated)


def _run_generated(generated):
    """Define the check in a namespace of its own and call ``check()`` (awaited when it returns an awaitable)."""
    namespace = {"__name__": "generated_check"}
    exec(compile(generated, GENERATED_FILE, "exec"), namespace)
    result = namespace["check"]()
    if inspect.isawaitable(result):
        asyncio.run(result)


def _prove_generated(generated):
    """True when every assertion of the check holds; false only when one of them fails; else undecided."""
    failed = None
    try:
        _run_generated(generated)
    except AssertionError as exc:
        if not _from_generated_assert(exc, generated):
            _undecided(
                "an AssertionError that no assert statement of the generated check raised: "
                + "".join(traceback.format_exception_only(type(exc), exc)).strip()[:300]
            )
        failed = (str(exc) or "an assertion of the generated check failed")[:300]
    except BaseException as exc:
        _undecided("the generated check errored (" + type(exc).__name__ + ": " + str(exc)[:300] + "), which decides nothing")
    if failed is not None:
        _false("a generated assertion failed: " + failed)
    _true("every assertion of the generated check held")
