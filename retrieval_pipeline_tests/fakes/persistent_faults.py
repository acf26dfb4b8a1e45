"""An OpenAI-compatible fake whose chosen prompts fail on every attempt, so the client's retries run out.

:class:`~retrieval_pipeline_tests.fakes.openai_server.FakeOpenAIServer` draws faults per request, so a
call almost always succeeds on some retry and the "undecided" path of the LLM judges never runs.
:class:`PersistentFaultServer` adds faults that are *final*: every request whose first user message
satisfies ``fails`` gets ``kind`` (``429`` with ``Retry-After: 0`` by default: retryable, and retried
without a backoff wait), whatever the seeded draw says. Switch every fault off (:meth:`PersistentFaultServer.stop_faults`) to
let a re-run succeed::

    with PersistentFaultServer(answer, fails=lambda prompt: "frobnicate" in prompt) as server:
        ...  # the matching calls fail after max_retries + 1 attempts
        server.stop_faults()  # the re-run gets answers
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrieval_pipeline_tests.fakes.openai_server import EXTRA_FAULT_KINDS, FAULT_KINDS, Answers, FakeOpenAIServer, message_text


def first_user_text(messages: list[dict[str, Any]]) -> str:
    """The first user message of a chat request: the prompt, the same on every retry and re-ask."""
    return next((message_text(m) for m in messages if m.get("role") == "user"), "")


class PersistentFaultServer(FakeOpenAIServer):
    """A :class:`FakeOpenAIServer` whose prompts matching ``fails`` get ``kind`` on every request.

    Args:
        answers: As for :class:`FakeOpenAIServer`.
        fails: ``prompt -> bool`` on the first user message; True: the request faults.
        kind: The fault given to matching requests (any of the fake's fault kinds).
        **kwargs: Passed on (``fault_rate``, ``seed``, ...): the seeded faults still apply to the other prompts.

    Raises:
        ValueError: ``kind`` is not a fault kind of the fake.
    """

    def __init__(self, answers: Answers, *, fails: Callable[[str], bool], kind: str = "429", **kwargs: Any) -> None:
        if kind not in (*FAULT_KINDS, *EXTRA_FAULT_KINDS):
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted({*FAULT_KINDS, *EXTRA_FAULT_KINDS})}")
        super().__init__(answers, **kwargs)
        self._fails = fails
        self._kind = kind
        #: While True, matching prompts fault on every attempt.
        self.persistent = True

    def _draw_fault(self, messages: list[dict[str, Any]]) -> str | None:
        drawn = super()._draw_fault(messages)  # keeps the fake's bookkeeping (counts, occurrences) as it is
        return self._kind if self.persistent and self._fails(first_user_text(messages)) else drawn

    def stop_faults(self) -> None:
        """No fault from now on: neither the persistent ones nor the seeded draws (a re-run meets a healthy server)."""
        self.persistent = False
        self._fault_rate = 0.0

    def prompts(self, start: int = 0) -> list[str]:
        """The first user message of every chat request from request number ``start`` on (see ``request_count``)."""
        return [first_user_text(r.messages) for r in self.requests[start:] if r.path.rstrip("/").endswith("/chat/completions")]
