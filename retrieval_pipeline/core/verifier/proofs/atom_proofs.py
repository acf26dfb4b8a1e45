"""Proofs for claims made of atoms: the checks of :mod:`~retrieval_pipeline.core.verifier.claims.claim_kinds`.

:data:`ATOM_SOURCE` is appended to the offline prover's prelude; :func:`atoms_body` writes the test. Each atom
ends ``true``, ``false`` or ``undecided``; the option is false when one atom is false, undecided when one
cannot be settled, true (or consistent, for a ``necessary`` claim) when all hold.

What makes an atom false, and only that (everything else leaves it undecided):

* a name the library index proves absent, or an attribute missing from a module or object that was loaded;
* a member missing from a class whose every Python base's source was read and assigns no such attribute,
  and which has no ``__getattr__`` of its own (pydantic's is not dynamic unless ``extra="allow"``);
* a keyword no parameter or field takes, where the callee has no ``**kwargs`` (a pydantic model counts as
  having none only with ``extra="forbid"``); a parameter said to be required that is not a named parameter;
* an expression that returns where it should raise, raises another exception, or gives another value/type;
* a flag missing from a click command that was loaded; an environment variable no installed ``.py`` file
  mentions, where none holds a string the name could be built from (``"ADK_"``, ``f"ADK_{``);
* a class said to be abstract that has no abstract methods, no ``abc.ABC`` base or ``abc.ABCMeta`` metaclass of
  its own, no method of its distribution that raises ``NotImplementedError``, every such method's source read,
  and neither a base-like name (``Base*``, ``*Mixin``) nor a docstring that says "abstract", "base class",
  "interface" or "subclass";
* a combination of fields (``presence``) a model accepts where it should reject it; or one it rejects where it
  should accept it, when every sample value given was accepted in another combination (so the rejection is the
  model's rule, not a bad sample value). Sample values are truthy (``"x"``, ``1``, ``True``, a one-item list,
  a model built from its required fields), so a field given one counts as provided;
* a technology (``mentions``: SQLite, a file, Cloud Storage) that no module behind a class mentions: the modules
  of the class and of its bases in its distribution, and every module of the distribution they import;
* a field said to be deprecated that pydantic does not mark deprecated, whose setting gives no deprecation
  warning, and whose defining class's source never mentions deprecation;
* a parameter said to take a list (``takes_list``) whose declared type admits none (``dict``, ``str``; not ``Any``);
* a value said to be valid for a field that the class rejects with an error at that field, or one said to be
  invalid that it accepts (``valid_value``, :mod:`~retrieval_pipeline.core.verifier.claims.value_claims`).

A name bound two ways (``("either", [...])``: ``app`` is a module the library imports *and* an instance of
``App``) is read both ways: an atom holds if one reading holds, and is false only if every reading fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from retrieval_pipeline.core.verifier.proofs.proof_source import proof_test
from retrieval_pipeline.core.verifier.sandbox_side.atoms import ENV_SCAN_CPU_S, ENV_SCAN_WALL_S

#: The atom checks (``sandbox_side/atoms.py``), appended to the offline prover's prelude.
ATOM_SOURCE = files("retrieval_pipeline.core.verifier.sandbox_side").joinpath("atoms.py").read_text(encoding="utf-8")
#: The ``valid_value`` atom (``sandbox_side/value_atoms.py``), appended after :data:`ATOM_SOURCE`.
VALUE_ATOM_SOURCE = files("retrieval_pipeline.core.verifier.sandbox_side").joinpath("value_atoms.py").read_text(encoding="utf-8")

__all__ = ["ATOM_SOURCE", "ENV_SCAN_CPU_S", "ENV_SCAN_WALL_S", "VALUE_ATOM_SOURCE", "atoms_body"]


def atoms_body(letter: str, names: Mapping[str, Any], atoms: Sequence[Mapping[str, Any]]) -> str:
    """The test of a claim made of atoms: ``_decide_atoms`` of :data:`ATOM_SOURCE` called with the claim's data.

    Args:
        letter: The option's letter, made safe for a function name.
        names: Bindings of the free names (see ``OfflineProver._names``).
        atoms: The checks, in order.

    Returns:
        Source to put after the prelude and :data:`ATOM_SOURCE`; every value enters as a pure-ASCII literal.
    """
    return proof_test(letter, "_decide_atoms", {"atoms": [dict(a) for a in atoms], "names": dict(names)})
