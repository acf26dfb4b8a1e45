"""``kind: openai_embeddings`` against a loopback fake ``/v1/embeddings`` server: build, search, cache, retries, garbage."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.engines.embedding_server import EmbeddingServerError, OpenAIEmbeddingEncoder
from retrieval_pipeline.core.retrieval.engines.remote import RetryPolicy
from retrieval_pipeline.core.retrieval.factory import CheckedRetriever
from retrieval_pipeline.core.retrieval.kinds import openai_embeddings
from retrieval_pipeline.core.retrieval.kinds.openai_embeddings import OpenAIEmbeddingsSpec
from retrieval_pipeline.core.retrieval.spec import PARAMS_FILE
from retrieval_pipeline_tests.core.retrieval import kit
from retrieval_pipeline_tests.core.retrieval.kit import DATASET, parse_as
from retrieval_pipeline_tests.fakes.embeddings_server import FakeEmbeddingsServer

VOCAB = ["cat", "dog", "fish", "bird"]
DOCS = [
    Document("d0", "the cat sat"),  # (1,0,0,0)
    Document("d1", "cat cat dog"),  # (2,1,0,0)/sqrt5
    Document("d2", "a fish swims"),  # (0,0,1,0)
    Document("d3", "nothing here"),  # the extra dimension
    Document("d4", "dog and bird"),  # (0,1,0,1)/sqrt2
]
NAME = "dense_fake"
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[FakeEmbeddingsServer]:
    with FakeEmbeddingsServer(VOCAB) as fake:
        yield fake


def make_spec(server: FakeEmbeddingsServer, **settings: Any) -> OpenAIEmbeddingsSpec:
    """A ``kind: openai_embeddings`` spec of ``server`` with short timeouts and two retries."""
    raw = {
        "kind": "openai_embeddings",
        "base_url": server.base_url,
        "model": server.model,
        "timeout_s": 0.2,
        "max_retries": 2,
        "backoff_base_s": 0.0,
        **settings,
    }
    return parse_as(OpenAIEmbeddingsSpec, NAME, raw)


def build(spec: OpenAIEmbeddingsSpec, root: Path) -> dict[str, Any]:
    """Build ``spec`` over this file's corpus."""
    return kit.build(spec, root, docs=DOCS)


def load(spec: OpenAIEmbeddingsSpec, root: Path) -> CheckedRetriever:
    """Load the built ``spec`` over this file's corpus."""
    return kit.load(spec, root, docs=DOCS)


def test_build_and_search_end_to_end(server: FakeEmbeddingsServer, tmp_path: Path) -> None:
    spec = make_spec(server)
    params = build(spec, tmp_path)
    assert params["model_id"] == f"openai:{server.base_url}/fake-embed"
    assert (params["dim"], params["embedded_now"], params["from_cache"]) == (5, 5, 0)
    assert json.loads((tmp_path / "indexes" / NAME / PARAMS_FILE).read_text())["spec"] == spec.settings()

    results = load(spec, tmp_path).search(["cat", "dog bird"], 2)
    assert [[d for d, _ in hits] for hits in results] == [["d0", "d1"], ["d4", "d1"]]
    assert results[0][1][1] == pytest.approx(2 / math.sqrt(5), abs=1e-6)  # the server's scaled vectors were normalised
    assert results[1][0][1] == pytest.approx(1.0, abs=1e-6)


def test_rebuild_and_repeated_queries_send_no_request(server: FakeEmbeddingsServer, tmp_path: Path) -> None:
    spec = make_spec(server)
    build(spec, tmp_path)
    after_first = server.request_count
    params = build(spec, tmp_path)
    assert server.request_count == after_first
    assert (params["embedded_now"], params["from_cache"], params["requests"]) == (0, 5, 0)

    retriever = load(spec, tmp_path)
    first = retriever.search(["cat", "fish"], 3)
    before = server.request_count
    assert retriever.search(["cat", "fish"], 3) == first
    assert server.request_count == before  # queries come from the cache too


def test_texts_are_sent_in_batches(server: FakeEmbeddingsServer, tmp_path: Path) -> None:
    params = build(make_spec(server, batch_size=2), tmp_path)
    assert [len(r.body["input"]) for r in server.requests] == [2, 2, 1]
    assert params["requests"] == 3
    assert server.texts_embedded == [d.text for d in DOCS]


def test_a_failed_build_keeps_what_it_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_embeddings, "SAVE_EVERY_BATCHES", 1)
    with FakeEmbeddingsServer(VOCAB, script=[None, None, "garbage"]) as server:
        spec = make_spec(server, batch_size=2)
        with pytest.raises(RetrieverError, match="not an embeddings list"):
            build(spec, tmp_path)
        params = build(spec, tmp_path)
        assert server.requests[-1].body["input"] == [DOCS[-1].text]
    assert (params["embedded_now"], params["from_cache"], params["requests"]) == (1, 4, 1)


def test_500_and_429_are_retried_then_succeed(tmp_path: Path) -> None:
    with FakeEmbeddingsServer(VOCAB, script=["500", "429", None]) as server:
        params = build(make_spec(server), tmp_path)
        assert [r.status for r in server.requests] == [500, 429, 200]
    assert (params["requests"], params["retries"], params["embedded_now"]) == (3, 2, 5)


def test_a_timeout_is_retried(tmp_path: Path) -> None:
    with FakeEmbeddingsServer(VOCAB, script=["timeout"], timeout_sleep_s=0.6) as server:
        params = build(make_spec(server), tmp_path)
    assert (params["requests"], params["retries"]) == (2, 1)


def test_a_server_that_keeps_timing_out_is_a_clear_error(tmp_path: Path) -> None:
    with FakeEmbeddingsServer(VOCAB, script=["timeout"] * 3, timeout_sleep_s=0.6) as server:
        with pytest.raises(RetrieverError) as caught:
            build(make_spec(server), tmp_path)
        message = str(caught.value)
    for part in (NAME, DATASET, server.base_url, "fake-embed", "APITimeoutError", "after 3 attempt(s)"):
        assert part in message
    assert not (tmp_path / "indexes" / NAME).exists()  # no half index


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("garbage", "not an embeddings list"),
        ("no_data", "not an embeddings list"),
        ("wrong_count", "returned 4 embeddings for 5 input text(s)"),
        ("non_numeric", "non-numeric value 'zero'"),
        ("nan", "non-finite value"),
        ("wrong_dim", "different lengths [5, 6]"),
    ],
)
def test_garbage_is_a_clear_error_and_not_retried(tmp_path: Path, fault: str, reason: str) -> None:
    with FakeEmbeddingsServer(VOCAB, script=[fault]) as server:
        with pytest.raises(RetrieverError) as caught:
            build(make_spec(server), tmp_path)
        assert server.request_count == 1
        message = str(caught.value)
    assert reason in message
    assert f"embedding server {server.base_url} (model 'fake-embed')" in message
    assert f"retriever {NAME!r}" in message and f"dataset {DATASET!r}" in message


def test_items_are_put_back_in_input_order(tmp_path: Path) -> None:
    with FakeEmbeddingsServer(VOCAB, script=["shuffled"]) as server:
        build(make_spec(server), tmp_path)
        results = load(make_spec(server), tmp_path).search(["fish"], 1)
    assert results == [[("d2", pytest.approx(1.0, abs=1e-6))]]


def test_a_dimension_other_than_expected_is_an_error(server: FakeEmbeddingsServer) -> None:
    with OpenAIEmbeddingEncoder(server.base_url, server.model, dim=7, timeout_s=0.2) as encoder:
        with pytest.raises(EmbeddingServerError, match=r"dimension 5, expected 7 \(from the index, the cache"):
            encoder.encode(["cat"])


def test_an_unknown_model_is_final_and_names_the_model(server: FakeEmbeddingsServer) -> None:
    policy = RetryPolicy(max_retries=3, backoff_base_s=0.0)
    with OpenAIEmbeddingEncoder(server.base_url, "no-such-model", policy=policy, timeout_s=0.2) as encoder:
        with pytest.raises(EmbeddingServerError, match=r"model 'no-such-model'.*HTTP 404.*after 1 attempt"):
            encoder.encode(["cat"])
    assert server.request_count == 1


def test_prefixes_and_dimensions_reach_the_server(server: FakeEmbeddingsServer, tmp_path: Path) -> None:
    spec = make_spec(server, dimensions=4, passage_prefix="passage: ", query_prefix="query: ")
    params = build(spec, tmp_path)
    assert params["model_id"].endswith("/fake-embed/4") and params["dim"] == 4
    assert server.texts_embedded == [f"passage: {d.text}" for d in DOCS]
    assert all(r.body["dimensions"] == 4 for r in server.requests)

    [hits] = load(spec, tmp_path).search(["dog"], 1)
    assert server.texts_embedded[-1] == "query: dog"
    assert hits == [("d4", pytest.approx(1 / math.sqrt(2), abs=1e-6))]  # (0,1,0,1)/sqrt2 against (0,1,0,0)


def test_the_key_comes_from_the_environment_and_is_never_written(
    server: FakeEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EMBED_KEY", SECRET)
    spec = make_spec(server, api_key_env="FAKE_EMBED_KEY")
    build(spec, tmp_path)
    load(spec, tmp_path).search(["cat"], 1)
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {SECRET}"}
    assert "FAKE_EMBED_KEY" in json.dumps(spec.settings()) and SECRET not in json.dumps(spec.settings())
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_missing_key_variable_is_named(server: FakeEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_EMBED_KEY", raising=False)
    with pytest.raises(RetrieverError, match="environment variable 'FAKE_EMBED_KEY' is not set"):
        build(make_spec(server, api_key_env="FAKE_EMBED_KEY"), tmp_path)
    assert server.request_count == 0


def test_a_failure_at_search_time_names_retriever_dataset_and_server(tmp_path: Path) -> None:
    with FakeEmbeddingsServer(VOCAB, script=[None, "500", "500", "500"]) as server:
        spec = make_spec(server)
        build(spec, tmp_path)
        with pytest.raises(RetrieverError) as caught:
            load(spec, tmp_path).search(["cat"], 1)
    message = str(caught.value)
    for part in (f"retriever {NAME!r}", f"dataset {DATASET!r}", server.base_url, "HTTP 500", "after 3 attempt(s)"):
        assert part in message


@pytest.mark.parametrize(
    "bad",
    [{"base_url": "127.0.0.1:8000"}, {"model": ""}, {"api_key_env": "sk-abc"}, {"batch_size": 0}, {"api_key": "x"}],
)
def test_invalid_settings_are_refused(server: FakeEmbeddingsServer, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_spec(server, **bad)
