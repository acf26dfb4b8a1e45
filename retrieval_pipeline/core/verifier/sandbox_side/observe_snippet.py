"""Run a question's code snippet once, as its suite means it, and write down what happened.

Runs INSIDE the sandbox, in the library's interpreter. Reads ``snippet_request.json`` from the working
directory:

* ``context``: the snippet file's module context (its imports and top-level definitions outside the section);
* ``section``: the section's code;
* ``module_name``: the ``__name__`` both run under;
* ``expressions``: expressions the options name, evaluated after the run (the snippet's namespace, plus
  ``result``: what the called function returned);
* ``rebind``: name -> where the library defines it now, for a ``from x import Name`` of the context that fails
  (the class moved since the suite was written).

The context runs statement by statement (one that fails is recorded with the names it would have defined);
then the section; then, when the section defines ``code_under_test`` (or only a single function), that
function is called, and awaited when it returns a coroutine. What happened goes to
``snippet.observation.json``: the exception (type, module, MRO names, message, pydantic's line errors and their
count) or
the returned value, what was printed, and each expression's value.
"""

import ast
import asyncio
import contextlib
import importlib
import inspect
import io
import json
import re
import sys
import traceback

REQUEST = "snippet_request.json"
OBSERVATION = "snippet.observation.json"
TEXT_CHARS = 4000


def cut(text, limit=TEXT_CHARS):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "...[cut]"


def safe_repr(value):
    try:
        return cut(re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value)), 1000)
    except Exception as exc:  # a repr that raises
        return "<repr raised " + type(exc).__name__ + ">"


def describe_value(value):
    text = safe_repr(value)
    try:
        literal = ast.literal_eval(text) == value
    except Exception:
        literal = False
    return {"type": type(value).__qualname__, "module": type(value).__module__, "repr": text, "literal": bool(literal)}


def describe_exception(exc):
    errors = []
    if callable(getattr(exc, "errors", None)):
        try:
            for error in exc.errors()[:20]:
                errors.append(
                    {
                        "type": str(error.get("type", "")),
                        "msg": cut(error.get("msg", ""), 1000),
                        "loc": [str(part) for part in error.get("loc", ())],
                    }
                )
        except Exception:
            errors = []
    frames = traceback.extract_tb(exc.__traceback__)
    try:
        count = exc.error_count() if callable(getattr(exc, "error_count", None)) else None
    except Exception:
        count = None
    return {
        "error_count": count if isinstance(count, int) else None,
        "type": type(exc).__qualname__,
        "module": type(exc).__module__,
        "mro": [k.__name__ for k in type(exc).__mro__],
        "message": cut(str(exc)),
        "errors": errors,
        "name": getattr(exc, "name", None) if isinstance(exc, NameError) else None,
        "where": frames[-1].filename if frames else None,
    }


def defined_names(node):
    names = []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.append(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        names += [(a.asname or a.name).split(".")[0] for a in node.names]
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def rebind(node, namespace, where):
    """Bind the names of a failed ``from x import Name`` where the library defines them now (``where``: name -> fqn)."""
    bound = {}
    if not isinstance(node, ast.ImportFrom):
        return bound
    for alias in node.names:
        fqn = where.get(alias.name)
        if not fqn or "." not in fqn:
            continue
        module, _, attribute = fqn.rpartition(".")
        try:
            namespace[alias.asname or alias.name] = getattr(importlib.import_module(module), attribute)
            bound[alias.asname or alias.name] = fqn
        except Exception:
            continue
    return bound


def run_context(source, namespace, filename, where=None):
    """Each top-level statement on its own; the failures, with the names they would have defined (and those bound
    where the library defines them now, ``rebound``)."""
    failures = []
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        return [{"line": exc.lineno, "error": "SyntaxError: " + str(exc), "names": []}]
    for node in tree.body:
        try:
            exec(compile(ast.Module(body=[node], type_ignores=[]), filename, "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - a context statement may fail in any way
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            bound = rebind(node, namespace, where or {})
            names = [n for n in defined_names(node) if n not in bound]
            failures.append({"line": node.lineno, "error": type(exc).__name__ + ": " + cut(exc, 500), "names": names, "rebound": bound})
    return failures


def only_defines(tree):
    """Whether the section only defines things (functions, classes, imports): running it shows no behaviour."""
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return all(isinstance(n, definitions) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in tree.body)


def entry_point(tree):
    """The function the section means to be called: ``code_under_test``, else its only function (when the
    section only defines things); None when the section is a script (it ran as it was executed)."""
    functions = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if "code_under_test" in functions:
        return "code_under_test"
    return functions[0] if only_defines(tree) and len(functions) == 1 else None


def observe(request):
    module_name = request.get("module_name") or "__snippet__"
    namespace = {"__name__": module_name}
    module = type(sys)(module_name)
    module.__dict__.update(namespace)
    sys.modules[module_name] = module
    namespace = module.__dict__
    observation = {"context_failures": [], "called": None, "raised": None, "returned": None, "stdout": "", "expressions": {}, "stage": None}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        observation["context_failures"] = run_context(request.get("context") or "", namespace, "<context>", request.get("rebind"))
        try:
            tree = ast.parse(request["section"], "<snippet>")
            code = compile(tree, "<snippet>", "exec")
        except (SyntaxError, ValueError) as exc:
            observation["stage"] = "compile"
            observation["compile_error"] = type(exc).__name__ + ": " + str(exc)
            return observation
        try:
            observation["stage"] = "section"
            exec(code, namespace)
            name = entry_point(tree)
            observation["called"] = name
            observation["only_defines"] = only_defines(tree)
            if name is not None:
                observation["stage"] = "call"
                result = namespace[name]()
                if inspect.isawaitable(result):
                    observation["awaited"] = True

                    async def wait(awaitable):
                        return await awaitable

                    result = asyncio.run(wait(result))
                namespace["result"] = result
                observation["returned"] = describe_value(result)
            observation["stage"] = "done"
        except Exception as exc:
            observation["raised"] = describe_exception(exc)
    observation["stdout"] = cut(out.getvalue())
    for expression in request.get("expressions") or []:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                value = eval(compile(expression, "<option>", "eval"), dict(namespace))
            observation["expressions"][expression] = describe_value(value)
        except Exception as exc:
            observation["expressions"][expression] = {"error": type(exc).__name__ + ": " + cut(exc, 500)}
    return observation


def main():
    with open(REQUEST, encoding="utf-8") as handle:
        request = json.load(handle)
    observation = observe(request)
    with open(OBSERVATION, "w", encoding="utf-8") as handle:
        json.dump(observation, handle, default=repr)


if __name__ == "__main__":
    main()
