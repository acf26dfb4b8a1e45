"""How a proof's source is put together: real files of :mod:`..sandbox_side`, and the claim's data as a literal.

A proof is one self-contained pytest file: its docstring (what it proves), the prelude
(``sandbox_side/proof_prelude.py``: the evidence protocol, name loading), the text of the sandbox files that
prove its kind, then the test (:func:`proof_test`): the claim's data as one literal and one call into those
files. No executable code is written from a template.

Every text of a claim (option text, case id, names, expressions) enters the source as a Python literal
(:func:`literal`, :func:`docstring`): pure ASCII, whatever quotes, backslashes, newlines or non-ASCII
characters the option holds, so a proof always compiles.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from retrieval_pipeline.core.verifier.sandbox_side import proof_prelude, source

#: The file each proof writes its record to (``option_true``, ``reason``) in its working directory.
EVIDENCE_FILE: str = proof_prelude.EVIDENCE
#: The helpers every proof starts with (``sandbox_side/proof_prelude.py``).
PRELUDE_SOURCE = source("proof_prelude.py")
#: The proofs of the kinds proven by their own bodies (``sandbox_side/proof_kinds.py``).
KINDS_SOURCE = source("proof_kinds.py")
#: The guard of the evidence file (``sandbox_side/guard.py``), put before the prelude.
GUARD_SOURCE = source("guard.py")
#: A proof's last statement: in the sandbox (``RP_GUARD=1``, :data:`~retrieval_pipeline.core.services.sandbox.settings.PYTEST_ENV`),
#: once every function of the proof is defined and before its test runs, the guard is installed; from then on only the
#: proof's own code, called from its test, writes the evidence file (the option's code cannot write or pre-empt it).
GUARD_INSTALL = source("guard_install.py")


def compose(doc: str, *parts: str) -> str:
    """A proof's source: ``doc`` as its docstring, the guard, the prelude, then ``parts`` (sandbox files' text, the test),
    then :data:`GUARD_INSTALL`."""
    texts = [docstring(doc) + "\n" + GUARD_SOURCE.rstrip("\n"), PRELUDE_SOURCE.rstrip("\n"), *(p.rstrip("\n") for p in parts)]
    return "\n\n\n".join([*texts, GUARD_INSTALL.rstrip("\n")]) + "\n"


def proof_test(letter: str, function: str, data: Mapping[str, Any]) -> str:
    """The test of a proof: ``PROOF = <data>`` and ``test_option_<letter>()`` calling ``function(**PROOF)``.

    Args:
        letter: The option's letter, made safe for a function name (:func:`safe_letter`).
        function: A function of the sandbox files in the proof (``_prove_exists``).
        data: Its keyword arguments; they enter as one pure-ASCII literal.
    """
    return f"PROOF = {literal(dict(data))}\n\n\ndef test_option_{letter}():\n    {function}(**PROOF)\n"


def safe_letter(letter: str) -> str:
    """An ASCII identifier part for an option letter (file and test names); a digest keeps altered letters apart."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", letter)[:40]
    if cleaned != letter or not cleaned:
        cleaned += "_" + hashlib.sha256(letter.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return cleaned


def literal(value: Any) -> str:
    """A pure-ASCII Python literal for ``value`` (str, number, bool, None, and lists/tuples/dicts of them).

    ``ascii()`` escapes quotes, backslashes, newlines, NULs, surrogates and every non-ASCII character, so the
    literal compiles and evaluates back to ``value`` whatever an option's text holds.
    """
    return ascii(value)


def docstring(text: str) -> str:
    """A triple-quoted, pure-ASCII docstring literal that evaluates to ``text`` exactly.

    Backslashes and double quotes are escaped (so an ending ``"`` or an inner ``\"\"\"`` cannot close it),
    line breaks stay line breaks, and other control or non-ASCII characters become escapes.
    """
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n" or " " <= char <= "~":
            out.append(char)
        else:
            out.append(ascii(char)[1:-1])
    return '"""' + "".join(out) + '"""'
