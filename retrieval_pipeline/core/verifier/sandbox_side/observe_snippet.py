"""Run a question's code snippet once, as its suite means it, and send what happened to the host.

Runs INSIDE the sandbox, in the library's interpreter, started as ``python observe_snippet.py CHANNEL``: ``CHANNEL``
the number of a descriptor the host passed for the result (bwrap's pid 1 closes it; only this process holds it).
Reads ``snippet_request.json`` from the working directory (then removes it):

* ``context``: the snippet file's module context (its imports and top-level definitions outside the section);
* ``section``: the section's code;
* ``module_name``: the ``__name__`` both run under;
* ``expressions``: expressions the options name, evaluated after the run (the snippet's namespace, plus
  ``result``: what the called function returned);
* ``rebind``: name -> where the library defines it now, for a ``from x import Name`` of the context that fails
  (the class moved since the suite was written);
* ``nonce``: the run's secret, which the host looks for in front of the observation.

The context runs statement by statement (one that fails is recorded with the names it would have defined);
then the section; then, when the section defines ``code_under_test`` (or only a single function), that
function is called, and awaited when it returns a coroutine. What happened (the exception: type, module, MRO
names, message, pydantic's line errors and their count; or the returned value; what was printed; each
expression's value) goes to the host as one line on the channel: ``RPOBS <nonce> <json>``.

**The snippet cannot write it.** The snippet (and an option's expression) is the question author's code and runs
in this interpreter, so before any of it runs :mod:`rp_guard <.guard>` is installed: the line is written by its
audit hook alone, which holds the channel and the nonce (nowhere else in this process once the request file is
gone), and only for a request made by this file's own code with no snippet frame on the stack, in this process's
main thread, while this file's functions and the modules they use are as they were (``rp.check`` is asked after
every call into the snippet's objects, so a patch made in one and undone in the next is seen too). Anything the
snippet does to get round it (``ctypes``, ``gc``, ``/proc/self/mem``, a tracer, code under this file's name, a
program started) ends the run at once. A snippet that leaves first (``os._exit``, a signal, a limit) leaves no
observation. What the snippet does in its own objects (an exception's ``__str__``) is what it does: that is
observed, not trusted.
"""

import _thread
import ast
import asyncio
import builtins
import contextlib
import importlib
import inspect
import io
import json
import os
import re
import sys
import threading

REQUEST = "snippet_request.json"
OBSERVATION = "snippet.observation.json"
GUARD_MODULE = "rp_guard"
TEXT_CHARS = 4000
#: What the host looks for in front of the observation, with the nonce.
PREFIX = "RPOBS "
#: Asked after every call into the snippet's objects: the guard checks that nothing the observer uses was changed.
CHECK = "rp.check"


def cut(text, limit=TEXT_CHARS, _str=str, _len=len):
    text = _str(text)
    return text if _len(text) <= limit else text[:limit] + "...[cut]"


def safe_repr(value, _repr=repr, _sub=re.sub, _cut=cut, _type=type, _audit=sys.audit):
    try:
        text = _repr(value)
    except Exception as exc:  # a repr that raises
        _audit(CHECK)
        return "<repr raised " + _type(exc).__name__ + ">"
    _audit(CHECK)
    if _type(text) is not str:
        return "<repr gave no text>"
    return _cut(_sub(r" at 0x[0-9a-fA-F]+", "", text), 1000)


def describe_value(value, _safe_repr=safe_repr, _literal=ast.literal_eval, _type=type, _bool=bool, _audit=sys.audit):
    text = _safe_repr(value)
    try:
        literal = _bool(_literal(text) == value)
    except Exception:
        literal = False
    _audit(CHECK)
    kind = _type(value)
    return {"type": kind.__qualname__, "module": kind.__module__, "repr": text, "literal": literal}


def describe_exception(exc, _cut=cut, _type=type, _str=str, _int=int, _dict=dict, _list=list, _callable=callable,
                       _getattr=getattr, _isinstance=isinstance, _audit=sys.audit):  # fmt: skip
    """What was raised, as data: every call into the exception's own methods (``errors()``, ``str()``) is followed by
    a check that it changed nothing the observer uses."""
    errors = []
    method = _getattr(exc, "errors", None)
    _audit(CHECK)
    if _callable(method):
        try:
            found = method()
            _audit(CHECK)
            if _type(found) is _list:
                for error in found[:20]:
                    if _type(error) is not _dict:
                        continue
                    loc = error.get("loc", ())
                    errors.append(
                        {
                            "type": _cut(error.get("type", ""), 200),
                            "msg": _cut(error.get("msg", ""), 1000),
                            "loc": [_cut(part, 200) for part in (loc if _type(loc) in (tuple, _list) else ())],
                        }
                    )
                    _audit(CHECK)
        except Exception:
            errors = []
        _audit(CHECK)
    tb, where = exc.__traceback__, None
    while tb is not None:
        where = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    counter = _getattr(exc, "error_count", None)
    _audit(CHECK)
    try:
        count = counter() if _callable(counter) else None
    except Exception:
        count = None
    _audit(CHECK)
    klass = _type(exc)
    try:
        message = _cut(exc)
    except Exception as error:
        message = "<str() raised " + _type(error).__name__ + ">"
    _audit(CHECK)
    name = exc.name if _isinstance(exc, NameError) else None
    _audit(CHECK)
    return {
        "error_count": count if _type(count) is _int else None,
        "type": _str(klass.__qualname__),
        "module": _str(klass.__module__),
        "mro": [_str(k.__name__) for k in klass.__mro__],
        "message": message,
        "errors": errors,
        "name": name if _type(name) is _str else None,
        "where": where if _type(where) is _str else None,
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


def run_context(source, namespace, filename, where=None, _dumps=json.dumps, _audit=sys.audit):
    """Each top-level statement on its own; the failures, with the names they would have defined (and those bound
    where the library defines them now, ``rebound``), as a tuple of JSON texts (nothing the context's later statements
    could change)."""
    failures = ()
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        return (_dumps({"line": exc.lineno, "error": "SyntaxError: " + str(exc), "names": []}),)
    for node in tree.body:
        try:
            exec(compile(ast.Module(body=[node], type_ignores=[]), filename, "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - a context statement may fail in any way
            _audit(CHECK)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            bound = rebind(node, namespace, where or {})
            names = [n for n in defined_names(node) if n not in bound]
            error = type(exc).__name__ + ": " + cut(exc, 500)
            _audit(CHECK)
            failures += (_dumps({"line": node.lineno, "error": error, "names": names, "rebound": bound}),)
    _audit(CHECK)
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


async def _wait(awaitable):
    return await awaitable


def finish_threads(_enumerate=threading.enumerate, _main=threading.main_thread, _audit=sys.audit):
    """Wait for the snippet's non-daemon threads, as the interpreter's exit would (a thread that never ends makes the
    run time out: what the snippet does is hang)."""
    for thread in _enumerate():
        _audit(CHECK)
        if thread is not _main() and not thread.daemon:
            thread.join()
    _audit(CHECK)


def observe(request, _dumps=json.dumps, _loads=json.loads, _audit=sys.audit, _str=str, _tuple=tuple, _count=_thread._count):
    """Run the request (see the module docstring); the observation as JSON text.

    Everything the snippet or an expression could reach is kept as text or tuples (immutable) between the steps, so
    code of theirs that finds this frame's objects can change none of what is recorded. The snippet's threads are
    waited for before what it did is described; a thread still running then (a daemon) could change the description
    while it is made, so the observation is only ``{"threads_running": n}``.
    """
    module_name = _str(request.get("module_name") or "__snippet__")
    context, section = _str(request.get("context") or ""), _str(request["section"])
    expressions = _tuple(_str(e) for e in request.get("expressions") or [])
    where = {_str(k): _str(v) for k, v in (request.get("rebind") or {}).items()}
    module = type(sys)(module_name)
    sys.modules[module_name] = module
    namespace = module.__dict__
    stage, compile_error, called, only, awaited, raised, returned = None, None, None, None, None, None, None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        failures = run_context(context, namespace, "<context>", where)
        try:
            tree = ast.parse(section, "<snippet>")
            code = compile(tree, "<snippet>", "exec")
        except (SyntaxError, ValueError) as exc:
            stage, compile_error = "compile", type(exc).__name__ + ": " + str(exc)
            code = None
        if code is not None:
            name = entry_point(tree)
            only = only_defines(tree)
            try:
                stage = "section"
                exec(code, namespace)
                _audit(CHECK)
                called = name
                if name is not None:
                    stage = "call"
                    result = namespace[name]()
                    _audit(CHECK)
                    if inspect.isawaitable(result):
                        awaited = True
                        result = asyncio.run(_wait(result))
                        _audit(CHECK)
                    namespace["result"] = result
                stage = "done"
            except Exception as exc:
                _audit(CHECK)
                finish_threads()
                if not _count():
                    raised = _dumps(describe_exception(exc))
            else:
                finish_threads()
                if called is not None and not _count():
                    returned = _dumps(describe_value(result))
    _audit(CHECK)
    if _count():
        return _dumps({"threads_running": _count()})
    printed = cut(out.getvalue())
    _audit(CHECK)
    values = ()
    for expression in expressions if code is not None else ():
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                value = eval(compile(expression, "<option>", "eval"), dict(namespace))
                _audit(CHECK)
            values += ((expression, _dumps(describe_value(value))),)
        except Exception as exc:
            _audit(CHECK)
            values += ((expression, _dumps({"error": type(exc).__name__ + ": " + cut(exc, 500)})),)
    _audit(CHECK)
    observation = {
        "context_failures": [_loads(f) for f in failures],
        "called": called,
        "raised": None if raised is None else _loads(raised),
        "returned": None if returned is None else _loads(returned),
        "stdout": printed,
        "expressions": {e: _loads(v) for e, v in values},
        "stage": stage,
    }
    if compile_error is not None:
        observation["compile_error"] = compile_error
    if only is not None and stage != "compile":
        observation["only_defines"] = only
    if awaited:
        observation["awaited"] = True
    return _dumps(observation)


def main():
    """Read the request, guard the record, run, and hand the observation to the guard (see the module docstring)."""
    with open(REQUEST, encoding="utf-8") as handle:
        request = json.load(handle)
    os.unlink(REQUEST)
    channel = int(sys.argv[1])
    guard = importlib.import_module(GUARD_MODULE)
    prefix = (PREFIX + request.pop("nonce") + " ").encode("ascii")
    trusted = sys._getframe(0).f_code.co_filename
    watched = [sys.modules[__name__], builtins, json, json.encoder, json.decoder, ast, re, io, contextlib, inspect]
    guard._rp_guard_install(trusted, ("fd", channel, prefix), protected=(OBSERVATION,), watched=watched)
    del prefix, guard
    sys.audit("rp.record", observe(request))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
