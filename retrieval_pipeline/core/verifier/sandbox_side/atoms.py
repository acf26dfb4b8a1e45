"""The atom checks run inside the sandbox (see :mod:`~retrieval_pipeline.core.verifier.proofs.atom_proofs`).

This file is read as text and put after the prelude (``sandbox_side/proof_prelude.py``) in each atom proof
(:mod:`~retrieval_pipeline.core.verifier.proofs.proof_source`), so it runs in the prelude's namespace: the helpers named
under ``TYPE_CHECKING`` below are the prelude's. It imports only the standard library, so the host can import it on
its own to test the helpers that do not need the prelude.

It is one file, long as it is, because it is appended whole to the prelude and runs as one namespace in the
sandbox: every atom check shares its loaders (``_get``, ``_member``) and the dispatch table (``_ATOM_CHECKS``).
"""

import ast
import enum as _enum_module
import importlib
import inspect
import os
import re
import sys
import time  # noqa: F401 (kept: the proofs' namespace has always had it)
import types as _types_module
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the prelude this file is appended to
    _Missing = _Unimportable = Exception
    _exception_matches = _has = _namespace = _parameters = _same = _submodule = _walk = None
    _false = _true = _undecided = None


class _No(Exception):
    """The atom is false."""


class _Open(Exception):
    """The atom cannot be settled here."""


def _get(path, names):
    """Load ``path``: missing -> _No, unless only its first name could not be resolved (not proven absent)."""
    head = path.split(".")[0]
    try:
        return _walk(path, names)
    except _Unimportable as exc:
        raise _Open(str(exc)) from None
    except _Missing as exc:
        spec = names.get(head)
        if exc.head and not (spec and spec[0] == "missing"):
            raise _Open("cannot resolve " + repr(head) + ": " + str(exc)) from None
        raise _No(str(exc)) from None
    except ImportError as exc:
        raise _Open("import failed: " + type(exc).__name__ + ": " + str(exc)) from None
    except Exception as exc:
        raise _Open("loading " + path + " raised " + type(exc).__name__ + ": " + str(exc)) from None


def _named(target):
    """(parameter and field names, whether it takes **kwargs), or None when nothing can be introspected."""
    params = _parameters(target)
    names, var_kw = [], False
    if params is not None:
        names = [p.name for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    fields = getattr(target, "model_fields", None) if isinstance(target, type) else None
    for key, info in (fields if isinstance(fields, dict) else {}).items():
        for name in (key, getattr(info, "alias", None), getattr(info, "validation_alias", None)):
            if isinstance(name, str) and name not in names:
                names.append(name)
    config = getattr(target, "model_config", None) if isinstance(fields, dict) else None
    if isinstance(config, dict):  # a pydantic model: what its signature says (often ``**data``) does not decide
        var_kw = config.get("extra") != "forbid"  # "ignore" drops other keywords silently, "allow" keeps them
    for key in getattr(target, "__dataclass_fields__", None) or {}:
        if key not in names:
            names.append(key)
    if params is None and not names:
        return None
    return names, var_kw


_HEAPTYPE = 1 << 9


def _class_member(owner, name):
    """A member missing from a class's attributes: assigned in its source (an instance attribute), or absent."""
    dynamic = [
        k.__qualname__
        for k in owner.__mro__
        if "__getattr__" in vars(k) and (k.__module__ or "").split(".")[0] not in ("builtins", "pydantic")
    ]
    if dynamic:
        raise _Open(owner.__qualname__ + " computes attributes (__getattr__ in " + ", ".join(dynamic) + ")")
    config = getattr(owner, "model_config", None)
    if isinstance(config, dict) and config.get("extra") == "allow":
        raise _Open(owner.__qualname__ + " is a pydantic model with extra='allow'")
    pattern = re.compile(
        r"\bself\." + re.escape(name) + r"\s*(?::[^=\n]*)?=(?!=)|(?:setattr|__setattr__)\(\s*self\s*,\s*['\"]" + re.escape(name) + r"['\"]"
    )
    unread = []
    for klass in owner.__mro__:
        if klass is object or klass.__module__ == "builtins":
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            if klass.__flags__ & _HEAPTYPE and getattr(klass, "__dictoffset__", 0):
                unread.append(klass.__qualname__)
            continue
        if pattern.search(source):
            return "an attribute assigned in the source of " + klass.__qualname__
    if unread:
        raise _Open("no source to read for " + ", ".join(unread) + ", whose instances may hold " + name)
    raise _No(owner.__qualname__ + " has no parameter, field or attribute " + repr(name))


def _member(owner, name):
    """How ``owner`` has ``name`` (a parameter, field, attribute); _No when it has not; _Open when unknowable."""
    if _has(owner, name) or hasattr(owner, name):
        return "an attribute"
    if _submodule(owner, name) is not None:
        return "a submodule"
    named = _named(owner) if callable(owner) else None
    if named is not None and name in named[0]:
        return "a parameter or field"
    shown = getattr(owner, "__qualname__", None) or repr(owner)[:120]
    if named is not None and named[1]:
        raise _Open(shown + " may take " + repr(name) + " through **kwargs")
    if isinstance(owner, _types_module.ModuleType):
        raise _No("module " + owner.__name__ + " has no attribute " + repr(name))
    if not isinstance(owner, type):
        raise _No(shown + " has no attribute " + repr(name))
    return _class_member(owner, name)


def _atom_exists(atom, names):
    path = atom["path"]
    if "." not in path:
        _get(path, names)
        return path + " exists"
    owner_path, _, name = path.rpartition(".")
    owner = _get(owner_path, names)
    return path + " exists: " + _member(owner, name)


def _atom_member(atom, names):
    owner = _get(atom["owner"], names)
    return atom["owner"] + " has " + atom["name"] + ": " + _member(owner, atom["name"])


def _atom_accepts(atom, names):
    callee = _get(atom["callee"], names)
    if not atom["keywords"]:
        return atom["callee"] + " exists"
    named = _named(callee)
    if named is None:
        raise _Open("no introspectable signature for " + atom["callee"])
    params, var_kw = named
    consumed = [k for k in atom["keywords"] if k not in params]
    if consumed and not var_kw:
        raise _No(atom["callee"] + " does not accept " + ", ".join(consumed) + "; it takes: " + ", ".join(params))
    if consumed:
        raise _Open(atom["callee"] + " may take " + ", ".join(consumed) + " through **kwargs")
    return atom["callee"] + " accepts " + ", ".join(atom["keywords"])


def _atom_subclass(atom, names):
    klass, base = _get(atom["path"], names), _get(atom["base"], names)
    if not (isinstance(klass, type) and isinstance(base, type)):
        raise _Open(atom["path"] + " and " + atom["base"] + " are not both classes")
    if base in klass.__mro__[1:]:
        return atom["path"] + " derives from " + atom["base"]
    raise _No(
        atom["path"] + " does not derive from " + atom["base"] + "; its bases: " + ", ".join(k.__qualname__ for k in klass.__mro__[1:])
    )


def _atom_role(atom, names):
    obj = _get(atom["path"], names)
    bases = tuple(_get(b, names) for b in atom["bases"])
    if not all(isinstance(b, type) for b in bases):
        raise _Open("a role base is not a class")
    shown = " or ".join(atom["bases"])
    if isinstance(obj, type):
        if issubclass(obj, bases):
            return atom["path"] + " is a subclass of " + shown
        raise _No(atom["path"] + " is not a subclass of " + shown)
    if isinstance(obj, bases):
        return atom["path"] + " is an instance of " + shown
    raise _No(atom["path"] + " is neither a subclass nor an instance of " + shown)


def _evaluate(atom, names):
    try:
        ns = _namespace(names, list(atom.get("free") or []))
    except _Unimportable as exc:
        raise _Open(str(exc)) from None
    except (_Missing, ImportError, AttributeError) as exc:
        raise _Open("cannot set up: " + type(exc).__name__ + ": " + str(exc)) from None
    if atom.get("setup"):
        try:
            exec(atom["setup"], ns)
        except Exception as exc:
            raise _Open("the setup failed: " + type(exc).__name__ + ": " + str(exc)) from None
    try:
        code = compile(atom["expr"], "<option>", "eval")
    except (SyntaxError, ValueError) as exc:
        raise _Open("the expression does not compile: " + str(exc)) from None
    try:
        return eval(code, ns), None
    except Exception as exc:
        return None, exc


def _atom_raises(atom, names):
    result, raised = _evaluate(atom, names)
    if raised is None:
        raise _No(atom["expr"] + " returns " + repr(result)[:200] + " without raising")
    if not _exception_matches(raised, atom["exception"], names):
        raise _No(atom["expr"] + " raises " + type(raised).__name__ + ", not " + atom["exception"])
    return atom["expr"] + " raises " + type(raised).__name__ + ": " + str(raised)[:200]


def _atom_returns(atom, names):
    result, raised = _evaluate(atom, names)
    if raised is not None:
        raise _No(atom["expr"] + " raises " + type(raised).__name__ + ": " + str(raised)[:200])
    if atom.get("expected") is not None:
        expected = ast.literal_eval(atom["expected"])
        if not _same(result, expected):
            raise _No(atom["expr"] + " returns " + repr(result)[:200] + ", not " + repr(expected))
        return atom["expr"] + " returns " + repr(result)[:200]
    kind = _get(atom["type"], names)
    if not isinstance(kind, type):
        raise _Open(atom["type"] + " is not a type")
    numeric = kind in (int, float, complex)
    if isinstance(result, kind) and not (numeric and isinstance(result, bool)):
        return atom["expr"] + " returns a " + type(result).__qualname__
    raise _No(atom["expr"] + " returns a " + type(result).__qualname__ + ", not a " + atom["type"])


def _default_of(owner, name):
    """("value", v), ("required", None) or None (no default found where defaults live)."""
    fields = getattr(owner, "model_fields", None) if isinstance(owner, type) else None
    if isinstance(fields, dict) and name in fields:
        info = fields[name]
        if info.is_required():
            return "required", None
        if info.default_factory is not None:
            try:
                return "value", info.default_factory()
            except TypeError:
                raise _Open(name + " has a default factory that needs the other fields") from None
        return "value", info.default
    dataclass_fields = getattr(owner, "__dataclass_fields__", None) or {}
    if name in dataclass_fields:
        spec = dataclass_fields[name]
        missing = type(spec.default).__name__ == "_MISSING_TYPE"
        if missing and type(spec.default_factory).__name__ == "_MISSING_TYPE":
            return "required", None
        return "value", spec.default_factory() if missing else spec.default
    params = _parameters(owner) if callable(owner) else None
    if params is not None and name in params:
        param = params[name]
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return None
        return ("required", None) if param.default is param.empty else ("value", param.default)
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                value = vars(klass)[name]
                if callable(value) or hasattr(value, "__get__"):
                    return None
                return "value", value
    return None


def _atom_default(atom, names):
    owner = _get(atom["owner"], names)
    found = _default_of(owner, atom["name"])
    if found is None:
        raise _Open("no default of " + atom["name"] + " found on " + atom["owner"])
    kind, value = found
    if kind == "required":
        raise _No(atom["owner"] + "." + atom["name"] + " is required: it has no default")
    expected = ast.literal_eval(atom["expected"])
    if not _same(value, expected):
        raise _No(atom["owner"] + "." + atom["name"] + " defaults to " + repr(value)[:200] + ", not " + repr(expected))
    return atom["owner"] + "." + atom["name"] + " defaults to " + repr(value)[:200]


def _atom_enum_member(atom, names):
    klass = _get(atom["enum"], names)
    if not (isinstance(klass, type) and issubclass(klass, _enum_module.Enum)):
        raise _Open(atom["enum"] + " is not an enum")
    if atom["member"] in klass.__members__:
        return atom["enum"] + "." + atom["member"] + " is a member"
    raise _No(atom["enum"] + " has no member " + atom["member"] + "; its members: " + ", ".join(list(klass.__members__)[:40]))


def _atom_required(atom, names):
    owner = _get(atom["owner"], names)
    name, want = atom["name"], atom["required"]
    fields = getattr(owner, "model_fields", None) if isinstance(owner, type) else None
    if isinstance(fields, dict) and name in fields:
        required = fields[name].is_required()
    else:
        params = _parameters(owner)
        if params is None:
            raise _Open("no introspectable signature for " + atom["owner"])
        if name in params and params[name].kind not in (params[name].VAR_POSITIONAL, params[name].VAR_KEYWORD):
            required = params[name].default is params[name].empty
        elif want and any(p.kind == p.VAR_KEYWORD for p in params.values()):  # **kwargs cannot require it by signature
            raise _No(name + " is not a named parameter of " + atom["owner"] + ", so nothing requires it; it takes: " + ", ".join(params))
        elif any(p.kind == p.VAR_KEYWORD for p in params.values()):
            raise _Open(atom["owner"] + " may take " + name + " through **kwargs")
        else:
            raise _No(name + " is not a parameter of " + atom["owner"] + "; it takes: " + ", ".join(params))
    word = "required" if required else "optional"
    if required != want:
        raise _No(name + " of " + atom["owner"] + " is " + word)
    return name + " of " + atom["owner"] + " is " + word


#: CPU seconds the environment-variable check's source search (grep) may use before it gives up (undecided). A
#: budget of CPU, not of wall time: reading gigabytes of site-packages from a cold page cache on a busy disk took
#: 59 s of wall time for 3.3 s of CPU here, and a wall-clock budget then left an answerable option undecided.
ENV_SCAN_CPU_S = 14.0
#: Wall seconds after which the search is stopped anyway (a stuck filesystem); the sandbox's own timeout, which
#: retries a proof with more time, normally ends first.
ENV_SCAN_WALL_S = 600.0


def _scan_roots():
    """The folders of ``sys.path`` to search, the standard library's first (most variables are Python's own)."""
    import sysconfig

    here = os.path.realpath(os.getcwd())
    roots = {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)} - {here}
    stdlib = {os.path.realpath(sysconfig.get_path(key)) for key in ("stdlib", "platstdlib")}
    first = sorted(roots & stdlib)
    return [group for group in (first, sorted(roots - stdlib)) if group]


def _grep(command, roots):
    """``grep`` over ``roots`` with a CPU-time limit: a cold page cache or a busy disk costs wall time, not CPU."""
    import resource
    import signal
    import subprocess

    def limit():  # within the sandbox's own limit, which may be lower
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = int(ENV_SCAN_CPU_S) if hard == resource.RLIM_INFINITY else min(int(ENV_SCAN_CPU_S), hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))

    try:
        done = subprocess.run(command + roots, capture_output=True, timeout=ENV_SCAN_WALL_S, text=True, errors="replace", preexec_fn=limit)
    except (OSError, subprocess.SubprocessError) as exc:
        raise _Open("the source scan failed: " + type(exc).__name__ + ": " + str(exc)) from None
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise _Open("the source scan used up its " + str(ENV_SCAN_CPU_S) + " s of CPU time")
    return done


def _atom_env_var(atom, names):
    """Some installed .py file (standard library and site-packages) mentions the variable: grep, then read the hits.

    The standard library is searched first and a mention there ends the search; only a variable that no file
    mentions needs every folder read.
    """
    name = atom["name"]
    prefixes = [name[: i + 1] for i, char in enumerate(name[:-1]) if char == "_" and i >= 2]
    partial = [q + p + end for p in prefixes for q in ("'", '"') for end in (q, "{")]
    command = ["grep", "-r", "-l", "-s", "-F", "--include=*.py", "-e", name]
    for pattern in partial:
        command += ["-e", pattern]
    groups = _scan_roots()
    built = None
    for roots in groups:
        done = _grep(command, roots)
        for path in (line for line in done.stdout.splitlines() if line):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            if name in text:
                return path + " mentions " + name
            built = built or next((path + " holds " + p for p in partial if p in text), None)
        if done.returncode not in (0, 1):
            raise _Open("the source scan could not read every file (grep exit " + str(done.returncode) + ")")
    if built:
        raise _Open(name + " is mentioned nowhere, but " + built + ": the name may be built from it")
    raise _No("no installed Python source under " + ", ".join(r for g in groups for r in g) + " mentions " + name)


def _atom_cli_option(atom, names):
    import importlib.metadata as metadata

    words, flag = atom["command"], atom["option"]
    scripts = [e for e in metadata.entry_points(group="console_scripts") if e.name == words[0]]
    if not scripts:
        raise _Open("no console script named " + repr(words[0]) + " is installed")
    try:
        command = scripts[0].load()
        import click
    except Exception as exc:
        raise _Open("cannot load the console script " + words[0] + ": " + type(exc).__name__ + ": " + str(exc)) from None
    if not isinstance(command, click.Command):  # a function that calls its module's click command: ``main(): cli()``
        module = sys.modules.get(getattr(command, "__module__", "") or "")
        called = set(getattr(getattr(command, "__code__", None), "co_names", ()))
        found = [v for k, v in vars(module or object()).items() if k in called and isinstance(v, click.Command)]
        if len(found) != 1:
            raise _Open(words[0] + " is not a click command: its flags cannot be listed")
        command = found[0]
    context = click.Context(command, info_name=words[0])
    for word in words[1:]:
        sub = command.get_command(context, word) if isinstance(command, click.Group) else None
        if sub is None:
            raise _Open(" ".join(words) + ": no subcommand " + repr(word) + " (the question's command is not there)")
        command, context = sub, click.Context(sub, info_name=word, parent=context)
    flags = sorted(
        {
            o
            for p in command.params
            for o in list(getattr(p, "opts", []) or []) + list(getattr(p, "secondary_opts", []) or [])
            if o.startswith("-")
        }
    )
    if flag in flags:
        return " ".join(words) + " has " + flag
    raise _No(" ".join(words) + " has no " + flag + "; its flags: " + ", ".join(flags))


def _atom_import(atom, names):
    module = atom["module"]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise _No("no module " + module + ": " + str(exc)) from None
        raise _Open("importing " + module + " failed: " + str(exc)) from None
    except Exception as exc:
        raise _Open("importing " + module + " raised " + type(exc).__name__ + ": " + str(exc)) from None
    return module + " imports"


def _own_functions(klass):
    """(name, function) of every method ``klass`` resolves that its own distribution defines (not pydantic's, abc's...)."""
    top = (klass.__module__ or "").split(".")[0]
    for name in dir(klass):
        try:
            static = inspect.getattr_static(klass, name)
        except AttributeError:
            continue
        func = getattr(static, "__func__", static)
        if inspect.isfunction(func) and (getattr(func, "__module__", "") or "").split(".")[0] == top:
            yield name, func


def _atom_abstract(atom, names):
    """A class is abstract: abstract methods, ``abc.ABC`` among its own bases (or ``abc.ABCMeta`` as its very
    metaclass; pydantic's, which derives from it, does not count), or a method left to subclasses
    (``raise NotImplementedError``). False only for a class with none of these whose name and docstring do not
    call it a base either."""
    klass = _get(atom["path"], names)
    if not isinstance(klass, type):
        raise _Open(atom["path"] + " is not a class")
    if inspect.isabstract(klass):
        return atom["path"] + " has abstract methods: " + ", ".join(sorted(klass.__abstractmethods__))
    if any(base.__module__ == "abc" for base in klass.__bases__) or type(klass).__module__ == "abc":
        return atom["path"] + " names abc.ABC among its own bases, or abc.ABCMeta as its metaclass"
    unread = []
    for name, func in _own_functions(klass):
        try:
            source = inspect.getsource(func)
        except (OSError, TypeError):
            unread.append(name)
            continue
        if re.search(r"\braise\s+NotImplementedError\b", source):
            return atom["path"] + "." + name + " raises NotImplementedError: it is left to subclasses"
    if unread:
        raise _Open("no source to read for " + ", ".join(unread[:5]) + " of " + atom["path"])
    if re.search(r"^(?:Base|Abstract)[A-Z]|(?:Base|Abstract|Mixin|Interface|Protocol)$", klass.__name__):
        raise _Open(klass.__name__ + " is named as a base class")
    if re.search(r"\babstract\b|\bbase class\b|\binterface\b|\bsubclass", klass.__doc__ or "", re.I):
        raise _Open("the docstring of " + klass.__name__ + " calls it a base or an interface")
    raise _No(
        atom["path"]
        + " is a concrete class: no abstract methods, no abc.ABC among its bases ("
        + ", ".join(b.__qualname__ for b in klass.__bases__)
        + "), every method implemented, and neither its name nor its docstring "
        "calls it a base"
    )


def _distribution_root(module):
    """The first package of a dotted module name that is not a namespace package: ``google.adk`` for ``google.adk.x``."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        name = ".".join(parts[:end])
        if getattr(sys.modules.get(name), "__file__", None):
            return name
    return module


def _module_closure(klass):
    """The sources of the modules that define ``klass`` and its bases in its distribution, and of every module of that
    distribution they import (anywhere in their code): what the class's behaviour can reach by name."""
    import importlib.util

    top = _distribution_root(klass.__module__ or "")
    inside = lambda name: name == top or name.startswith(top + ".")  # noqa: E731
    roots = [k.__module__ for k in klass.__mro__ if inside(k.__module__ or "")]
    seen, sources = set(), {}

    def read(name):
        module = sys.modules.get(name)
        if module is None or name in seen or not getattr(module, "__file__", None):  # not loaded, or a namespace package
            return None
        seen.add(name)
        try:
            sources[name] = inspect.getsource(module)
        except (OSError, TypeError):
            raise _Open("no source to read for module " + name) from None
        return sources[name]

    for root in dict.fromkeys(roots):
        text = read(root)
        if text is None:
            continue
        package = root if hasattr(sys.modules[root], "__path__") else root.rpartition(".")[0]
        for node in ast.walk(ast.parse(text)):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                try:
                    base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module
                except (ImportError, ValueError):
                    continue
                targets = [base] + [base + "." + a.name for a in node.names]
            for target in targets:
                if target and inside(target):
                    read(target)
    return sources


def _atom_mentions(atom, names):
    """The code behind a class mentions one of ``patterns`` (a technology: ``sqlite``); false when none of it does."""
    klass = _get(atom["path"], names)
    if not isinstance(klass, type):
        raise _Open(atom["path"] + " is not a class")
    sources = _module_closure(klass)
    if not sources:
        raise _Open("no module source found for " + atom["path"])
    for name, text in sources.items():
        for pattern in atom["patterns"]:
            if re.search(pattern, text, re.I):
                return name + " mentions " + atom["what"] + " (" + pattern + ")"
    raise _No("nothing in the modules behind " + atom["path"] + " (" + ", ".join(sorted(sources)) + ") mentions " + atom["what"])


def _atom_holds(atom, names):
    """An instance of a class built without arguments holds a ``dict`` in one of its attributes (never false)."""
    klass = _get(atom["path"], names)
    if not isinstance(klass, type):
        raise _Open(atom["path"] + " is not a class")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance = klass()
    except Exception as exc:
        raise _Open(atom["path"] + "() cannot be built without arguments: " + type(exc).__name__) from None
    held = [key for key, value in vars(instance).items() if isinstance(value, dict)] if hasattr(instance, "__dict__") else []
    if held:
        return atom["path"] + "() holds dicts in " + ", ".join(held[:5])
    raise _Open(atom["path"] + "() holds no dict in its attributes")


def _declared_type(owner, name):
    """The type ``owner`` declares for its parameter or field ``name`` (_Open when it declares none)."""
    import typing

    fields = _model_fields(owner)
    if fields and name in fields:
        return fields[name][0]
    params = _parameters(owner)
    if params is None or name not in params or params[name].annotation is inspect.Parameter.empty:
        raise _Open("no declared type for " + name)
    declared = params[name].annotation
    if isinstance(declared, str):  # postponed annotations
        try:
            declared = typing.get_type_hints(owner.__init__ if isinstance(owner, type) else owner).get(name, declared)
        except Exception as exc:
            raise _Open("cannot resolve the declared type " + repr(declared) + ": " + type(exc).__name__) from None
    return declared


def _admits_list(declared):
    """True when a declared type takes a list (``list[X]``, ``Sequence[X]``, ``Optional[list[X]]``: a list is an
    instance of it), False when it names only types a list is not (``dict``, ``str``, ``tuple``), None when it says
    nothing (``Any``, ``object``, a forward reference)."""
    import typing

    if declared is typing.Any or declared is object:
        return None
    origin = typing.get_origin(declared) or declared
    if origin is typing.Annotated:
        return _admits_list(typing.get_args(declared)[0])
    if origin in (typing.Union, _types_module.UnionType):
        found = [_admits_list(arg) for arg in typing.get_args(declared)]
        return True if True in found else (None if None in found else False)
    if origin is type(None):
        return False
    if not isinstance(origin, type):
        return None
    try:
        return issubclass(list, origin)
    except TypeError:  # a protocol or a special form that issubclass cannot read
        return None


def _atom_takes_list(atom, names):
    """A parameter or field declares a type that takes a list; false when its declared type admits none."""
    owner = _get(atom["owner"], names)
    declared = _declared_type(owner, atom["name"])
    shown = atom["owner"] + "." + atom["name"] + " is declared " + repr(declared)[:160]
    admits = _admits_list(declared)
    if admits is True:
        return shown + ": it takes a list"
    if admits is False:
        raise _No(shown + ", which takes no list")
    raise _Open(shown + ": whether it takes a list cannot be read from it")


_SAMPLE_DEPTH = 4


def _model_fields(owner):
    """Field name -> (annotation, required) of a pydantic model or dataclass; None for anything else."""
    import dataclasses
    import typing

    fields = getattr(owner, "model_fields", None) if isinstance(owner, type) else None
    if isinstance(fields, dict):
        return {name: (info.annotation, info.is_required()) for name, info in fields.items()}
    if isinstance(owner, type) and dataclasses.is_dataclass(owner):
        try:
            hints = typing.get_type_hints(owner)
        except Exception as exc:
            raise _Open("cannot read the field types of " + owner.__qualname__ + ": " + str(exc)) from None
        missing = dataclasses.MISSING
        return {
            f.name: (hints.get(f.name, typing.Any), f.default is missing and f.default_factory is missing)
            for f in dataclasses.fields(owner)
            if f.init
        }
    return None


def _sample(annotation, depth=0):
    """A truthy value of a type, so that a field given it counts as provided; _Open when none can be made."""
    import collections.abc as abc
    import typing

    if depth > _SAMPLE_DEPTH:
        raise _Open("the field types nest too deep to build a value")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is typing.Any:
        return "x"
    if origin is typing.Annotated:
        return _sample(args[0], depth)
    if origin is typing.Union or origin is getattr(_types_module, "UnionType", None):
        for arg in args:
            if arg is not type(None):
                try:
                    return _sample(arg, depth)
                except _Open:
                    continue
        raise _Open("no member of " + repr(annotation) + " can be built")
    if origin is typing.Literal:
        return args[0]
    if origin in (list, abc.Sequence, abc.MutableSequence, abc.Iterable):
        return [_sample(args[0], depth + 1) if args else "x"]
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        return {"x": _sample(args[1], depth + 1) if len(args) == 2 else "x"}
    simple = {bool: True, int: 1, float: 1.0, str: "x", bytes: b"x"}
    if annotation in simple:
        return simple[annotation]
    if isinstance(annotation, type) and issubclass(annotation, _enum_module.Enum) and list(annotation):
        return list(annotation)[0]
    if isinstance(annotation, type) and _model_fields(annotation) is not None:
        return _construct(annotation, (), depth + 1)
    raise _Open("cannot build a value of " + repr(annotation)[:120])


def _construct(owner, given, depth=0, omit=(), quiet=True):
    """``owner(**kwargs)`` with every field in ``given`` and every required field not in ``omit`` set to a sample value."""
    fields = _model_fields(owner)
    if fields is None:
        raise _Open(getattr(owner, "__qualname__", repr(owner)) + " is not a pydantic model or dataclass")
    unknown = [name for name in given if name not in fields]
    if unknown:
        raise _Open(owner.__qualname__ + " has no field " + ", ".join(unknown))
    kwargs = {
        name: _sample(annotation, depth)
        for name, (annotation, required) in fields.items()
        if name in given or (required and name not in omit)
    }
    if not quiet:
        return owner(**kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return owner(**kwargs)


def _attempt(owner, given, tried, omit):
    """Whether ``owner`` is built with the fields of ``given`` provided and the rest of ``omit`` left out (memoised)."""
    key = frozenset(given)
    if key not in tried:
        try:
            _construct(owner, sorted(key), omit=omit)
            tried[key] = (True, "")
        except _Open:
            raise
        except Exception as exc:
            tried[key] = (False, type(exc).__name__ + ": " + " ".join(str(exc).split())[:160])
    return tried[key]


def _valid_values(owner, given, tried, omit):
    """Each field of ``given`` was accepted with its sample value in some construction (tried on demand): a
    rejection of ``given`` is then the rule's, not a bad sample's."""
    for name in given:
        if any(ok and name in key for key, (ok, _) in tried.items()):
            continue
        bases = [key for key, (ok, _) in list(tried.items()) if ok and name not in key]
        if not any(_attempt(owner, key | {name}, tried, omit)[0] for key in bases):
            return False
    return True


def _atom_presence(atom, names):
    """Which combinations of provided fields ``owner`` accepts: each of ``sets`` is built and compared; ``controls``
    are built only to learn which sample values are acceptable. A field any combination names is set only where it
    is given (even a required one); every other required field always gets a sample value."""
    owner = _get(atom["owner"], names)
    tried = {}
    combinations = [case["given"] for case in atom["sets"]] + list(atom.get("controls") or [])
    omit = frozenset(name for given in combinations for name in given)  # a field the atom speaks of is only set when given
    for given in combinations:
        _attempt(owner, given, tried, omit)
    if not any(ok for ok, _ in tried.values()):
        raise _Open(
            "no combination could be built, so a rejection may be the sample values': " + "; ".join(why for _, why in tried.values())[:200]
        )
    shown = lambda given: atom["owner"] + "(" + ", ".join(sorted(given)) + ")"  # noqa: E731
    held = []
    for case in atom["sets"]:
        ok, why = tried[frozenset(case["given"])]
        if ok and not case["accepted"]:
            raise _No(shown(case["given"]) + " is accepted")
        if not ok and not _valid_values(owner, case["given"], tried, omit):
            raise _Open(shown(case["given"]) + " is rejected, but a sample value was never accepted: " + why)
        if not ok and case["accepted"]:
            raise _No(shown(case["given"]) + " is rejected: " + why)
        held.append(shown(case["given"]) + (" is accepted" if ok else " is rejected (" + why + ")"))
    return "; ".join(held)


def _atom_deprecated(atom, names):
    """A field is deprecated: pydantic's ``deprecated`` mark, or a warning when it is set; false when neither and
    the defining class's source never mentions deprecation."""
    owner = _get(atom["owner"], names)
    name = atom["name"]
    fields = getattr(owner, "model_fields", None) if isinstance(owner, type) else None
    if not isinstance(fields, dict) or name not in fields:
        raise _Open(atom["owner"] + " is not a pydantic model with a field " + repr(name))
    if getattr(fields[name], "deprecated", None):
        return atom["owner"] + "." + name + " is marked deprecated"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _construct(owner, [name], quiet=False)
        except _Open:
            raise
        except Exception:
            pass
    if any(issubclass(w.category, DeprecationWarning) or "deprecat" in str(w.message).lower() for w in caught):
        return "setting " + atom["owner"] + "." + name + " warns of deprecation"
    definers = [k for k in owner.__mro__ if name in getattr(k, "__annotations__", {})] or [owner]
    for klass in definers:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            raise _Open("no source to read for " + klass.__qualname__) from None
        if re.search(r"deprecat", source, re.I):
            raise _Open("the source of " + klass.__qualname__ + " mentions deprecation")
    raise _No(
        atom["owner"] + "." + name + " is not marked deprecated, setting it gives no deprecation warning, and the "
        "source of " + definers[0].__qualname__ + " never mentions deprecation"
    )


_ATOM_CHECKS = {
    "exists": _atom_exists,
    "member": _atom_member,
    "accepts": _atom_accepts,
    "subclass": _atom_subclass,
    "role": _atom_role,
    "raises": _atom_raises,
    "returns": _atom_returns,
    "default": _atom_default,
    "enum_member": _atom_enum_member,
    "required": _atom_required,
    "env_var": _atom_env_var,
    "cli_option": _atom_cli_option,
    "import": _atom_import,
    "presence": _atom_presence,
    "abstract": _atom_abstract,
    "mentions": _atom_mentions,
    "holds": _atom_holds,
    "takes_list": _atom_takes_list,
    "deprecated": _atom_deprecated,
}


def _check_once(atom, names):
    try:
        return "true", _ATOM_CHECKS[atom["check"]](atom, names)
    except _No as exc:
        return "false", str(exc)
    except _Open as exc:
        return "undecided", str(exc)
    except Exception as exc:
        return "undecided", "the check failed: " + type(exc).__name__ + ": " + str(exc)


def _readings(names):
    """Every way to read the names: a name bound to ("either", [a, b]) (``app``: a module, or an ``App``) is read both ways."""
    readings = [dict(names)]
    for key, spec in names.items():
        if spec[0] == "either":
            readings = [{**r, key: alternative} for r in readings for alternative in spec[1]]
    return readings


def _check(atom, names):
    """An atom over every reading of the names: true if one reading holds, false only if every reading fails."""
    outcomes = [_check_once(atom, reading) for reading in _readings(names)]
    for state in ("true", "undecided"):
        found = [reason for s, reason in outcomes if s == state]
        if found:
            return state, found[0]
    return "false", " / ".join(reason for _, reason in outcomes)


def _decide_atoms(atoms, names):
    results = []
    for atom in atoms:
        state, reason = _check(atom, names)
        results.append({"check": atom["check"], "state": state, "reason": reason[:300]})
    false = [r["reason"] for r in results if r["state"] == "false"]
    if false:
        _false("; ".join(false), atoms=results)
    open_ = [r["reason"] for r in results if r["state"] == "undecided"]
    if open_:
        _undecided("; ".join(open_))
    _true("; ".join(r["reason"] for r in results), atoms=results)
