"""``kind: http`` against a loopback fake search service: answers, batching, retries, QueryErrors, contract checks."""

from __future__ import annotations

import json
import socket
import urllib.error
from collections.abc import Iterator, Mapping
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.retrieval.base import QueryError, RetrieverError
from retrieval_pipeline.core.retrieval.engines.remote import RetryPolicy
from retrieval_pipeline.core.retrieval.engines.search_service import HttpRetriever, parse_entry
from retrieval_pipeline.core.retrieval.factory import CheckedRetriever
from retrieval_pipeline.core.retrieval.kinds.http import HttpSpec
from retrieval_pipeline.core.retrieval.spec import PARAMS_FILE
from retrieval_pipeline_tests.core.retrieval.kit import CORPUS, DATASET, build, load, parse_as
from retrieval_pipeline_tests.fakes.search_server import SERVICE_ERROR, UNKNOWN_DOC, FakeSearchService

NAME = "search_service"
SECRET = "Bearer tok-0123456789abcdef"


@pytest.fixture
def service() -> Iterator[FakeSearchService]:
    with FakeSearchService(CORPUS, timeout_sleep_s=0.6) as fake:
        yield fake


def make_spec(endpoint: str, /, **settings: Any) -> HttpSpec:
    """A ``kind: http`` spec of ``endpoint`` with short timeouts and one retry."""
    raw = {"kind": "http", "url": endpoint, "timeout_s": 0.2, "max_retries": 1, "backoff_base_s": 0.0, "probe_query": "cat", **settings}
    return parse_as(HttpSpec, NAME, raw)


def build_and_load(spec: HttpSpec, root: Path) -> CheckedRetriever:
    """Build ``spec`` (which probes the service), then load it."""
    build(spec, root)
    return load(spec, root)


def http_inner(retriever: CheckedRetriever) -> HttpRetriever:
    assert isinstance(retriever.inner, HttpRetriever)
    return retriever.inner


def hits_of(service: FakeSearchService, query: str, k: int) -> list[tuple[str, float]]:
    return [(h["doc_id"], h["score"]) for h in service.ranking(query, k)]


def test_answers_go_through_build_and_load(service: FakeSearchService, tmp_path: Path) -> None:
    spec = make_spec(service.url)
    retriever = build_and_load(spec, tmp_path)
    params = json.loads((tmp_path / "indexes" / NAME / PARAMS_FILE).read_text())
    assert (params["url"], params["probe_hits"], params["probe_requests"]) == (service.url, 2, 1)
    assert service.requests[0].body == {"queries": ["cat"], "k": 10}

    queries = ["cat dog", "sea", "zebra"]
    assert retriever.search(queries, 2) == [hits_of(service, q, 2) for q in queries]
    assert retriever.search(["cat dog"], 2)[0] == [("d1", 2.0), ("d0", 1.0)]


def test_queries_are_sent_in_batches(service: FakeSearchService, tmp_path: Path) -> None:
    retriever = build_and_load(make_spec(service.url, batch_size=2), tmp_path)
    answers = retriever.search(["cat", "dog", "sea", "fish", "mat"], 3)
    assert [len(r.body["queries"]) for r in service.requests[1:]] == [2, 2, 1]
    assert all(not isinstance(a, QueryError) for a in answers)
    assert http_inner(retriever).stats.requests == 3


def test_a_query_that_times_out_becomes_a_query_error(service: FakeSearchService, tmp_path: Path) -> None:
    retriever = build_and_load(make_spec(service.url, batch_size=1), tmp_path)
    answers = retriever.search(["cat", "slow cat", "sea"], 2)
    assert answers[0] == hits_of(service, "cat", 2) and answers[2] == hits_of(service, "sea", 2)
    error = answers[1]
    assert isinstance(error, QueryError)
    assert service.url in error.message and "timed out" in error.message and "after 2 attempt(s)" in error.message
    stats = http_inner(retriever).stats
    assert (stats.requests, stats.retries, stats.failed_batches, stats.query_errors) == (4, 1, 1, 1)


def test_500_and_429_are_retried_then_answered(tmp_path: Path) -> None:
    with FakeSearchService(CORPUS, script=[None, "500", "429"]) as service:
        retriever = build_and_load(make_spec(service.url, max_retries=2), tmp_path)
        assert retriever.search(["sea"], 1) == [[("d2", 1.0)]]
        assert [r.status for r in service.requests] == [200, 500, 429, 200]
    assert http_inner(retriever).stats.retries == 2


def test_retries_run_out_into_query_errors_for_the_whole_batch(tmp_path: Path) -> None:
    with FakeSearchService(CORPUS, script=[None, "503", "503"]) as service:
        retriever = build_and_load(make_spec(service.url, max_retries=1), tmp_path)
        answers = retriever.search(["cat", "sea"], 1)
    assert all(isinstance(a, QueryError) and "HTTP 503" in a.message for a in answers)


@pytest.mark.parametrize(("fault", "reason"), [("garbage", "the answer is not JSON"), ("bad_results", "got 1 result lists")])
def test_a_garbage_answer_becomes_query_errors_without_retry(tmp_path: Path, fault: str, reason: str) -> None:
    with FakeSearchService(CORPUS, script=[None, fault]) as service:
        retriever = build_and_load(make_spec(service.url, max_retries=3), tmp_path)
        answers = retriever.search(["cat", "sea"], 1)
        assert service.request_count == 2  # the probe, then one try
    assert all(isinstance(a, QueryError) and reason in a.message for a in answers)


def test_per_query_errors_and_garbage_entries(service: FakeSearchService, tmp_path: Path) -> None:
    retriever = build_and_load(make_spec(service.url), tmp_path)
    good, failed, mangled = retriever.search(["cat", "fails cat", "mangled"], 2)
    assert good == hits_of(service, "cat", 2)
    assert isinstance(failed, QueryError) and SERVICE_ERROR in failed.message
    assert isinstance(mangled, QueryError) and "garbage hit" in mangled.message
    assert http_inner(retriever).stats.query_errors == 2


def test_an_unknown_doc_id_breaks_the_contract(service: FakeSearchService, tmp_path: Path) -> None:
    retriever = build_and_load(make_spec(service.url), tmp_path)
    with pytest.raises(RetrieverError, match=rf"retriever {NAME!r} broke the retriever contract on dataset {DATASET!r}.*{UNKNOWN_DOC}"):
        retriever.search(["stranger cat"], 3)


def test_a_dead_service_gives_query_errors_not_an_exception(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/search"
    retriever = HttpRetriever(NAME, url, timeout_s=0.2, policy=RetryPolicy(max_retries=1, backoff_base_s=0.0), batch_size=2)
    answers = retriever.search(["a", "b", "c"], 5)
    assert len(answers) == 3 and all(isinstance(a, QueryError) and url in a.message for a in answers)
    assert (retriever.stats.requests, retriever.stats.failed_batches, retriever.stats.query_errors) == (4, 2, 3)


def test_a_failed_probe_fails_the_build_naming_the_url(tmp_path: Path) -> None:
    with FakeSearchService(CORPUS, script=["500", "500"]) as service:
        with pytest.raises(RetrieverError) as caught:
            build(make_spec(service.url), tmp_path)
    message = str(caught.value)
    for part in (f"search service {service.url} did not answer the probe query 'cat'", "HTTP 500", NAME, DATASET):
        assert part in message
    assert not (tmp_path / "indexes" / NAME).exists()


def test_a_probe_answered_from_another_corpus_fails_the_build(service: FakeSearchService, tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match=rf"not in the corpus of dataset {DATASET!r}: \['{UNKNOWN_DOC}'\]"):
        build(make_spec(service.url, probe_query="stranger cat"), tmp_path)


def test_headers_come_from_the_environment_and_are_never_written(
    service: FakeSearchService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_AUTH", SECRET)
    spec = make_spec(service.url, headers_env={"Authorization": "SEARCH_AUTH"})
    build_and_load(spec, tmp_path).search(["cat"], 1)
    assert {r.headers["authorization"] for r in service.requests} == {SECRET}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    monkeypatch.delenv("SEARCH_AUTH")
    with pytest.raises(RetrieverError, match="headers_env.Authorization: environment variable 'SEARCH_AUTH' is not set"):
        build(spec, tmp_path)


def test_dataset_placeholder_in_the_url(service: FakeSearchService, tmp_path: Path) -> None:
    spec = make_spec(service.url.replace("/search", "/{dataset}/search"))
    with pytest.raises(RetrieverError, match=rf"/{DATASET}/search did not answer.*HTTP 404"):
        build(spec, tmp_path)  # the fake only serves /search: the placeholder was filled in
    assert service.requests[-1].path == f"/{DATASET}/search"


def test_a_client_error_is_final(tmp_path: Path) -> None:
    calls: list[Any] = []

    def post(url: str, payload: Any, headers: Mapping[str, str], timeout_s: float) -> Any:
        calls.append(payload)
        raise urllib.error.HTTPError(url, 400, "Bad Request", Message(), None)

    retriever = HttpRetriever(NAME, "http://127.0.0.1:9/search", policy=RetryPolicy(max_retries=3), post=post)
    [answer] = retriever.search(["cat"], 1)
    assert isinstance(answer, QueryError) and "HTTP 400" in answer.message and len(calls) == 1


def test_entries_are_sorted_and_cut_at_k() -> None:
    entry = [{"doc_id": "a", "score": 1}, {"doc_id": "b", "score": 3.5}, {"doc_id": "c", "score": 1.0}]
    assert parse_entry(entry, 2) == [("b", 3.5), ("a", 1.0)]
    assert isinstance(parse_entry([{"doc_id": "a", "score": "high"}], 2), QueryError)
    assert isinstance(parse_entry([{"doc_id": "a", "score": True}], 2), QueryError)
    assert isinstance(parse_entry({"hits": []}, 2), QueryError)


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "ftp://x"},
        {"batch_size": 0},
        {"headers_env": {"Authorization": "not a name"}},
        {"headers_env": {"Bad Header": "X"}},
        {"token": "x"},
    ],
)
def test_invalid_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_spec("http://127.0.0.1:1/search", **bad)
