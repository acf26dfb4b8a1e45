"""The helpers every proof starts with: the evidence protocol, and loading the names a claim needs.

Runs INSIDE the sandbox, in the library's interpreter, standard library only. This file is read as text and
put at the top of each proof (after the proof's own docstring; see
:mod:`~retrieval_pipeline.core.verifier.proofs.proof_source`), so the proof's parts run in one namespace. The test
writes ``option.evidence.json`` just before it ends: ``option_true`` is ``true`` when it passes, ``false``
just before it fails with an assertion (:func:`_false`), ``null`` when it could not decide (:func:`_undecided`).
It imports only the standard library, so the host can import it on its own.

In the sandbox (``RP_GUARD=1``) the proof ends by installing the guard (:mod:`.guard`): the option's own code, which
runs inside the proof, can then neither write nor pre-empt the evidence file, nor record through :func:`_record`
itself; the record is written only for this file's own code, called from the test.
"""

import ast
import builtins
import importlib
import inspect
import json
import re
import sys
import textwrap

EVIDENCE = "option.evidence.json"
#: Set by the proof's last statement when it installs the guard (:mod:`.guard`, in the sandbox only): from then on
#: the evidence is written by the guard's hook alone, for the proof's own code (see ``proof_source.GUARD_INSTALL``).
_RP_GUARDED = False


class _Missing(Exception):
    """A name the claim needs does not exist."""

    def __init__(self, message, head=False):
        super().__init__(message)
        self.head = head


class _Unimportable(Exception):
    """The name is defined in the library's source, but its module cannot be imported here."""


def _record(option_true, reason, **extra):
    """Write the evidence: through the guard (``rp.record``) when it is installed, as it is in the sandbox."""
    data = {"option_true": option_true, "reason": reason}
    data.update(extra)
    text = json.dumps(data, default=repr)
    if _RP_GUARDED:
        sys.audit("rp.record", text)
        return
    with open(EVIDENCE, "w", encoding="utf-8") as handle:
        handle.write(text)


def _true(reason, **extra):
    _record(True, reason, **extra)


def _false(reason, **extra):
    _record(False, reason, **extra)
    raise AssertionError("option is false: " + reason)


def _undecided(reason):
    _record(None, reason)
    raise AssertionError("proof undecided: " + reason)


def _import_path(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            return importlib.import_module(name), parts[i:]
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise
    if hasattr(builtins, parts[0]):
        return getattr(builtins, parts[0]), parts[1:]
    raise _Missing("no module or builtin named " + repr(parts[0]), head=True)


def _has(obj, name):
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if klass is object:
                continue
            slots = getattr(klass, "__slots__", ()) or ()
            slots = (slots,) if isinstance(slots, str) else slots
            if name in vars(klass) or name in getattr(klass, "__annotations__", {}) or name in slots:
                return True
        fields = getattr(obj, "model_fields", None) or getattr(obj, "__dataclass_fields__", None) or {}
        return name in fields or name in (getattr(obj, "__private_attributes__", None) or {})
    return hasattr(obj, name)


def _is_self(node):
    return isinstance(node, ast.Name) and node.id == "self"


def _sets_attribute(func):
    return getattr(func, "id", None) == "setattr" or getattr(func, "attr", None) == "__setattr__"


def _set_on_instances(cls, name):
    """Whether instances of ``cls`` get the attribute ``name`` where the class does not show it: True when a method of
    the class or a base assigns ``self.<name>`` (in ``__init__`` or in a helper it calls); None when that cannot be ruled
    out (a ``__getattr__``, a method without readable source, a ``setattr`` or ``__dict__`` write of a name not written
    out); False otherwise."""
    unsure = (getattr(cls, "model_config", None) or {}).get("extra") == "allow"  # a pydantic model keeping extras
    for klass in cls.__mro__:
        if klass is object or str(getattr(klass, "__module__", "")).startswith("pydantic."):
            continue  # pydantic's own machinery reads and writes fields and private attributes, which _has sees
        if "__getattr__" in vars(klass):
            unsure = True
        for function in list(vars(klass).values()):
            if not inspect.isfunction(function):
                continue
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
            except (OSError, TypeError, SyntaxError):
                unsure = True
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and _is_self(node.value):
                    if isinstance(node.ctx, ast.Store) and node.attr == name:
                        return True
                    unsure = unsure or node.attr == "__dict__"
                elif isinstance(node, ast.Call) and _sets_attribute(node.func) and len(node.args) > 1 and _is_self(node.args[0]):
                    target = node.args[1]  # setattr(self, "x", v), object.__setattr__(self, "x", v)
                    if isinstance(target, ast.Constant) and target.value == name:
                        return True
                    unsure = unsure or not isinstance(target, ast.Constant)
    return None if unsure else False


def _bind(spec):
    kind, value = spec
    if kind == "path":
        return _load(value, {})
    if kind == "decorated_with":
        return _load(value, {})(lambda *args, **kwargs: None)
    if kind == "unimportable":
        raise _Unimportable(value)
    if kind == "unprobed":
        name, reason = value
        try:
            return _walk(name, {})
        except (_Missing, ImportError):
            raise _Unimportable(reason) from None
    raise _Missing(value, head=True)


def _submodule(obj, part):
    """``obj.part`` when ``obj`` is a package whose submodule ``part`` was not imported yet; None if there is none."""
    if not isinstance(obj, type(builtins)) or not isinstance(getattr(obj, "__name__", None), str):
        return None
    name = obj.__name__ + "." + part
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def _walk(path, names, last_exists_only=False):
    head, _, rest = path.partition(".")
    if head in names:
        obj, parts = _bind(names[head]), (rest.split(".") if rest else [])
    else:
        obj, parts = _import_path(path)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        present = _has(obj, part) if (last and last_exists_only and isinstance(obj, type)) else hasattr(obj, part)
        child = None if present else _submodule(obj, part)
        if not present and child is None and last and last_exists_only and isinstance(obj, type):
            on_instances = _set_on_instances(obj, part)  # ``self.x = ...`` in ``__init__``: an instance attribute
            if on_instances:
                return True
            if on_instances is None:
                raise _Unimportable(path + ": not an attribute of the class, and its instances may get it where it cannot be read")
        if not present and child is None:
            raise _Missing(path + ": no attribute " + repr(part) + " on " + repr(obj))
        if last and last_exists_only:
            return True
        obj = getattr(obj, part) if present else child
    return obj


def _load(path, names):
    return _walk(path, names)


def _namespace(names, free):
    return {name: (_bind(names[name]) if name in names else _walk(name, {})) for name in free}


def _parameters(target):
    try:
        return inspect.signature(target).parameters
    except (TypeError, ValueError):
        return None


def _accepts(target, name, value, named_only):
    params = _parameters(target)
    if params is not None:
        named = [p.name for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        for key, info in (getattr(target, "model_fields", None) or {}).items():
            named += [n for n in (key, getattr(info, "alias", None)) if n and n not in named]
        if name in named:
            return True, "a named parameter; parameters: " + ", ".join(named)
        var_keyword = any(p.kind == p.VAR_KEYWORD for p in params.values())
        if named_only or not var_keyword:
            return False, "not a named parameter; parameters: " + ", ".join(named)
    try:
        target(**{name: value})
    except TypeError as exc:
        message = str(exc)
        if re.search(r"unexpected keyword|invalid keyword|takes no keyword|no keyword arguments", message):
            return False, "rejected by a call: " + message
        how = "the call got past keyword checking (TypeError: " + message + ")"
    except Exception as exc:
        how = "the call accepted the keyword, then failed: " + type(exc).__name__ + ": " + str(exc)
    else:
        how = "the call accepted the keyword"
    if params is not None:  # it reached only **kwargs, which may swallow it: accepted, but no evidence of what it does
        return None, how + ", but only through **kwargs, which may ignore it"
    return True, how


def _ignored_keywords(expr, ns):
    """The keywords of ``expr``'s outermost call that reach no named parameter or field of the callee: a pydantic model
    takes other keywords and drops them (or keeps them as extras nothing reads), and ``**kwargs`` may swallow them. The
    call evaluating is then no evidence about them. Empty when the callee cannot be read."""
    try:
        call = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return []
    keywords = [k.arg for k in getattr(call, "keywords", []) if k.arg]
    if not isinstance(call, ast.Call) or not keywords:
        return []
    try:
        target = eval(compile(ast.Expression(call.func), "<callee>", "eval"), ns)
    except Exception:
        return []
    params = _parameters(target)
    named = set()
    open_ = False
    if params is not None:
        named = {p.name for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        open_ = any(p.kind == p.VAR_KEYWORD for p in params.values())
    fields = getattr(target, "model_fields", None) if isinstance(target, type) else None
    if isinstance(fields, dict):
        for key, info in fields.items():
            named |= {n for n in (key, getattr(info, "alias", None), getattr(info, "validation_alias", None)) if isinstance(n, str)}
        open_ = (getattr(target, "model_config", None) or {}).get("extra") != "forbid"
    return [k for k in keywords if k not in named] if open_ else []


def _same(actual, expected):
    if isinstance(actual, bool) != isinstance(expected, bool):
        return False
    numbers = (int, float, complex)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        return actual == expected
    return type(actual) is type(expected) and actual == expected


def _exception_matches(exc, expected, names):
    try:
        klass = _load(expected, names)
        if isinstance(klass, type) and issubclass(klass, BaseException):
            return isinstance(exc, klass)
    except Exception:
        pass
    short = expected.rsplit(".", 1)[-1]
    return any(k.__name__ == short for k in type(exc).__mro__)


def _fingerprint(value):
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))[:500]
    return type(value).__module__ + "." + type(value).__qualname__ + ":" + text
