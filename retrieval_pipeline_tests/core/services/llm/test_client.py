"""The LLM client against a fault-injecting OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import logging
import random
import re
import sqlite3
import threading
from collections import Counter
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any, Literal

import pydantic
import pytest

from retrieval_pipeline.core.services.llm import transport
from retrieval_pipeline.core.services.llm.answers import parse_json_answer, strip_fences
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMCall, LLMClient, LLMSettings, cache_key
from retrieval_pipeline.core.services.llm.transport import backoff_delay
from retrieval_pipeline_tests.fakes.openai_server import FAULT_KINDS, FakeOpenAIServer

SECRET = "sk-CANARY-7f3a9c2e5b1d4e6f8a0b"
CLIENT_TIMEOUT_S = 0.3
FAULT_SLEEP_S = 0.6
GOOD = '{"answer": "Paris", "confidence": 0.9}'


class Answer(pydantic.BaseModel):
    answer: str
    confidence: float = pydantic.Field(ge=0.0, le=1.0)


class Judgement(pydantic.BaseModel):
    label: Literal["relevant", "irrelevant"]
    score: float = pydantic.Field(ge=0.0, le=1.0)


def ask(text: str = "What is the capital of France?") -> list[dict[str, Any]]:
    return [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": text}]


class Sleeps(list):
    """A ``sleep`` that records the requested waits and returns at once."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> LLMSettings:
    base: dict[str, Any] = {"base_url": server.base_url, "model": "fake-model", "api_key": SECRET, "timeout_s": 5.0}
    return LLMSettings(**{**base, **overrides})


def has_assistant(messages: list[dict[str, Any]]) -> bool:
    return any(m["role"] == "assistant" for m in messages)


# -- success, usage, cost, cache ------------------------------------------------------------------


def test_success_returns_validated_value_usage_and_cost(tmp_path):
    with FakeOpenAIServer({"capital of France": GOOD}) as server:
        settings = settings_for(server, price_per_1k_prompt=1.0, price_per_1k_completion=2.0, max_tokens=64)
        with LLMClient(settings, LLMCache(tmp_path / "c.sqlite")) as client:
            call = client.complete_json(ask(), Answer)
        body = server.requests[0].body

    assert call.ok and call.value == {"answer": "Paris", "confidence": 0.9}
    assert (call.error, call.cached, call.attempts, call.model) == (None, False, 1, "fake-model")
    assert (call.prompt_tokens, call.completion_tokens) == (9, 4)  # the fake counts words
    stats = client.stats
    assert (stats.calls, stats.decided, stats.failures, stats.retries, stats.reasks) == (1, 1, 0, 0, 0)
    assert stats.cost == pytest.approx(9 / 1000 * 1.0 + 4 / 1000 * 2.0)
    assert body["response_format"] == {"type": "json_object"}
    assert (body["temperature"], body["max_tokens"], body["model"]) == (0.0, 64, "fake-model")
    assert server.requests[0].authorized


def test_cost_is_none_without_prices():
    with FakeOpenAIServer({"France": GOOD}) as server, LLMClient(settings_for(server)) as client:
        client.complete_json(ask(), Answer)
    assert client.stats.cost is None and client.stats.prompt_tokens > 0


def test_fenced_json_is_accepted():
    fenced = f"```json\n{GOOD}\n```"
    with FakeOpenAIServer({"France": fenced}) as server, LLMClient(settings_for(server)) as client:
        call = client.complete_json(ask(), Answer)
    assert call.value == {"answer": "Paris", "confidence": 0.9} and call.attempts == 1


def test_response_format_none_and_extra_body_reach_the_server():
    grammar = {"grammar": 'root ::= "{" "}"'}
    with FakeOpenAIServer({"France": GOOD}) as server:
        with LLMClient(settings_for(server, response_format="none", extra_body=grammar)) as client:
            client.complete_json(ask(), Answer)
        body = server.requests[0].body
    assert "response_format" not in body and body["grammar"] == grammar["grammar"]


def test_cache_hit_makes_zero_http_calls(tmp_path):
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer({"France": GOOD}) as server:
        with LLMClient(settings_for(server), LLMCache(path)) as first:
            fresh = first.complete_json(ask(), Answer)
        with LLMClient(settings_for(server), LLMCache(path)) as second:  # a new process, same file
            hit = second.complete_json(ask(), Answer)
        assert server.chat_count == 1
    assert hit.cached and hit.value == fresh.value and hit.key == fresh.key and hit.attempts == 0
    assert (hit.prompt_tokens, hit.completion_tokens) == (fresh.prompt_tokens, fresh.completion_tokens)
    assert (second.stats.calls, second.stats.cache_hits, second.stats.decided, second.stats.cost) == (0, 1, 1, None)


def test_cache_key_covers_model_messages_params_and_schema():
    params = LLMSettings(base_url="http://127.0.0.1:1/v1", model="m").generation_params()
    key = cache_key("m", ask(), params, Answer)
    assert key == cache_key("m", [dict(m) for m in ask()], dict(params), Answer)
    assert (
        len(
            {
                key,
                cache_key("other", ask(), params, Answer),
                cache_key("m", ask("another question"), params, Answer),
                cache_key("m", ask(), {**params, "temperature": 0.7}, Answer),
                cache_key("m", ask(), {**params, "extra_body": {"grammar": "x"}}, Answer),
                cache_key("m", ask(), params, Judgement),
            }
        )
        == 6
    )


# -- transport faults -----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["timeout", "429", "500", "503", "disconnect"])
def test_transport_fault_is_retried_then_succeeds(fault):
    sleeps = Sleeps()
    with FakeOpenAIServer({"France": GOOD}, script=[fault], timeout_sleep_s=FAULT_SLEEP_S) as server:
        with LLMClient(settings_for(server, timeout_s=CLIENT_TIMEOUT_S), sleep=sleeps) as client:
            call = client.complete_json(ask(), Answer)
        faults = [r.fault for r in server.requests]

    assert call.ok and call.error is None
    assert faults[0] == fault and call.attempts == len(faults) >= 2
    assert client.stats.retries == call.attempts - 1 and client.stats.reasks == 0
    assert len(sleeps) == client.stats.retries
    if fault == "429":
        assert sleeps[0] == 0.0  # Retry-After: 0 honoured


@pytest.mark.parametrize("fault", ["truncated", "malformed"])
def test_bad_content_fault_is_reasked_then_succeeds(fault):
    with FakeOpenAIServer({"France": GOOD}, script=[fault]) as server:
        with LLMClient(settings_for(server)) as client:
            call = client.complete_json(ask(), Answer)
        second = server.requests[1].messages

    assert call.ok and call.attempts == 2 and client.stats.reasks == 1 and client.stats.retries == 0
    assert second[-2]["role"] == "assistant" and second[-1]["role"] == "user"
    assert "rejected" in second[-1]["content"] and "invalid JSON" in second[-1]["content"]


@pytest.mark.parametrize("fault", ["400"])
def test_4xx_is_not_retried(fault):
    sleeps = Sleeps()
    with FakeOpenAIServer({"France": GOOD}, script=[fault]) as server:
        with LLMClient(settings_for(server), sleep=sleeps) as client:
            call = client.complete_json(ask(), Answer)
        assert server.chat_count == 1
    assert call.value is None and "HTTP 400" in call.error and call.attempts == 1
    assert sleeps == [] and (client.stats.retries, client.stats.failures) == (0, 1)


def test_unknown_prompt_404_is_final_at_once(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer({"France": GOOD}) as server, LLMClient(settings_for(server), cache) as client:
        call = client.complete_json(ask("Something never recorded"), Answer)
        assert server.chat_count == 1
    assert call.value is None and "HTTP 404" in call.error and cache.count() == 0


def test_transport_budget_exhausted_returns_error_without_raising():
    sleeps = Sleeps()
    with FakeOpenAIServer({"France": GOOD}, fault_rate=1.0, faults=("500",)) as server:
        with LLMClient(settings_for(server, max_retries=3), sleep=sleeps) as client:
            call = client.complete_json(ask(), Answer)
        assert server.chat_count == 4
    assert call.value is None and call.attempts == 4 and "HTTP 500" in call.error and "4 attempt" in call.error
    assert len(sleeps) == 3 and client.stats.failures == 1 and client.stats.decided == 0


def test_backoff_is_full_jitter_capped_and_honours_retry_after():
    settings = LLMSettings(base_url="http://127.0.0.1:1/v1", model="m", backoff_base_s=0.5, backoff_max_s=3.0)
    rng = random.Random(0)
    for attempt in range(8):
        waits = [backoff_delay(attempt, None, settings, rng) for _ in range(50)]
        assert all(0.0 <= w <= min(3.0, 0.5 * 2**attempt) for w in waits)
        assert len(set(waits)) > 1  # jittered
    assert backoff_delay(0, 0.0, settings, rng) == 0.0
    assert backoff_delay(0, 2.0, settings, rng) == 2.0
    assert backoff_delay(0, 120.0, settings, rng) == 3.0  # capped


# -- JSON re-asks and schema ----------------------------------------------------------------------


def test_invalid_json_is_reasked_with_the_bad_answer_and_a_correction(tmp_path):
    def answers(messages):
        return GOOD if has_assistant(messages) else "The capital is Paris."

    cache = LLMCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer(answers) as server, LLMClient(settings_for(server), cache) as client:
        call = client.complete_json(ask(), Answer)
        retry = server.requests[1].messages

    assert call.ok and call.attempts == 2 and client.stats.reasks == 1
    assert retry[:2] == ask() and retry[2] == {"role": "assistant", "content": "The capital is Paris."}
    assert "invalid JSON" in retry[3]["content"]
    assert cache.count() == 1 and cache.get(call.key).value == call.value  # stored under the original key


def test_schema_violation_is_reasked_and_final_failure_keeps_the_reason(tmp_path):
    bad = '{"answer": "Paris", "confidence": 7}'
    cache = LLMCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer({"France": bad}) as server:
        with LLMClient(settings_for(server, json_retries=2), cache) as client:
            call = client.complete_json(ask(), Answer)
        last = server.requests[-1].messages

    assert call.value is None and call.attempts == 3 and server.chat_count == 3
    assert "schema violation" in call.error and "confidence" in call.error
    assert call.raw == bad and call.prompt_tokens > 0 and call.completion_tokens > 0
    assert "schema violation" in last[-1]["content"]
    assert cache.count() == 0 and (client.stats.reasks, client.stats.failures) == (2, 1)


def test_parse_json_answer_and_fences():
    assert strip_fences('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert strip_fences('```\n{"a": 1}```') == '{"a": 1}'
    assert strip_fences('```json\n{"a": 1') == '{"a": 1'
    assert parse_json_answer(GOOD, Answer) == ({"answer": "Paris", "confidence": 0.9}, None)
    assert parse_json_answer('{"answer": "Pa', Answer)[1].startswith("invalid JSON")
    assert parse_json_answer("[1, 2]", Answer)[1].startswith("schema violation")


def test_raw_is_truncated():
    long_prose = "word " * 2000
    with FakeOpenAIServer({"France": long_prose}) as server:
        with LLMClient(settings_for(server, json_retries=0)) as client:
            call = client.complete_json(ask(), Answer)
    assert call.value is None and len(call.raw) == 2000


# -- no exception, no secret ----------------------------------------------------------------------


def failing_client(message: str) -> SimpleNamespace:
    def create(**_: Any) -> Any:
        raise RuntimeError(message)

    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)), close=lambda: None)


def test_unexpected_exception_becomes_an_error_and_the_key_is_scrubbed():
    settings = LLMSettings(base_url="http://127.0.0.1:1/v1", model="m", api_key=SECRET)
    client = LLMClient(settings, client=failing_client(f"boom with Authorization: Bearer {SECRET}"))
    calls = client.map_json([(ask(), Answer), (ask("other"), Answer)])
    assert [c.value for c in calls] == [None, None] and all("boom" in c.error for c in calls)
    assert all(SECRET not in c.error and "[REDACTED]" in c.error for c in calls)
    assert client.stats.failures == 2


def test_api_key_never_leaks(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "cache.sqlite"

    def answers(messages):
        text = messages[1]["content"]
        return None if "unknown" in text else GOOD

    script = ["429", "500", "timeout", "malformed", "400"]
    with FakeOpenAIServer(answers, script=script, timeout_sleep_s=FAULT_SLEEP_S) as server:
        settings = settings_for(server, timeout_s=CLIENT_TIMEOUT_S, price_per_1k_prompt=0.5)
        cache = LLMCache(path)
        with LLMClient(settings, cache, sleep=Sleeps()) as client:
            requests = [(ask(f"q{i}"), Answer) for i in range(4)] + [(ask("unknown q"), Answer)]
            calls = client.map_json(requests)
            decided = next(n for n, c in enumerate(calls) if c.ok)
            calls.append(client.complete_json(*requests[decided]))  # a cache hit
        assert all(r.authorized for r in server.requests)  # the key was really sent
        cache.close()

    assert any(c.error for c in calls) and any(c.cached for c in calls)
    seen = [repr(c) for c in calls] + [json.dumps(asdict(c)) for c in calls]
    seen += [repr(client.stats), str(client.stats), repr(client), str(client), repr(settings), str(settings)]
    seen += [json.dumps(settings.as_public_dict()), caplog.text]
    seen += [r.getMessage() for r in caplog.records]
    assert caplog.records  # the client did log
    for text in seen:
        assert SECRET not in text
    assert "api_key" not in settings.as_public_dict()
    for file in tmp_path.iterdir():  # the database, its WAL and shm files
        assert SECRET.encode() not in file.read_bytes()


# -- concurrency ----------------------------------------------------------------------------------


def test_map_json_respects_max_concurrency_and_keeps_order():
    def answers(messages):
        n = int(re.search(r"item (\d+)", messages[1]["content"]).group(1))
        return json.dumps({"answer": f"a{n}", "confidence": 0.5})

    with FakeOpenAIServer(answers, delay_s=0.08) as server:
        with LLMClient(settings_for(server, max_concurrency=3)) as client:
            calls = client.map_json([(ask(f"item {i}"), Answer) for i in range(12)])
        peak = server.max_in_flight

    assert [c.value["answer"] for c in calls] == [f"a{i}" for i in range(12)]
    assert 2 <= peak <= 3


def test_concurrency_limit_holds_across_caller_threads():
    with FakeOpenAIServer({"item": GOOD}, delay_s=0.05) as server:
        with LLMClient(settings_for(server, max_concurrency=2)) as client:
            threads = [
                threading.Thread(target=client.map_json, args=([(ask(f"item {t}-{i}"), Answer) for i in range(4)],)) for t in range(3)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
        assert server.max_in_flight <= 2 and server.chat_count == 12


def test_map_json_of_nothing():
    client = LLMClient(LLMSettings(base_url="http://127.0.0.1:1/v1", model="m"))
    assert client.map_json([]) == []


# -- cache ----------------------------------------------------------------------------------------


def test_cache_persists_uses_wal_and_is_thread_safe(tmp_path):
    path = tmp_path / "sub" / "cache.sqlite"
    cache = LLMCache(path)

    def put(i: int) -> None:
        cache.put(f"k{i}", LLMCall(f"k{i}", {"i": i}, None, False, 1, 10, 2, "m"))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert cache.count() == 20
    with pytest.raises(ValueError):
        cache.put("bad", LLMCall("bad", None, "nope", False, 1, 0, 0, "m"))
    cache.close()

    with LLMCache(path) as reopened:
        entry = reopened.get("k7")
        assert (entry.value, entry.model, entry.prompt_tokens, entry.completion_tokens) == ({"i": 7}, "m", 10, 2)
        assert entry.created_at and reopened.get("missing") is None and reopened.count() == 20
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# -- reliability ----------------------------------------------------------------------------------

N_ITEMS = 60
POISONED = {7, 23, 41}  # answers that violate the schema until "fixed" (so the first run leaves some undecided)


def test_reliability_under_30_percent_faults_and_rerun_uses_the_cache(tmp_path):
    fixed = {"poison": False}

    def item_of(messages: list[dict[str, Any]]) -> int:
        return int(re.search(r"item-(\d+)", messages[1]["content"]).group(1))

    def answers(messages: list[dict[str, Any]]) -> str:
        n = item_of(messages)
        if n in POISONED and not fixed["poison"]:
            return '{"label": "maybe", "score": 3}'
        return json.dumps({"label": "relevant" if n % 2 == 0 else "irrelevant", "score": round(n / 100, 2)})

    requests = [(ask(f"Is passage item-{n:02d} relevant to the query?"), Judgement) for n in range(N_ITEMS)]
    cache = LLMCache(tmp_path / "cache.sqlite")
    server = FakeOpenAIServer(answers, fault_rate=0.3, faults=FAULT_KINDS, seed=7, timeout_sleep_s=FAULT_SLEEP_S)
    with server:
        settings = settings_for(server, timeout_s=CLIENT_TIMEOUT_S, max_concurrency=4)

        with LLMClient(settings, cache, sleep=Sleeps()) as first:
            run1 = first.map_json(requests)
        s1 = first.stats
        server.settle()  # a busy server records a request its client gave up on after the client counted it
        run1_requests = server.requests
        decided1 = {n for n, c in enumerate(run1) if c.ok}
        undecided1 = set(range(N_ITEMS)) - decided1
        cached1 = cache.count()

        fixed["poison"] = True
        with LLMClient(settings, cache, sleep=Sleeps()) as second:
            run2 = second.map_json(requests)
        s2 = second.stats
        server.settle()
        run2_requests = server.requests[len(run1_requests) :]

    # First run: it completes, nothing is lost, the counts add up.
    assert len(run1) == N_ITEMS
    assert all((c.value is None) != (c.error is None) for c in run1)
    assert all(run1[n].value["label"] == ("relevant" if n % 2 == 0 else "irrelevant") for n in decided1)
    assert s1.decided == len(decided1) and s1.failures == len(undecided1) and s1.decided + s1.failures == N_ITEMS
    # every request the server saw is a call; a call it never saw (a connection the client gave up on before the
    # server read it) failed at the transport, so it is among the retries or the failures
    assert s1.calls == sum(c.attempts for c in run1) and len(run1_requests) <= s1.calls <= len(run1_requests) + s1.retries + s1.failures
    kinds1 = Counter(r.fault for r in run1_requests if r.fault)
    injected = sum(kinds1.values())
    assert 0.15 <= injected / len(run1_requests) <= 0.45
    assert set(kinds1) == set(FAULT_KINDS)
    assert s1.retries + s1.reasks == s1.calls - N_ITEMS  # every call past the first of an item is a retry or a re-ask
    assert POISONED <= undecided1 and cached1 == len(decided1)

    # Second run: zero HTTP calls for items decided in the first run; only the undecided are asked again.
    asked2 = {item_of(r.messages) for r in run2_requests}
    assert asked2 == undecided1
    assert all(run2[n].cached and run2[n].attempts == 0 and run2[n].value == run1[n].value for n in decided1)
    assert s2.cache_hits == len(decided1) and len(run2_requests) <= s2.calls <= len(run2_requests) + s2.retries + s2.failures
    assert s2.decided + s2.failures == N_ITEMS and cache.count() == s2.decided
    assert all((c.value is None) != (c.error is None) for c in run2)

    print(
        f"\nRELIABILITY first run: items={N_ITEMS} requests={s1.calls} injected_faults={injected} "
        f"({injected / s1.calls:.0%}) by_kind={dict(kinds1)} decided={s1.decided} "
        f"transport_retries={s1.retries} reasks={s1.reasks} undecided={s1.failures}\n"
        f"RELIABILITY second run: http_calls={s2.calls} (for {len(undecided1)} undecided items) "
        f"http_calls_for_first_run_decided=0 cache_hits={s2.cache_hits} "
        f"cache_hit_rate={s2.cache_hits / N_ITEMS:.0%} decided={s2.decided} undecided={s2.failures}"
    )


def test_the_deadline_transport_is_built_on_the_httpx_the_installed_openai_uses():
    """openai's declared requirement (read without importing openai) names the httpx its client subclasses."""
    import openai  # noqa: PLC0415

    used = {c.__module__.partition(".")[0] for c in openai.DefaultHttpxClient.__mro__ if c.__module__.startswith("httpx")}
    assert used == {transport.openai_httpx_name()} == {transport.httpx.__name__}
    deadline = transport.DeadlineTransport(5.0)
    with openai.DefaultHttpxClient(transport=deadline) as client:
        assert client._transport is deadline
