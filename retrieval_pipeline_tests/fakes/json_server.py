"""Loopback JSON servers with scripted faults: the base of every fake server of the tests.

:class:`LoopbackServer` is the threaded 127.0.0.1 server itself: lifecycle, request recording,
in-flight accounting, bounded sleeps and the handler that reads JSON and sends :class:`Reply` objects.
Subclasses decide each request's fault and reply (:meth:`LoopbackServer._plan`) and what a recorded
request looks like (:meth:`LoopbackServer._make_record`).

:class:`LoopbackJSONServer` is the base of the remote-retriever fakes. Subclasses implement
:meth:`LoopbackJSONServer.answer` (one POST body in, one :class:`Reply` out). It records every request
(with its headers), applies the transport faults of :data:`TRANSPORT_FAULTS` and lets subclasses handle
their own (content) faults:

* ``timeout``: sleep ``timeout_sleep_s`` (longer than the client's timeout), then answer normally;
* ``429``: ``Retry-After: 0``; ``500`` / ``503``: a server error;
* ``garbage``: HTTP 200 with a body that is not JSON;
* ``disconnect``: close the connection without a response.

The ``i``-th POST gets the fault ``script[i]``; past the script, or where it holds ``None``, it gets
what :meth:`LoopbackJSONServer.fault_for` returns for its body (none by default). Sleeps are capped at ``MAX_SLEEP_S`` and a
shutdown wakes every sleeping handler, so a test never hangs.
"""

from __future__ import annotations

import json
import select
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

TRANSPORT_FAULTS: tuple[str, ...] = ("timeout", "429", "500", "503", "garbage", "disconnect")
MAX_SLEEP_S = 5.0
GARBAGE_BODY = b"<html><body>502 Bad Gateway (not JSON)</body></html>"


class _Recorded(Protocol):
    """What the base needs of a recorded request."""

    @property
    def fault(self) -> str | None: ...


_R = TypeVar("_R", bound=_Recorded)
_S = TypeVar("_S", bound="LoopbackServer[Any]")


@dataclass(frozen=True)
class Reply:
    """What to send: a status and a JSON payload (or raw bytes), extra headers, a wait first."""

    status: int = 200
    payload: Any = None
    raw: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    sleep_s: float = 0.0


@dataclass(frozen=True)
class SeenRequest:
    """One request as the server saw it (header names lower-cased)."""

    index: int
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    fault: str | None
    status: int


def error_reply(status: int, message: str) -> Reply:
    """An OpenAI-style error body."""
    return Reply(status, {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error"}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    fake: LoopbackServer[Any]

    def process_request(self, request: Any, client_address: Any) -> None:
        self.fake._connection_opened()
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            self.fake._connection_closed()


class LoopbackHandler(BaseHTTPRequestHandler):
    """Hands POSTs to the fake (no other method: the standard library answers 501)."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet."""

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self.server.fake._serve(self, "POST")

    def read_json(self) -> Any:
        """The request body parsed as JSON (``None`` when it is not JSON)."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            return None  # a client that gave up before its body was read still counts as a request

    def send_reply(self, reply: Reply) -> None:
        """Send ``reply``; a client that gave up (e.g. after its timeout) only closes the connection."""
        data = reply.raw if reply.raw is not None else json.dumps(reply.payload).encode("utf-8")
        content_type = "text/html" if reply.raw is not None else "application/json"
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class LoopbackServer(Generic[_R]):
    """A threaded server on 127.0.0.1 that records every request as an ``_R``; subclasses plan the replies.

    Args:
        script: Faults of the first requests a subclass draws faults for (``None`` = no fault).
        timeout_sleep_s: How long a ``timeout`` fault sleeps (the subclass checks its range).
    """

    handler_class: ClassVar[type[LoopbackHandler]] = LoopbackHandler

    def __init__(self, *, script: Sequence[str | None] = (), timeout_sleep_s: float = 1.0) -> None:
        self._script = list(script)
        self._timeout_sleep_s = timeout_sleep_s
        self._lock = threading.Condition()
        self._closing = threading.Event()
        self._requests: list[_R] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._open_connections = 0
        self._httpd: _Server | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None

    # -- what subclasses implement ----------------------------------------------------------------

    def _plan(self, method: str, path: str, body: Any) -> tuple[str | None, Reply | None]:
        """The fault and reply of one request (``None`` reply: disconnect)."""
        raise NotImplementedError

    def _make_record(self, index: int, method: str, path: str, body: Any, headers: Message, fault: str | None, status: int) -> _R:
        """The record of one request (``status`` 0: disconnected)."""
        raise NotImplementedError

    def _parse_body(self, data: Any) -> Any:
        """The body a POST's JSON stands for (``None``: not acceptable); the JSON itself by default."""
        return data

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self: _S) -> _S:
        """Bind 127.0.0.1 on a free port and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        httpd = _Server(("127.0.0.1", 0), self.handler_class)
        httpd.fake = self
        self._httpd = httpd
        self._port = int(httpd.server_address[1])
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and wait (bounded) until they have finished."""
        if self._httpd is None:
            return
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=MAX_SLEEP_S)
        with self._lock:
            self._lock.wait_for(lambda: self._in_flight == 0, timeout=MAX_SLEEP_S)
        self._httpd = None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def settle(self, timeout_s: float = MAX_SLEEP_S) -> None:
        """Wait (bounded) until no connection is waiting to be accepted or being handled.

        A client that timed out has counted its request before a busy server's handler thread recorded it;
        after this, :attr:`requests` holds every request the client sent so far.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            httpd = self._httpd
            pending = httpd is not None and bool(select.select([httpd.socket], [], [], 0)[0])
            with self._lock:
                if not pending and self._open_connections == 0:
                    return
                self._lock.wait(0.02)
        raise TimeoutError(f"the fake server still had connections after {timeout_s} s")

    def _connection_opened(self) -> None:
        with self._lock:
            self._open_connections += 1

    def _connection_closed(self) -> None:
        with self._lock:
            self._open_connections -= 1
            self._lock.notify_all()

    # -- what tests read --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (still known after ``stop``, for messages)."""
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[_R]:
        """Every request so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        """How many requests arrived (any endpoint)."""
        with self._lock:
            return len(self._requests)

    @property
    def fault_counts(self) -> Counter[str]:
        """How many times each fault was applied."""
        with self._lock:
            return Counter(r.fault for r in self._requests if r.fault is not None)

    @property
    def max_in_flight(self) -> int:
        """The largest number of requests handled at the same time."""
        with self._lock:
            return self._max_in_flight

    # -- what the handler calls -------------------------------------------------------------------

    def _serve(self, handler: LoopbackHandler, method: str) -> None:
        """Handle one request: plan, record, then disconnect or (after the reply's wait) answer."""
        with self._slot():  # in flight until its reply is ready: a client that has the reply is no longer counted
            body = self._parse_body(handler.read_json()) if method == "POST" else None
            fault, reply = self._plan(method, handler.path, body)
            self._record(method, handler.path, body, handler.headers, fault, 0 if reply is None else reply.status)
            if reply is None:
                handler.close_connection = True
                return
            self._pause(reply.sleep_s)
        handler.send_reply(reply)

    @contextmanager
    def _slot(self) -> Iterator[None]:
        """Count a request as in flight while it is handled."""
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def _record(self, method: str, path: str, body: Any, headers: Message, fault: str | None, status: int) -> None:
        with self._lock:
            self._requests.append(self._make_record(len(self._requests), method, path, body, headers, fault, status))

    def _pause(self, seconds: float) -> None:
        """Sleep at most ``seconds`` (capped), waking at once on shutdown."""
        if seconds > 0:
            self._closing.wait(min(seconds, MAX_SLEEP_S))


class LoopbackJSONServer(LoopbackServer[SeenRequest]):
    """Serve POST requests on 127.0.0.1 with scripted faults; subclasses answer.

    Args:
        script: Faults of the first POSTs, in arrival order (``None`` = no fault).
        timeout_sleep_s: How long a ``timeout`` fault sleeps (at most ``MAX_SLEEP_S``).
        known_faults: Fault names the subclass handles in :meth:`answer` (besides the transport ones).
    """

    route = "/"

    def __init__(self, *, script: Sequence[str | None] = (), timeout_sleep_s: float = 1.0, known_faults: Sequence[str] = ()) -> None:
        known = set(TRANSPORT_FAULTS) | set(known_faults)
        unknown = sorted({f for f in script if f is not None} - known)
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {sorted(known)}")
        if not 0 <= timeout_sleep_s <= MAX_SLEEP_S:
            raise ValueError(f"timeout_sleep_s must be within [0, {MAX_SLEEP_S}]")
        super().__init__(script=script, timeout_sleep_s=timeout_sleep_s)
        self._posts = 0

    # -- what subclasses implement ----------------------------------------------------------------

    def answer(self, body: Any, fault: str | None) -> Reply:
        """The reply to one POST to :attr:`route` (``fault`` is ``None`` or a subclass fault)."""
        raise NotImplementedError

    def fault_for(self, body: Any) -> str | None:
        """The fault of a request past the script (none by default)."""
        return None

    # -- the plan ---------------------------------------------------------------------------------

    def _next_fault(self, body: Any) -> str | None:
        with self._lock:
            position = self._posts
            self._posts += 1
        scripted = self._script[position] if position < len(self._script) else None
        return scripted if scripted is not None else self.fault_for(body)

    def _plan(self, method: str, path: str, body: Any) -> tuple[str | None, Reply | None]:
        """The fault and reply of one POST (``None`` reply: disconnect)."""
        if path.rstrip("/") != self.route.rstrip("/"):
            return None, error_reply(404, f"no route {path}")
        if body is None:
            return None, error_reply(400, "the body is not JSON")
        fault = self._next_fault(body)
        if fault == "disconnect":
            return fault, None
        if fault == "429":
            return fault, Reply(429, {"error": {"message": "rate limited"}}, headers=(("Retry-After", "0"),))
        if fault in ("500", "503"):
            return fault, error_reply(int(fault), "injected server error")
        if fault == "garbage":
            return fault, Reply(200, raw=GARBAGE_BODY)
        reply = self.answer(body, None if fault == "timeout" else fault)
        if fault == "timeout":
            reply = Reply(reply.status, reply.payload, reply.raw, reply.headers, self._timeout_sleep_s)
        return fault, reply

    def _make_record(self, index: int, method: str, path: str, body: Any, headers: Message, fault: str | None, status: int) -> SeenRequest:
        return SeenRequest(index, method, path, body, {k.lower(): v for k, v in headers.items()}, fault, status)
