"""The process a ``kind: python`` retriever plug-in runs in: started by :mod:`~retrieval_pipeline.core.retrieval.plugin_process`.

Run as a script (``python plugin_worker.py FD``), standard library only: the parent sends, over the socket ``FD``
(a :class:`multiprocessing.connection.Connection`), first ``sys.path``, then one request at a time, and this loop
answers each:

* ``("import", factory)``: import the factory's module (its own deadline: imports can be slow on a busy machine);
* ``("construct", factory, params)``: call ``package.module:factory`` with ``params``;
* ``("call", method, args)``: call the plug-in's method (``build``, ``search``, ``save``, ``load``);
* ``("has", names)``: whether the plug-in has each method (callable attributes).

An answer is ``("ok", value)`` or ``("error", "Type: message", traceback)``. ``sys.exit`` inside the plug-in is an
error answer (``SystemExit``); ``os._exit`` or a crash ends this process, which the parent sees as the end of the
socket and reports. SIGINT is ignored here (a Ctrl-C reaches the whole process group: the parent decides), and a
watchdog thread ends this process when the parent is gone, so a plug-in stuck in a loop never outlives the run.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

#: Seconds between two checks that the parent process is still there.
WATCHDOG_S = 1.0


def import_factory(target: str) -> Any:
    """The callable named ``package.module:attribute`` (dotted attributes allowed)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"factory {target!r} must look like package.module:factory")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} of factory {target!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r} (factory {target!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"factory {target!r} is not callable")
    return obj


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(WATCHDOG_S)
        if os.getppid() != parent:
            os._exit(3)


def serve(connection: Connection) -> None:
    """Answer requests until the socket ends or a ``("close",)`` request comes."""
    plugin: Any = None
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        if request[0] == "close":
            return
        try:
            if request[0] == "import":
                import_factory(request[1])
                value: Any = None
            elif request[0] == "construct":
                plugin = import_factory(request[1])(**request[2])
                value = type(plugin).__module__ + "." + type(plugin).__qualname__
            elif request[0] == "has":
                value = [callable(getattr(plugin, name, None)) for name in request[1]]
            else:
                value = getattr(plugin, request[1])(*request[2])
            answer: tuple[Any, ...] = ("ok", value)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure of the plug-in goes back to the parent
            what = (
                f"SystemExit: the plug-in called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
            )
            answer = ("error", what, traceback.format_exc(limit=20))
        try:
            connection.send(answer)
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be pickled
            connection.send(("error", f"the answer of {request[1]!r} cannot be sent to the pipeline: {type(exc).__name__}: {exc}", ""))


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    connection = Connection(int(argv[1]))
    sys.path[:] = connection.recv()
    serve(connection)


if __name__ == "__main__":
    main(sys.argv)
