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
  (:class:`DeadlineTransport`), and the timeout is retried like any other.

The API key is never part of a repr, a log line, a stored error or the cache.
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

import openai
import pydantic

from retrieval_pipeline.core.closing import Closing
from retrieval_pipeline.core.llm.cache import LLMCache

logger = logging.getLogger(__name__)

# the httpx the installed openai builds its client on (openai 3 uses the httpx2 fork), and its httpcore
_HTTPX_NAME = next(c.__module__.partition(".")[0] for c in openai.DefaultHttpxClient.__mro__ if c.__module__.startswith("httpx"))
httpx: Any = importlib.import_module(_HTTPX_NAME)
httpcore: Any = importlib.import_module(_HTTPX_NAME.replace("httpx", "httpcore", 1))

Messages = list[dict[str, Any]]
Schema = type[pydantic.BaseModel]
JsonRequest = tuple[Messages, Schema]

RAW_LIMIT = 2000
ERROR_LIMIT = 600
REDACTED = "[REDACTED]"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")
_OPEN_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?")


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


class BackoffPolicy(Protocol):
    """What :func:`backoff_delay` reads: ``LLMSettings`` or any other retry policy (e.g. a remote retriever's)."""

    @property
    def backoff_base_s(self) -> float: ...

    @property
    def backoff_max_s(self) -> float: ...


def backoff_delay(attempt: int, retry_after_s: float | None, settings: BackoffPolicy, rng: random.Random) -> float:
    """Return the wait before re-send number ``attempt + 1``.

    A server's ``Retry-After`` wins (capped at ``backoff_max_s``); otherwise full jitter over
    ``min(backoff_max_s, backoff_base_s * 2**attempt)``.
    """
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), settings.backoff_max_s)
    cap = min(settings.backoff_max_s, settings.backoff_base_s * (2.0**attempt))
    return rng.uniform(0.0, cap)


def strip_fences(text: str) -> str:
    """Return ``text`` without a surrounding Markdown code fence (```json ... ```)."""
    body = text.strip()
    if not body.startswith("```"):
        return body
    body = _OPEN_FENCE.sub("", body, count=1)
    if body.rstrip().endswith("```"):
        body = body.rstrip()[:-3]
    return body.strip()


def parse_json_answer(text: str, schema: Schema) -> tuple[dict[str, Any] | None, str | None]:
    """Parse and validate an answer; return ``(value, None)`` or ``(None, reason)``."""
    try:
        data = json.loads(strip_fences(text))
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at char {exc.pos})"
    try:
        model = schema.model_validate(data)
    except pydantic.ValidationError as exc:
        return None, f"schema violation ({_validation_summary(exc)})"
    return model.model_dump(mode="json"), None


def _validation_summary(exc: pydantic.ValidationError, limit: int = 5) -> str:
    """Return the first few validation errors as ``loc: message`` pairs."""
    parts = [f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:limit]]
    return "; ".join(parts)


def _still_valid(value: dict[str, Any], schema: Schema) -> bool:
    """Whether a cached value still validates against ``schema``."""
    try:
        schema.model_validate(value)
    except pydantic.ValidationError:
        return False
    return True


def _correction(reason: str) -> str:
    """Return the user message that re-asks after a bad answer."""
    return (
        f"Your previous answer was rejected: {reason[:300]}. "
        "Reply again with only one JSON object that follows the requested format; no prose, no code fences."
    )


def _retry_after_s(exc: openai.APIStatusError) -> float | None:
    """Return the ``Retry-After`` header in seconds, or None when absent or not a number."""
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def classify_error(exc: Exception) -> tuple[bool, float | None]:
    """Return ``(retryable, retry_after_s)`` for a failed ``openai`` request (429, 5xx, timeouts, connection errors)."""
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429:
            return True, _retry_after_s(exc)
        return exc.status_code >= 500, None
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True, None
    return False, None


def describe_error(exc: Exception) -> str:
    """Return a one-line description of a failed request."""
    status = getattr(exc, "status_code", None)
    prefix = f"{type(exc).__name__}" + (f" (HTTP {status})" if status is not None else "")
    cause = exc.__cause__
    detail = f"{exc} ({cause})" if isinstance(cause, httpx.TimeoutException) and _DEADLINE_WORDS in str(cause) else exc
    return " ".join(f"{prefix}: {detail}".split())


# -- a deadline per request ------------------------------------------------------------------------

#: The monotonic time the current thread's request must be done by, and its length in seconds.
_REQUEST_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("llm_request_deadline", default=None)
_DEADLINE_WORDS = "a deadline for the whole request"


def _remaining(timeout: float | None, exc_class: type[Exception]) -> float | None:
    """``timeout`` capped by what is left of the current request's deadline (raises ``exc_class`` when none is left)."""
    deadline = _REQUEST_DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline[0] - time.monotonic()
    if left <= 0:
        raise exc_class(f"no complete answer within {deadline[1]:g} s ({_DEADLINE_WORDS})")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read and write waits at most what is left of the request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, _remaining(timeout, httpcore.ReadTimeout))
        except httpcore.ReadTimeout:
            _remaining(None, httpcore.ReadTimeout)  # say so when it was the deadline
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, _remaining(timeout, httpcore.WriteTimeout))
        except httpcore.WriteTimeout:
            _remaining(None, httpcore.WriteTimeout)
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _remaining(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """Connections whose streams keep to the request's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _remaining(timeout, httpcore.ConnectTimeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _remaining(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """An httpx transport whose ``timeout_s`` bounds each request as a whole, body included.

    httpx's timeouts bound each read; here every read and write of a request waits at most what is left
    of ``timeout_s`` from the moment the request is handed over, so a server that trickles its headers or
    its body cannot hold a call past the deadline (``httpx.ReadTimeout``, an ``APITimeoutError`` for openai).
    """

    def __init__(self, timeout_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout_s = timeout_s
        pool = getattr(self, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:  # pragma: no cover - an httpcore without the attribute: per-read timeouts only
            logger.warning("httpcore %s: the LLM request deadline falls back to per-read timeouts", httpcore.__version__)
        else:
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # the deadline stays set after the call: httpx reads the body right after, in this thread
        _REQUEST_DEADLINE.set((time.monotonic() + self.timeout_s, self.timeout_s))
        return super().handle_request(request)


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
        """Run many requests with at most ``max_concurrency`` in flight; results follow input order."""
        items = list(requests)
        if not items:
            return []
        workers = min(self.settings.max_concurrency, len(items))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-client") as pool:
            return list(pool.map(self._complete_safely, items))

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
        if entry is None or not _still_valid(entry.value, schema):
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
                {"role": "user", "content": _correction(reason)},
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
        """Send one request, retrying transport failures; return ``(reply, None)`` or ``(None, error)``."""
        error = "no request sent"
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                self._counters.add(retries=1)
            try:
                reply = self._request(conversation, tally)
            except Exception as exc:  # noqa: BLE001 - classified below; never escapes
                retryable, retry_after = classify_error(exc)
                error = self._scrub(describe_error(exc))
                if not retryable or attempt == self.settings.max_retries:
                    return None, f"{error} (after {attempt + 1} attempt(s))"
                self._wait(attempt, retry_after, error)
                continue
            return reply, None
        return None, error

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

    def _wait(self, attempt: int, retry_after: float | None, error: str) -> None:
        """Log a transport failure and sleep before the next attempt."""
        delay = backoff_delay(attempt, retry_after, self.settings, self._rng)
        total = self.settings.max_retries
        logger.info("LLM request failed (%s); retry %d/%d in %.2fs", error, attempt + 1, total, delay)
        self._sleep(delay)

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
