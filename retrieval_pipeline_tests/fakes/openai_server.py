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
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from email.message import Message
from typing import Any

from retrieval_pipeline_tests.fakes.json_server import MAX_SLEEP_S, LoopbackHandler, LoopbackServer, Reply

FAULT_KINDS: tuple[str, ...] = ("timeout", "429", "500", "truncated", "malformed")
EXTRA_FAULT_KINDS: tuple[str, ...] = ("400", "503", "disconnect")
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


def message_text(message: Mapping[str, Any]) -> str:
    """Return a message's text (string content or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _error(status: int, message: str, kind: str) -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "code": status}})


class _OpenAIHandler(LoopbackHandler):
    """Hands GETs to the fake too (``/v1/models``)."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self.server.fake._serve(self, "GET")


class FakeOpenAIServer(LoopbackServer[RecordedRequest]):
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

    handler_class = _OpenAIHandler

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
        super().__init__(script=script, timeout_sleep_s=timeout_sleep_s)
        self.model = model
        self._answers = answers
        self._fault_rate = fault_rate
        self._faults = tuple(faults)
        self._seed = seed
        self._delay_s = delay_s
        self._seen: Counter[str] = Counter()
        self._chat_count = 0

    # -- what tests read --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (only while serving)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return super().port

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` of this server."""
        return f"{self.origin}/v1"

    @property
    def chat_count(self) -> int:
        """How many chat-completion requests arrived."""
        with self._lock:
            return self._chat_count

    # -- what the base calls ----------------------------------------------------------------------

    def _parse_body(self, data: Any) -> dict[str, Any] | None:
        """Only a JSON object is a request body."""
        return data if isinstance(data, dict) else None

    def _plan(self, method: str, path: str, body: Any) -> tuple[str | None, Reply | None]:
        """The models list for a GET; for a chat POST its fault and reply, after ``delay_s`` (``None``: disconnect)."""
        if method == "GET":
            return None, self._plan_models() if path.rstrip("/") == "/v1/models" else _error(404, "no route", "not_found")
        fault: str | None = None
        if path.rstrip("/") != "/v1/chat/completions":
            reply = _error(404, "no route", "not_found")
        elif body is None:
            reply = _error(400, "body is not a JSON object", "invalid_request_error")
        else:
            fault, reply = self._plan_chat(body)
        if fault == "disconnect":
            return fault, None
        return fault, replace(reply, sleep_s=self._delay_s + reply.sleep_s)

    def _make_record(
        self, index: int, method: str, path: str, body: Any, headers: Message, fault: str | None, status: int
    ) -> RecordedRequest:
        authorized = bool(headers.get("Authorization", "").startswith("Bearer "))
        return RecordedRequest(index, method, path, body, fault, status, authorized)

    # -- the chat ---------------------------------------------------------------------------------

    def _plan_models(self) -> Reply:
        return Reply(200, {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]})

    def _plan_chat(self, body: dict[str, Any]) -> tuple[str | None, Reply]:
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

    def _faulted(self, fault: str | None, answer: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> Reply:
        """Return the response for ``fault`` (a normal completion when None)."""
        if fault == "429":
            return Reply(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}}, headers=(("Retry-After", "0"),))
        if fault in ("500", "503"):
            return _error(int(fault), "injected server error", "server_error")
        if fault == "400":
            return _error(400, "injected bad request", "invalid_request_error")
        if fault == "truncated":
            return self._completion(answer[: max(1, len(answer) // 2)], "length", messages, body)
        if fault == "malformed":
            return self._completion(MALFORMED_TEXT, "stop", messages, body)
        reply = self._completion(answer, "stop", messages, body)
        if fault == "timeout":
            return replace(reply, sleep_s=self._timeout_sleep_s)
        return reply

    def _completion(self, content: str, finish: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> Reply:
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
        return Reply(200, payload)


def _check_faults(kinds: Sequence[str]) -> None:
    known = set(FAULT_KINDS) | set(EXTRA_FAULT_KINDS)
    unknown = sorted(set(kinds) - known)
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(known)}")
