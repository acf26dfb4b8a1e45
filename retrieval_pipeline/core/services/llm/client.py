"""A reliable JSON client for OpenAI-compatible chat endpoints (OpenAI, llama.cpp, vLLM, ...).

``LLMClient.complete_json`` asks for one JSON answer and validates it with a pydantic model:

* **cache first**: a validated answer stored under the request's key is returned with no HTTP call;
* **transport retries**: timeouts, connection errors, HTTP 429 (``Retry-After`` honoured, capped)
  and 5xx are retried up to ``max_retries`` times with capped exponential backoff and full jitter;
  any other 4xx is final at once;
* **JSON re-asks**: an answer that is not JSON (or is truncated) or violates the schema is sent back
  with a short correction, up to ``json_retries`` times;
* **no exceptions**: a call that still fails returns an ``LLMCall`` with ``value=None`` and an
  ``error``; only validated answers are cached, each as soon as it is known;
* **deadlines**: ``timeout_s`` bounds each request as a whole (connecting, sending, the headers and
  the body), not each read: a server trickling a byte every 2 s is cut off at the deadline
  (:class:`~retrieval_pipeline.core.services.llm.transport.DeadlineTransport`), and the timeout is retried like
  any other.

How to retry and the deadline are in :mod:`~retrieval_pipeline.core.services.llm.transport`; parsing and
validating an answer in :mod:`~retrieval_pipeline.core.services.llm.answers`.

The API key is never part of a repr, a log line, a stored error or the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from retrieval_pipeline.core.common.closing import Closing
from retrieval_pipeline.core.common.progress import Progress
from retrieval_pipeline.core.services.llm.answers import Schema, correction, parse_json_answer, still_valid
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.transport import DeadlineTransport, classify_error, describe_error, retrying

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

Messages = list[dict[str, Any]]
JsonRequest = tuple[Messages, Schema]

RAW_LIMIT = 2000
ERROR_LIMIT = 600
REDACTED = "[REDACTED]"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to ask: endpoint, model, reliability budget, generation parameters and prices."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    json_retries: int = 2
    max_concurrency: int = 4
    temperature: float = 0.0
    max_tokens: int = 512
    price_per_1k_prompt: float | None = None
    price_per_1k_completion: float | None = None
    response_format: Literal["json_object", "none"] = "json_object"
    extra_body: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.response_format not in ("json_object", "none"):
            raise ValueError(f"response_format must be 'json_object' or 'none', not {self.response_format!r}")
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if min(self.max_retries, self.json_retries) < 0:
            raise ValueError("max_retries and json_retries must be >= 0")
        if self.timeout_s <= 0 or self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ValueError("timeout_s must be > 0 and backoff times >= 0")

    def as_public_dict(self) -> dict[str, Any]:
        """Return every setting except the API key (safe to log or store)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "api_key"}

    def generation_params(self) -> dict[str, Any]:
        """Return the parameters that shape the answer (part of the cache key)."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "response_format": self.response_format,
            "extra_body": self.extra_body,
        }

    @property
    def has_prices(self) -> bool:
        """Whether a cost can be computed."""
        return self.price_per_1k_prompt is not None or self.price_per_1k_completion is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Return the price of the given usage, or None when no price is set."""
        if not self.has_prices:
            return None
        prompt = (self.price_per_1k_prompt or 0.0) * prompt_tokens / 1000.0
        completion = (self.price_per_1k_completion or 0.0) * completion_tokens / 1000.0
        return prompt + completion


@dataclass
class LLMCall:
    """The outcome of one ``complete_json``: a validated value or an error, never both missing."""

    key: str
    value: dict[str, Any] | None
    error: str | None
    cached: bool
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    model: str
    raw: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the call produced a validated value."""
        return self.value is not None


@dataclass(frozen=True)
class LLMStats:
    """A snapshot of a client's counters.

    ``calls`` counts HTTP requests sent; ``retries`` transport re-sends; ``reasks`` JSON re-asks;
    ``decided`` and ``failures`` count finished ``complete_json`` calls (cache hits are decided), so
    ``decided + failures`` is the number of items asked. Tokens and cost cover HTTP answers only.
    """

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    reasks: int = 0
    failures: int = 0
    decided: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None


class _Counters:
    """Thread-safe integer counters behind ``LLMClient.stats``."""

    _NAMES = (
        "calls",
        "cache_hits",
        "retries",
        "reasks",
        "failures",
        "decided",
        "prompt_tokens",
        "completion_tokens",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(self._NAMES, 0)

    def add(self, **deltas: int) -> None:
        """Add each delta to its counter."""
        with self._lock:
            for name, delta in deltas.items():
                self._values[name] += delta

    def snapshot(self, settings: LLMSettings) -> LLMStats:
        """Return the counters as an ``LLMStats`` with the cost of the tokens seen."""
        with self._lock:
            values = dict(self._values)
        return LLMStats(**values, cost=settings.cost(values["prompt_tokens"], values["completion_tokens"]))


@dataclass
class _Tally:
    """What one item has used so far across its HTTP attempts."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raw: str | None = None


@dataclass(frozen=True)
class _Reply:
    """The useful part of one chat completion."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


def cache_key(model: str, messages: Messages, params: dict[str, Any], schema: Schema) -> str:
    """Return the sha256 of the canonical JSON of model, messages, generation params and JSON schema."""
    payload = {"model": model, "messages": messages, "params": params, "schema": schema.model_json_schema()}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _reply_from(completion: Any) -> _Reply:
    """Extract text, usage and finish reason from a chat completion."""
    choices = getattr(completion, "choices", None) or []
    message = choices[0].message if choices else None
    usage = getattr(completion, "usage", None)
    return _Reply(
        text=(message.content if message is not None else None) or "",
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=choices[0].finish_reason if choices else None,
    )


class LLMClient(Closing):
    """Ask an OpenAI-compatible endpoint for JSON answers, reliably and through a cache.

    Args:
        settings: Endpoint, model and reliability budget.
        cache: Where validated answers are stored and looked up; None disables caching.
        client: A ready ``openai.OpenAI`` (or look-alike); built from ``settings`` when None.
        sleep: The function used to wait between retries (injectable for tests).
        rng: The source of backoff jitter.
    """

    def __init__(
        self,
        settings: LLMSettings,
        cache: LLMCache | None = None,
        *,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.cache = cache
        self._owns_client = client is None
        self._client = client if client is not None else self._build_client(settings)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        self._counters = _Counters()

    @staticmethod
    def _build_client(settings: LLMSettings) -> openai.OpenAI:
        """Build the OpenAI client; its own retries are off because this class retries."""
        import openai  # noqa: PLC0415  (1 s to import: only where a client is built)

        return openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "not-needed",
            timeout=settings.timeout_s,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(transport=DeadlineTransport(settings.timeout_s), timeout=settings.timeout_s),
        )

    @property
    def stats(self) -> LLMStats:
        """Return a snapshot of the counters."""
        return self._counters.snapshot(self.settings)

    def usage(self) -> dict[str, Any]:
        """Model, calls, cache hits, retries, failures and tokens (and cost when priced), as plain values for reports."""
        st = self.stats
        out: dict[str, Any] = {
            "model": self.settings.model,
            "calls": st.calls,
            "cache_hits": st.cache_hits,
            "retries": st.retries,
            "failures": st.failures,
            "prompt_tokens": st.prompt_tokens,
            "completion_tokens": st.completion_tokens,
        }
        if st.cost is not None:
            out["cost"] = st.cost
        return out

    def key_for(self, messages: Messages, schema: Schema) -> str:
        """Return the cache key of a request under these settings."""
        return cache_key(self.settings.model, messages, self.settings.generation_params(), schema)

    def complete_json(self, messages: Messages, schema: Schema) -> LLMCall:
        """Return one validated JSON answer (or an error) for ``messages``; never raises for a failed call."""
        key = self.key_for(messages, schema)
        call = self._lookup(key, schema)
        if call is None:
            call = self._solve(key, messages, schema)
        self._count_outcome(call)
        return call

    def map_json(self, requests: Sequence[JsonRequest]) -> list[LLMCall]:
        """Run many requests with at most ``max_concurrency`` in flight; results follow input order.

        Each finished item (in order) is reported to a :class:`~retrieval_pipeline.core.common.progress.Progress`.
        """
        items = list(requests)
        if not items:
            return []
        workers = min(self.settings.max_concurrency, len(items))
        calls: list[LLMCall] = []
        name = f"llm:{self.settings.model}"
        with (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-client") as pool,
            Progress(name, verb="answered", noun="requests", unit="requests", total=len(items)) as progress,
        ):
            for call in pool.map(self._complete_safely, items):
                calls.append(call)
                progress.advance()
        return calls

    def close(self) -> None:
        """Close the HTTP client if this object built it."""
        if self._owns_client:
            self._client.close()

    def __repr__(self) -> str:
        return f"LLMClient(settings={self.settings!r}, cache={self.cache!r})"

    # -- one item ---------------------------------------------------------------------------------

    def _complete_safely(self, request: JsonRequest) -> LLMCall:
        """``complete_json`` that turns an unexpected exception into an error result."""
        messages, schema = request
        try:
            return self.complete_json(messages, schema)
        except Exception as exc:  # noqa: BLE001 - one item's bug must not sink the batch
            error = self._scrub(f"unexpected {describe_error(exc)}")[:ERROR_LIMIT]
            call = LLMCall("", None, error, False, 0, 0, 0, self.settings.model)
            self._count_outcome(call)
            return call

    def _lookup(self, key: str, schema: Schema) -> LLMCall | None:
        """Return the cached answer as an ``LLMCall``, or None on a miss (or an unreadable cache)."""
        if self.cache is None:
            return None
        try:
            entry = self.cache.get(key)
        except Exception as exc:  # noqa: BLE001 - a broken cache is a miss, not a failure
            logger.warning("LLM cache lookup failed, treating as a miss: %s", self._scrub(describe_error(exc)))
            return None
        if entry is None or not still_valid(entry.value, schema):
            return None
        return LLMCall(key, entry.value, None, True, 0, entry.prompt_tokens, entry.completion_tokens, entry.model)

    def _solve(self, key: str, messages: Messages, schema: Schema) -> LLMCall:
        """Ask, re-asking on bad JSON, until a validated answer or the budget runs out."""
        tally = _Tally()
        conversation = list(messages)
        reason = "no answer"
        for ask in range(self.settings.json_retries + 1):
            if ask:
                self._counters.add(reasks=1)
            reply, transport_error = self._send(conversation, tally)
            if reply is None:
                return self._failure(key, tally, transport_error or reason)
            value, reason = parse_json_answer(reply.text, schema)
            if value is not None:
                return self._success(key, tally, value)
            reason = self._explain(reason or "invalid answer", reply, ask)
            conversation = [
                *conversation,
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": correction(reason)},
            ]
        return self._failure(key, tally, reason)

    def _explain(self, reason: str, reply: _Reply, ask: int) -> str:
        """Log a rejected answer and return its reason (noting truncation)."""
        if reply.finish_reason == "length":
            reason = f"{reason}; answer truncated at max_tokens={self.settings.max_tokens}"
        total = self.settings.json_retries + 1
        logger.info("LLM answer rejected (ask %d/%d): %s", ask + 1, total, self._scrub(reason))
        return reason

    def _send(self, conversation: Messages, tally: _Tally) -> tuple[_Reply | None, str | None]:
        """Send one request, retrying transport failures (:func:`retrying`); return ``(reply, None)`` or ``(None, error)``."""
        attempts = retrying(self.settings, classify_error, sleep=self._sleep, rng=self._rng, before_retry=self._before_retry)
        try:
            return attempts(self._request, conversation, tally), None
        except Exception as exc:  # noqa: BLE001 - the last failure; never escapes
            return None, f"{self._scrub(describe_error(exc))} (after {attempts.statistics['attempt_number']} attempt(s))"

    def _before_retry(self, attempt: int, delay: float, exc: BaseException) -> None:
        """Count and log a transport failure before the wait that precedes its re-send."""
        self._counters.add(retries=1)
        error = self._scrub(describe_error(exc))
        logger.info("LLM request failed (%s); retry %d/%d in %.2fs", error, attempt + 1, self.settings.max_retries, delay)

    def _request(self, conversation: Messages, tally: _Tally) -> _Reply:
        """Send exactly one HTTP request (bounded by the concurrency slots) and record its usage."""
        tally.attempts += 1
        self._counters.add(calls=1)
        with self._slots:
            completion = self._client.chat.completions.create(**self._request_kwargs(conversation))
        reply = _reply_from(completion)
        tally.prompt_tokens += reply.prompt_tokens
        tally.completion_tokens += reply.completion_tokens
        tally.raw = reply.text[:RAW_LIMIT]
        self._counters.add(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
        return reply

    def _request_kwargs(self, conversation: Messages) -> dict[str, Any]:
        """Return the keyword arguments of ``chat.completions.create``."""
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": conversation,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        }
        if s.response_format == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        if s.extra_body:
            kwargs["extra_body"] = s.extra_body
        return kwargs

    def _success(self, key: str, tally: _Tally, value: dict[str, Any]) -> LLMCall:
        """Build the validated result and store it in the cache at once."""
        call = self._result(key, tally, value=value, error=None)
        self._store(key, call)
        return call

    def _failure(self, key: str, tally: _Tally, reason: str) -> LLMCall:
        """Build the error result (nothing is cached)."""
        error = self._scrub(reason)[:ERROR_LIMIT]
        logger.warning("LLM call %s failed after %d request(s): %s", key[:12], tally.attempts, error)
        return self._result(key, tally, value=None, error=error)

    def _result(self, key: str, tally: _Tally, *, value: dict[str, Any] | None, error: str | None) -> LLMCall:
        """Build a fresh (non-cached) result from an item's tally."""
        return LLMCall(
            key=key,
            value=value,
            error=error,
            cached=False,
            attempts=tally.attempts,
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            model=self.settings.model,
            raw=tally.raw,
        )

    def _store(self, key: str, call: LLMCall) -> None:
        """Write a validated call to the cache; a cache failure is logged, the answer still returned."""
        if self.cache is None:
            return
        try:
            self.cache.put(key, call)
        except Exception as exc:  # noqa: BLE001 - the answer is still good
            logger.warning("LLM cache write failed: %s", self._scrub(describe_error(exc)))

    def _count_outcome(self, call: LLMCall) -> None:
        """Count a finished item as decided (and a cache hit) or failed."""
        if call.ok:
            self._counters.add(decided=1, cache_hits=int(call.cached))
        else:
            self._counters.add(failures=1)

    def _scrub(self, text: str) -> str:
        """Remove the API key and any bearer token from ``text``."""
        key = self.settings.api_key
        if key:
            text = text.replace(key, REDACTED)
        return _BEARER.sub(rf"\1{REDACTED}", text)
