"""The ``valid_value`` atom: whether a class accepts a value in one of its fields (run inside the sandbox).

This file follows ``sandbox_side/atoms.py`` in each atom proof (:mod:`~retrieval_pipeline.core.verifier.proofs.provers`),
so it runs in that namespace: the helpers named under ``TYPE_CHECKING`` below are atoms.py's, and the check is added
to its dispatch table. It imports only the standard library, so the host can import it on its own.

The class is built with the value in the field and a sample value (atoms.py's ``_sample``) in every other required
field. Accepted: the value is valid. Rejected with an error at that field (pydantic's ``loc``): invalid. Anything else
(an error at another field or of the whole model, an exception with no per-field errors, a class that is not a
pydantic model or dataclass with that field, a class the library does not define) settles nothing. The value is
the atom's ``value``, or a sample of the kind it names (``sample``: a pydantic model class or instance, a dict...).
"""

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by atoms.py, which this file follows in every proof
    _No = _Open = Exception
    _get = _model_fields = _sample = None


def _field_errors(exc, field):
    """The per-field errors of an exception that concern ``field``; None when it carries no per-field errors."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        listed = list(errors())
    except Exception:
        return None
    return [e for e in listed if tuple(e.get("loc") or ())[:1] == (field,)], listed


def _kind_sample(kind):
    """A value of a kind an option names (``value_claims.SAMPLE_KINDS``): a small pydantic model class or instance, a
    JSON schema, a dict, a list, a string, an integer, a boolean."""
    if kind in ("pydantic_class", "pydantic_instance"):
        try:
            import pydantic
        except ImportError as exc:
            raise _Open("pydantic cannot be imported to build a sample model: " + str(exc)) from None
        model = pydantic.create_model("SampleModel", x=(int, 1))
        return model if kind == "pydantic_class" else model()
    samples = {"json_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}, "dict": {"x": 1}, "list": ["x"], "str": "x",
               "int": 1, "bool": True}  # fmt: skip
    if kind not in samples:
        raise _Open("no sample of the kind " + repr(kind))
    return samples[kind]


def _atom_valid_value(atom, names):
    """``owner(field=value)`` is accepted (``valid``) or rejected at that field (not ``valid``); see the module docstring."""
    try:
        owner = _get(atom["owner"], names)
    except _No as exc:  # the question's noun names the class only by a guess: its absence decides nothing
        raise _Open(str(exc)) from None
    field = atom["field"]
    value = _kind_sample(atom["sample"]) if "sample" in atom else atom["value"]
    fields = _model_fields(owner)
    if fields is None or field not in fields:
        raise _Open(atom["owner"] + " is not a pydantic model or dataclass with a field " + repr(field))
    kwargs = {name: _sample(annotation) for name, (annotation, required) in fields.items() if required and name != field}
    kwargs[field] = value
    shown = atom["owner"] + "(" + field + "=" + (("<" + atom["sample"] + ">") if "sample" in atom else repr(value)) + ")"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            owner(**kwargs)
    except Exception as exc:
        found = _field_errors(exc, field)
        why = type(exc).__name__ + ": " + " ".join(str(exc).split())[:200]
        if found is None or not found[0]:
            raise _Open(shown + " is rejected, but not by an error at " + repr(field) + ": " + why) from None
        said = shown + " is rejected at " + repr(field) + ": " + " ".join(str(found[0][0].get("msg", "")).split())[:200]
        if atom["valid"]:
            raise _No(said) from None
        return said
    if not atom["valid"]:
        raise _No(shown + " is accepted")
    return shown + " is accepted"


globals().setdefault("_ATOM_CHECKS", {})["valid_value"] = _atom_valid_value
