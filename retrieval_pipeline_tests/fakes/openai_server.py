"""A fault-injecting OpenAI-compatible chat server on 127.0.0.1, for tests of the LLM client.

It replays recorded answers and injects faults at ``fault_rate``::

    with FakeOpenAIServer({"capital of France": '{"answer": "Paris"}'}, fault_rate=0.3) as server:
        settings = LLMSettings(base_url=server.base_url, model=server.model)

Faults (``FAULT_KINDS``, plus ``EXTRA_FAULT_KINDS`` on request):

* ``timeout``: sleep ``timeout_sleep_s`` (longer than the client's timeout), then answer normally;
* ``429``: ``Retry-After: 0``; ``500`` / ``503``: server error; ``400``: a non-retryable client error;
* ``truncated``: the answer cut in half, ``finish_reason="length"``;
* ``malformed``: prose instead of JSON;
* ``disconnect``: close the connection without a response.

A fault is drawn from ``(seed, hash of the messages, how often these messages were seen)``, so a run
is reproducible whatever the interleaving of concurrent requests; ``script`` forces the faults of
the first chat requests in arrival order (``None`` = no fault). Every request is recorded. The
server never sleeps longer than ``MAX_SLEEP_S``, and a shutdown wakes every sleeping handler.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

FAULT_KINDS: tuple[str, ...] = ("timeout", "429", "500", "truncated", "malformed")
EXTRA_FAULT_KINDS: tuple[str, ...] = ("400", "503", "disconnect")
MAX_SLEEP_S = 5.0
MALFORMED_TEXT = "Sure! The answer is clearly the first one, as explained above."

Answers = Callable[[list[dict[str, Any]]], str | None] | Mapping[str, str]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it."""

    index: int
    method: str
    path: str
    body: dict[str, Any] | None
    fault: str | None
    status: int
    authorized: bool

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the request (empty for other endpoints)."""
        return list((self.body or {}).get("messages", []))


@dataclass(frozen=True)
class _Plan:
    """What to answer: status, JSON payload, headers, and how long to wait first."""

    status: int
    payload: dict[str, Any] | None
    headers: tuple[tuple[str, str], ...] = ()
    sleep_s: float = 0.0


def message_text(message: Mapping[str, Any]) -> str:
    """Return a message's text (string content or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _error(status: int, message: str, kind: str) -> _Plan:
    return _Plan(status, {"error": {"message": message, "type": kind, "code": status}})


class FakeOpenAIServer:
    """Serve ``POST /v1/chat/completions`` and ``GET /v1/models`` on loopback, with injected faults.

    Args:
        answers: Messages → answer text (None = unknown), or a dict whose key is a substring of a
            user message (the most recent user message that matches wins, so re-asks still match).
        fault_rate: Probability that a chat request gets a fault.
        faults: The fault kinds drawn from, uniformly.
        seed: Seed of the fault draws.
        delay_s: Latency added to every chat request.
        timeout_sleep_s: How long a ``timeout`` fault sleeps (at most ``MAX_SLEEP_S``).
        script: Faults forced on the first chat requests, in arrival order.
        model: The model name reported.
    """

    def __init__(
        self,
        answers: Answers,
        *,
        fault_rate: float = 0.0,
        faults: Sequence[str] = FAULT_KINDS,
        seed: int = 0,
        delay_s: float = 0.0,
        timeout_sleep_s: float = 2.0,
        script: Sequence[str | None] = (),
        model: str = "fake-model",
    ) -> None:
        _check_faults([*faults, *(f for f in script if f is not None)])
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError("fault_rate must be within [0, 1]")
        if max(delay_s, timeout_sleep_s) > MAX_SLEEP_S or min(delay_s, timeout_sleep_s) < 0:
            raise ValueError(f"delay_s and timeout_sleep_s must be within [0, {MAX_SLEEP_S}]")
        self.model = model
        self._answers = answers
        self._fault_rate = fault_rate
        self._faults = tuple(faults)
        self._seed = seed
        self._delay_s = delay_s
        self._timeout_sleep_s = timeout_sleep_s
        self._script = list(script)
        self._lock = threading.Condition()
        self._closing = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._seen: Counter[str] = Counter()
        self._chat_count = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Bind 127.0.0.1 on a free port and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
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

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what tests read --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` of this server."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        """How many requests arrived (any endpoint)."""
        with self._lock:
            return len(self._requests)

    @property
    def chat_count(self) -> int:
        """How many chat-completion requests arrived."""
        with self._lock:
            return self._chat_count

    @property
    def fault_counts(self) -> Counter[str]:
        """How many times each fault was injected."""
        with self._lock:
            return Counter(r.fault for r in self._requests if r.fault is not None)

    @property
    def max_in_flight(self) -> int:
        """The largest number of requests handled at the same time."""
        with self._lock:
            return self._max_in_flight

    # -- what the handler calls -------------------------------------------------------------------

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

    def _record(self, method: str, path: str, body: dict[str, Any] | None, fault: str | None, plan: _Plan,
                authorized: bool) -> None:
        with self._lock:
            index = len(self._requests)
            self._requests.append(RecordedRequest(index, method, path, body, fault, plan.status, authorized))

    def _pause(self, seconds: float) -> None:
        """Sleep at most ``seconds`` (capped), waking at once on shutdown."""
        if seconds > 0:
            self._closing.wait(min(seconds, MAX_SLEEP_S))

    def _plan_models(self) -> _Plan:
        return _Plan(200, {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]})

    def _plan_chat(self, body: dict[str, Any]) -> tuple[str | None, _Plan]:
        """Decide the fault and the response of one chat request."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None, _error(400, "'messages' must be a list", "invalid_request_error")
        fault = self._draw_fault(messages)
        answer = self._answer_for(messages)
        if answer is None:
            return fault, _error(404, "no recorded answer for these messages", "not_found_error")
        return fault, self._faulted(fault, answer, messages, body)

    def _draw_fault(self, messages: list[dict[str, Any]]) -> str | None:
        """Return the scripted fault, else a seeded draw over (messages, occurrence)."""
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            position = self._chat_count
            self._chat_count += 1
            occurrence = self._seen[digest]
            self._seen[digest] += 1
        if position < len(self._script):
            return self._script[position]
        rng = random.Random(f"{self._seed}|{digest}|{occurrence}")
        if rng.random() >= self._fault_rate:
            return None
        return rng.choice(self._faults)

    def _answer_for(self, messages: list[dict[str, Any]]) -> str | None:
        if callable(self._answers):
            return self._answers(messages)
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            text = message_text(message)
            for needle, answer in self._answers.items():
                if needle in text:
                    return answer
        return None

    def _faulted(self, fault: str | None, answer: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> _Plan:
        """Return the response for ``fault`` (a normal completion when None)."""
        if fault == "429":
            return _Plan(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}}, (("Retry-After", "0"),))
        if fault in ("500", "503"):
            return _error(int(fault), "injected server error", "server_error")
        if fault == "400":
            return _error(400, "injected bad request", "invalid_request_error")
        if fault == "truncated":
            return self._completion(answer[: max(1, len(answer) // 2)], "length", messages, body)
        if fault == "malformed":
            return self._completion(MALFORMED_TEXT, "stop", messages, body)
        plan = self._completion(answer, "stop", messages, body)
        if fault == "timeout":
            return _Plan(plan.status, plan.payload, plan.headers, self._timeout_sleep_s)
        return plan

    def _completion(self, content: str, finish: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> _Plan:
        prompt_tokens = sum(len(message_text(m).split()) for m in messages)
        completion_tokens = max(1, len(content.split()))
        with self._lock:
            number = self._chat_count
        payload = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return _Plan(200, payload)


def _check_faults(kinds: Sequence[str]) -> None:
    known = set(FAULT_KINDS) | set(EXTRA_FAULT_KINDS)
    unknown = sorted(set(kinds) - known)
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(known)}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    fake: FakeOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        with fake._slot():
            plan = fake._plan_models() if self.path.rstrip("/") == "/v1/models" else _error(404, "no route", "not_found")
            fake._record("GET", self.path, None, None, plan, self._authorized())
            self._reply(plan)

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        with fake._slot():
            body = self._read_json()
            fault: str | None = None
            if self.path.rstrip("/") != "/v1/chat/completions":
                plan = _error(404, "no route", "not_found")
            elif body is None:
                plan = _error(400, "body is not a JSON object", "invalid_request_error")
            else:
                fault, plan = fake._plan_chat(body)
            status_plan = _Plan(0, None) if fault == "disconnect" else plan
            fake._record("POST", self.path, body, fault, status_plan, self._authorized())
            if fault == "disconnect":
                self.close_connection = True
                return
            fake._pause(fake._delay_s + plan.sleep_s)
            self._reply(plan)

    def _authorized(self) -> bool:
        return bool(self.headers.get("Authorization", "").startswith("Bearer "))

    def _read_json(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            data = json.loads(self.rfile.read(length) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def _reply(self, plan: _Plan) -> None:
        data = json.dumps(plan.payload).encode("utf-8")
        try:
            self.send_response(plan.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in plan.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. after a timeout)
            self.close_connection = True
