"""Import gold strings in the library's own environment and say what each turned out to be.

Runs INSIDE the sandbox, in the library's interpreter (``python -I``), standard library only. Reads
``request.json`` from the working directory:

* ``golds``: the dotted names to import;
* ``paths``: folders put first on ``sys.path``;
* ``max_error_chars``: characters of an exception kept per gold.

Writes ``imports.result.json``: the interpreter's Python version and path, and per gold its canonical path
(``__module__`` + ``__qualname__``, a module's ``__name__``), its kind, whether importing that path gives the
very same object, or the exception the import raised.
"""

import importlib
import inspect
import json
import sys

REQUEST = "request.json"
RESULT = "imports.result.json"


def locate(name):
    """Import the longest importable module prefix of ``name``, then walk the attributes left."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing and (module_name == missing or module_name.startswith(missing + ".")):
                continue  # this prefix is not a module (an attribute, or nothing): try a shorter one
            raise  # the module exists but imports something that does not
        break
    else:
        raise ModuleNotFoundError(f"No module named {parts[0]!r}", name=parts[0])
    for attribute in parts[cut:]:
        found = getattr(found, attribute)
    return found


def describe(found):
    """(canonical path or None, kind) of an imported object."""
    if inspect.ismodule(found):
        return found.__name__, "module"
    kind = "class" if inspect.isclass(found) else "function" if inspect.isroutine(found) else "object:" + type(found).__name__
    module, qualname = getattr(found, "__module__", None), getattr(found, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return module + "." + qualname, kind
    return None, kind


def same_object(path, found):
    """Whether importing ``path`` gives ``found`` itself (False when it cannot be imported)."""
    if "<locals>" in path:
        return False
    try:
        return locate(path) is found
    except BaseException:
        return False


def answer(gold, limit):
    """The record of one gold; an exception's text is cut to ``limit`` characters."""
    try:
        found = locate(gold)
    except BaseException as exc:  # a module may raise anything, SystemExit included: recorded, never fatal
        error = (type(exc).__name__ + ": " + str(exc))[:limit]
        return {"gold": gold, "canonical": None, "kind": None, "identical": False, "error": error}
    canonical, kind = describe(found)
    identical = canonical is not None and same_object(canonical, found)
    error = None if canonical else "the object (" + kind + ") has no __module__/__qualname__: no canonical path"
    return {"gold": gold, "canonical": canonical, "kind": kind, "identical": identical, "error": error}


def main():
    with open(REQUEST, encoding="utf-8") as handle:
        request = json.load(handle)
    sys.path[:0] = request["paths"]
    results = [answer(gold, request["max_error_chars"]) for gold in request["golds"]]
    with open(RESULT, "w", encoding="utf-8") as handle:
        json.dump({"python_version": sys.version.split()[0], "executable": sys.executable, "results": results}, handle)


if __name__ == "__main__":
    main()
