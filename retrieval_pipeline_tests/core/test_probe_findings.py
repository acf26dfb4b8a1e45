"""Bad inputs the bad-input probe tries, one test each (named after what it checks).

Crashes become errors naming the file and the row or case; silent cases become rejects or warnings;
per-read timeouts become total deadlines; big inputs are bounded before they are read.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.frames import to_frame
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.datasets import CASE_JSON_FIELDS
from retrieval_pipeline.core.datasets.suite.reader import load_suite

API_ROW = "- {id: api_ok, benchmark_type: api_understanding, question: Which class?, answers: [{fully_qualified_class_name: a.B}]}"


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def suite_file(tmp_path: Path, *rows: str) -> Path:
    return write(tmp_path / "suite" / "benchmark.yaml", "benchmarks:\n" + "\n".join([API_ROW, *rows]) + "\n")


# ---- suite extra fields with non-string or mixed-type keys ----------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ("meta: {2024-01-01: x}", "'2024-01-01' (date) in 'meta'"),
        ("meta: {1: a, b: c}", "'1' (int) in 'meta'"),
        ("2: x", "'2' (int) is not text"),
    ],
)
def test_suite_extra_fields_with_non_text_keys_reject_the_case(tmp_path: Path, extra: str, shown: str) -> None:
    path = suite_file(
        tmp_path,
        f"- {{id: odd_keys, benchmark_type: api_understanding, question: Q?, {extra}, answers: [{{fully_qualified_class_name: a.B}}]}}",
    )
    loaded = load_suite(path)
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (2, 1, 1)
    reason = loaded.rejects[0].reason
    assert str(path) in reason and "case 'odd_keys' (index 1)" in reason and shown in reason and "is not text" in reason
    to_frame(loaded.cases, Case, CASE_JSON_FIELDS)  # the accepted cases still travel as JSON


# ---- a 15 MB question in a suite --------------------------------------------------------------------------------


def test_suite_question_of_15_mb_is_rejected_naming_file_and_case(tmp_path: Path) -> None:
    path = suite_file(
        tmp_path,
        f"- {{id: huge_q, benchmark_type: api_understanding, question: {'q' * 15_000_000}, answers: [{{fully_qualified_class_name: a.B}}]}}",
    )
    loaded = load_suite(path)
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (2, 1, 1)
    reason = loaded.rejects[0].reason
    assert str(path) in reason and "case 'huge_q' (index 1)" in reason and "'question' is 15,000,000 characters, over the limit" in reason
    assert len(reason) < 400


# ---- YAML amplification by one big scalar, aliased 3,000 times -------------------------------------------------


def test_yaml_scalar_alias_amplification_is_refused(tmp_path: Path) -> None:
    aliases = ", ".join(["*big"] * 3_000)
    path = write(
        tmp_path / "suite" / "benchmark.yaml",
        f"big: &big {'x' * 1_000_000}\nbenchmarks:\n- {{id: amp, benchmark_type: api_understanding, question: Q?, "
        f"answers: [{{fully_qualified_class_name: a.B}}], meta: [{aliases}]}}\n",
    )
    assert 1_000_000 < path.stat().st_size < 1_200_000
    started = time.monotonic()
    with pytest.raises(InputError) as info:
        load_suite(path)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert str(path) in message and "aliases expand to more than 1,000,000 extra characters" in message and "xxxx" not in message


def test_suite_extra_fields_are_bounded_even_without_aliases(tmp_path: Path) -> None:
    rows = [
        f"- {{id: big_meta, benchmark_type: api_understanding, question: Q?, answers: [{{fully_qualified_class_name: a.B}}], meta: [{', '.join(['y' * 400_000] * 3)}]}}"
    ]
    loaded = load_suite(suite_file(tmp_path, *rows))
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (2, 1, 1)
    assert "case 'big_meta' (index 1): extra fields hold more than 1,000,000 characters (at 'meta')" in loaded.rejects[0].reason


def test_yaml_integer_of_5000_digits_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = suite_file(tmp_path, f"- {{id: big_int, benchmark_type: api_understanding, question: Q?, weight: {'7' * 5_000}}}")
    with pytest.raises(InputError) as info:
        load_suite(path)
    assert str(path) in str(info.value) and "a value cannot be built" in str(info.value) and len(str(info.value)) < 500


# ---- a 600 MB snippet file --------------------------------------------------------------------------------------


def test_snippet_file_of_600_mb_is_refused_before_reading(tmp_path: Path) -> None:
    snippet = tmp_path / "suite" / "big.py"
    snippet.parent.mkdir(parents=True)
    with snippet.open("wb") as handle:  # sparse: no disk used
        handle.truncate(600 * 1024 * 1024)
    row = (
        "- {id: mc_big, benchmark_type: multiple_choice, question: What runs?, options: {A: x, B: y}, correct_answer: A,"
        " code_snippet_ref: {file: big.py, section: s}}"
    )
    started = time.monotonic()
    loaded = load_suite(suite_file(tmp_path, row))
    assert time.monotonic() - started < 2
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (2, 1, 1)
    reason = loaded.rejects[0].reason
    assert "case 'mc_big' (index 1)" in reason and "big.py" in reason
    assert "code snippet file is 629,145,600 bytes, over the limit of 1,000,000 bytes: refused, not read" in reason


# ---- context-QA: 600-deep junk, a 5,000-digit number, a 100,000-deep array ----------------------------------


def qa_file(tmp_path: Path, bad_row: str) -> Path:
    good = ['{"question": "Q one?", "context": "Context one.", "answer": "A"}', '{"question": "Q two?", "context": "Context two."}']
    return write(tmp_path / "qa" / "qa.json", "[\n" + ",\n".join([good[0], bad_row, good[1]]) + "\n]\n")


def test_context_qa_600_deep_parser_junk_is_kept_unparsed(tmp_path: Path) -> None:
    from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa

    junk = "[<A children=" * 600 + "'x'" + ">]" * 600
    loaded = load_context_qa(qa_file(tmp_path, json.dumps({"question": "Deep?", "context": "Before " + junk})))
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (3, 3, 0)
    assert loaded.report["junk_unparsed"] >= 1 and loaded.cases[1].extra["expected_context"].startswith("Before [<A children=")


def test_context_qa_5000_digit_number_rejects_the_row(tmp_path: Path) -> None:
    from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa

    path = qa_file(tmp_path, '{"question": "Big?", "context": "C.", "answer": ' + "9" * 5_000 + "}")
    loaded = load_context_qa(path)
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (3, 2, 1)
    reason = loaded.rejects[0].reason
    assert reason == f"file {path}, row 1 (line 3): an integer of 5,000 digits, more than 4,300"
    assert loaded.report["unreadable_rows"] == 1 and loaded.report["rejected"] == 1


def test_context_qa_100000_deep_array_rejects_the_row(tmp_path: Path) -> None:
    from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa

    path = qa_file(tmp_path, '{"question": "Deep?", "context": "C.", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}")
    loaded = load_context_qa(path)
    assert (loaded.total, len(loaded.cases), len(loaded.rejects)) == (3, 2, 1)
    assert loaded.rejects[0].reason == f"file {path}, row 1 (line 3): nested too deeply to parse"
    assert [case.query for case in loaded.cases] == ["Q one?", "Q two?"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"question": "Q?", "context": "C."} {"a": 1}]', "malformed JSON at line 1, column 38: Expecting ',' delimiter"),
        ('[{"question": "Q?", "context": "C."},]', "malformed JSON at line 1, column 38: Expecting value"),
        ('[{"question": "Q?", "context": "C."}] x', "malformed JSON at line 1, column 39: Extra data"),
        ('[{"question": "Q?", "context": "C."}', "malformed JSON at line 1, column 37: Expecting ',' delimiter"),
        ("[] []", "malformed JSON at line 1, column 4: Extra data"),
        ('{"a": ' + "[" * 100_000, "nested too deeply to parse"),
    ],
)
def test_context_qa_row_by_row_parsing_keeps_json_messages(tmp_path: Path, content: str, message: str) -> None:
    from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa

    path = write(tmp_path / "qa.json", content)
    with pytest.raises(InputError) as info:
        load_context_qa(path)
    assert message in str(info.value) and str(path) in str(info.value)
    try:
        json.loads(content)
    except json.JSONDecodeError as exc:  # the same position and message as the whole-file parser gave
        assert f"line {exc.lineno}, column {exc.colno}: {exc.msg}" in message
    except RecursionError:
        pass


# ---- BEIR: grades and ids of 5,000 digits, a 20-digit grade, a 100,000-deep corpus line ------------------------


def beir_folder(tmp_path: Path, *, corpus: list[str] | None = None, qrels: list[str] | None = None) -> Path:
    folder = tmp_path / "toy"
    docs = ['{"_id": "d1", "text": "one"}', '{"_id": "d2", "text": "two"}']
    write(folder / "corpus.jsonl", "\n".join(docs + (corpus or [])) + "\n")
    write(folder / "queries.jsonl", '{"_id": "q1", "text": "first?"}\n{"_id": "q2", "text": "second?"}\n')
    write(folder / "qrels" / "test.tsv", "\n".join(["query-id\tcorpus-id\tscore", "q1\td1\t1", "q2\td2\t1", *(qrels or [])]) + "\n")
    return folder


def load_beir_counts(folder: Path):
    from retrieval_pipeline.core.datasets.beir.reader import load_beir

    loaded = load_beir(folder)
    report = loaded.report
    assert report["corpus_lines"] == len(loaded.documents) + report["corpus_rejected"]
    assert report["qrels_lines"] == report["qrels_kept"] + report["qrels_rejected"]
    return loaded


@pytest.mark.parametrize(
    ("grade", "shown"),
    [
        ("9" * 5_000, "grade out of range: '9999999999999999999999999999999999999999'... (5,000 characters)"),
        ("99999999999999999999", "grade out of range: '99999999999999999999'"),
        ("2147483648", "grade out of range: '2147483648' (grades are -2,147,483,648 to 2,147,483,647)"),
    ],
)
def test_beir_grade_of_5000_digits_or_past_int32_rejects_the_line(tmp_path: Path, grade: str, shown: str) -> None:
    from retrieval_pipeline.core.common.types import QAPair
    from retrieval_pipeline.core.datasets.beir.adapter import beir_pair

    folder = beir_folder(tmp_path, qrels=[f"q1\td2\t{grade}"])
    loaded = load_beir_counts(folder)
    assert (loaded.report["qrels_lines"], loaded.report["qrels_kept"], loaded.report["qrels_rejected"]) == (3, 2, 1)
    reasons = [r.reason for r in loaded.rejects]
    assert len(reasons) == 1 and reasons[0].startswith(f"file {folder / 'qrels' / 'test.tsv'}, line 4: {shown}") and len(reasons[0]) < 300
    frame = to_frame([beir_pair(case) for case in loaded.cases], QAPair, ())  # what the pairs asset writes
    frame.to_parquet(tmp_path / "pairs.parquet")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"_id": ' + "7" * 5_000 + ', "text": "big id"}', "an integer of 5,000 digits, more than 4,300"),
        ('{"_id": "d3", "text": "deep", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply to parse"),
    ],
)
def test_beir_corpus_line_with_a_5000_digit_id_or_100000_deep_rejects_the_line(tmp_path: Path, line: str, why: str) -> None:
    folder = beir_folder(tmp_path, corpus=[line])
    loaded = load_beir_counts(folder)
    assert (loaded.report["corpus_lines"], len(loaded.documents), loaded.report["corpus_rejected"]) == (3, 2, 1)
    assert [r.reason for r in loaded.rejects] == [f"file {folder / 'corpus.jsonl'}, line 3: {why}"]
    assert len(loaded.cases) == 2


# ---- embedding cache: one row with a 10-byte vector, one row with a NaN ------------------------------------------


def damage_one_cache_row(path: Path, model_id: str, text: str, blob: bytes) -> None:
    import sqlite3

    from retrieval_pipeline.core.retrieval.models.embed_cache import text_key

    with sqlite3.connect(path) as conn:
        assert (
            conn.execute(
                "UPDATE embeddings SET vector = ? WHERE model_id = ? AND text_sha256 = ?", (blob, model_id, text_key(text))
            ).rowcount
            == 1
        )
    conn.close()


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"0123456789", "10 bytes stored, dim 5 needs 20"),
        (np.array([np.nan, 0, 0, 0, 1], dtype="<f4").tobytes(), "NaN or infinite values stored"),
    ],
    ids=["10-byte vector", "NaN vector"],
)
def test_embedding_cache_row_with_a_10_byte_or_nan_vector_is_embedded_again_with_a_warning(tmp_path: Path, blob: bytes, why: str) -> None:
    from retrieval_pipeline.core.common.atomic import CorruptFileWarning
    from retrieval_pipeline.core.retrieval.models.embed_cache import CacheStats, EmbeddingCache
    from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

    encoder = CountingEncoder(KeywordEncoder(["cat", "dog", "fish", "bird"]))
    texts = ["a cat", "a dog", "a fish"]
    path = tmp_path / "emb.sqlite"
    with EmbeddingCache(path) as cache:
        expected, _ = cache.get_or_encode(encoder, texts)
    damage_one_cache_row(path, encoder.model_id, "a dog", blob)
    for run in range(2):  # the damaged row is replaced: the second run reads everything from the cache
        with EmbeddingCache(path) as cache, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            vectors, stats = cache.get_or_encode(encoder, texts)
        np.testing.assert_array_equal(vectors, expected)
        messages = [str(w.message) for w in caught if issubclass(w.category, CorruptFileWarning)]
        if run == 0:
            assert stats == CacheStats(hits=2, misses=1) and encoder.batches[-1] == ["a dog"]
            assert len(messages) == 1 and str(path) in messages[0] and why in messages[0] and "embedded again" in messages[0]
        else:
            assert stats == CacheStats(hits=3, misses=0) and messages == []


def test_embedding_cache_refuses_nan_vectors_from_the_encoder(tmp_path: Path) -> None:
    from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache
    from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder

    class NaNEncoder(KeywordEncoder):
        def encode(self, texts):  # type: ignore[override]
            vectors = super().encode(texts)
            vectors[-1, 0] = np.nan
            return vectors

    with EmbeddingCache(tmp_path / "emb.sqlite") as cache:
        with pytest.raises(ValueError, match=r"NaN or infinite values for 1 of 2 texts \(the first: 'a dog'\); nothing of this chunk"):
            cache.get_or_encode(NaNEncoder(["cat", "dog"]), ["a cat", "a dog"])
        assert cache.count() == 0


# ---- one huge NQ CSV cell rejects its row, not the whole file with a wrong guess ("unclosed quote?") ------------


def test_nq_csv_cell_over_the_field_limit_rejects_only_its_row(tmp_path: Path) -> None:
    from retrieval_pipeline.core.datasets.nq.reader import load_nq_csv

    path = tmp_path / "nq.csv"
    with path.open("w", encoding="utf-8") as handle:  # 12 MB, written in pieces
        handle.write('question,long_answer,short_answer\nq1,p1,a\nq2,"')
        for _ in range(12):
            handle.write("x, y\n" * (1024 * 1024 // 5) + "z" * (1024 * 1024 % 5))
        handle.write('",b\nq3,p3,c\n')
    loaded = load_nq_csv(path)
    assert (loaded.total, len(loaded.rows), len(loaded.rejects)) == (3, 2, 1)
    assert [row.question for row in loaded.rows] == ["q1", "q3"]
    assert loaded.rejects[0].reason == (
        f"file {path}, row 3: 'long_answer' (12,582,912 characters) over the per-cell limit of 100,000 characters"
    )


def test_nq_csv_unclosed_quote_still_fails_the_file_naming_the_row(tmp_path: Path) -> None:
    from retrieval_pipeline.core.datasets.nq.reader import load_nq_csv

    path = write(tmp_path / "nq.csv", 'question,long_answer,short_answer\nq1,p1,a\nq2,"never closed,b\nq3,p3,c\n')
    with pytest.raises(InputError) as info:
        load_nq_csv(path)
    assert str(info.value).endswith("malformed CSV in row 3: unexpected end of data (an unclosed quote?)")
    assert str(path) in str(info.value)


# ---- the http retriever: a total deadline over trickling reads; an 800 MB answer is not read whole ---------------


class TrickleServer:
    """A loopback HTTP server: reads a request, sends ``head`` at once, then ``piece`` every ``every_s`` seconds,
    ``pieces`` times at most (a shutdown stops it), then closes; ``sent`` counts the bytes sent after ``head``.
    """

    def __init__(self, head: bytes, piece: bytes, pieces: int, every_s: float) -> None:
        self.head, self.piece, self.pieces, self.every_s = head, piece, pieces, every_s
        self.sent = 0
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/search"

    def __enter__(self) -> TrickleServer:
        self._accepting.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._accepting.join(5)
        for thread in self._threads:
            thread.join(5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                data = b""
                while b"\r\n\r\n" not in data and len(data) < 1_000_000:
                    data += conn.recv(65536) or b"\r\n\r\n"
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.lower().splitlines() if line.startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536) or b" " * length
                conn.sendall(self.head)
                for _ in range(self.pieces):
                    if self._stop.wait(self.every_s):
                        return
                    conn.sendall(self.piece)
                    self.sent += len(self.piece)
            except OSError:
                return


ONE_RESULT = b'{"results": [[{"doc_id": "d1", "score": 1.0}]]}'

#: A server that trickles its body, or its headers, a byte at a time (the HTTP retriever's and the LLM client's tests).
TRICKLES = pytest.mark.parametrize(
    ("head", "piece"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", b" "),
        (b"HTTP/1.1 200 OK\r\nX-Padding: ", b"a"),
    ],
    ids=["trickled body", "trickled headers"],
)


@TRICKLES
def test_http_retriever_timeout_is_a_deadline_for_a_trickling_server(head: bytes, piece: bytes) -> None:
    from retrieval_pipeline.core.retrieval.base import QueryError
    from retrieval_pipeline.core.retrieval.engines.remote import RetryPolicy
    from retrieval_pipeline.core.retrieval.engines.search_service import HttpRetriever

    # a byte every 0.25 s: each read is well within the 1 s timeout, for up to 30 s
    with TrickleServer(head, piece, pieces=120, every_s=0.25) as server:
        retriever = HttpRetriever(
            "trickle", server.url, timeout_s=1.0, policy=RetryPolicy(max_retries=1, backoff_base_s=0, backoff_max_s=0)
        )
        started = time.monotonic()
        [answer] = retriever.search(["q"], 3)
        elapsed = time.monotonic() - started
    assert elapsed < 4, f"two attempts of a 1 s deadline took {elapsed:.1f} s"
    assert isinstance(answer, QueryError)
    assert "no complete answer within 1 s (a deadline for the whole request)" in answer.message and "after 2 attempt(s)" in answer.message


def test_http_answer_of_800_mb_is_refused_before_reading() -> None:
    from retrieval_pipeline.core.retrieval.engines.remote import MAX_ANSWER_BYTES, BadResponse, post_json

    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 800000000\r\n\r\n"
    with TrickleServer(head, b"x" * 65536, pieces=200, every_s=0.001) as server:  # 13 MB at most
        with pytest.raises(BadResponse) as info:
            post_json(server.url, {"queries": ["q"], "k": 3}, {}, 10.0)
    assert str(info.value) == f"the answer is 800,000,000 bytes (Content-Length), over the limit of {MAX_ANSWER_BYTES:,}: not read"
    assert server.sent < 10 * 1024 * 1024


def test_http_streamed_answer_past_the_limit_is_cut_off() -> None:
    from retrieval_pipeline.core.retrieval.engines.remote import BadResponse, post_json

    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"  # no length: read until closed
    with TrickleServer(head, b"x" * 65536, pieces=160, every_s=0.001) as server:  # 10 MB at most
        with pytest.raises(BadResponse, match=r"over the limit of 1,000,000 bytes: refused after reading 1,000,000"):
            post_json(server.url, {"queries": ["q"], "k": 3}, {}, 10.0, max_bytes=1_000_000)


def test_http_answer_within_the_deadline_and_limit_is_read() -> None:
    from retrieval_pipeline.core.retrieval.engines.remote import post_json

    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(ONE_RESULT)
    with TrickleServer(head + ONE_RESULT, b"", pieces=0, every_s=0) as server:
        assert post_json(server.url, {"queries": ["q"], "k": 3}, {}, 5.0) == {"results": [[{"doc_id": "d1", "score": 1.0}]]}


@TRICKLES
def test_llm_timeout_is_a_deadline_for_a_trickling_server(head: bytes, piece: bytes) -> None:
    import pydantic

    from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings

    class Answer(pydantic.BaseModel):
        answer: str

    with TrickleServer(head, piece, pieces=120, every_s=0.25) as server:
        base_url = server.url.removesuffix("/search") + "/v1"
        settings = LLMSettings(base_url=base_url, model="m", timeout_s=1.0, max_retries=1, backoff_base_s=0, backoff_max_s=0)
        with LLMClient(settings) as client:
            started = time.monotonic()
            call = client.complete_json([{"role": "user", "content": "Q?"}], Answer)
            elapsed = time.monotonic() - started
    assert elapsed < 4, f"two attempts of a 1 s deadline took {elapsed:.1f} s"
    assert call.value is None and "APITimeoutError" in call.error
    assert "no complete answer within 1 s (a deadline for the whole request)" in call.error and "after 2 attempt(s)" in call.error


# ---- a 19 MB plain YAML of one-character items (3.3 GB and three minutes to build) ---------------------------------


def test_yaml_of_too_many_nodes_is_refused_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_pipeline.core.common.yaml_file import DEFAULT_MAX_YAML_NODES, MAX_YAML_NODES_ENV

    # measured: 19 MB of "[a,a,a,...]" (9.5 million nodes) took 181 s and 3.3 GB before; refused now after
    # 2,000,000 nodes in 17 s (a loaded 2-core machine) and 51 MB. Here the same with a limit of 100,000.
    assert DEFAULT_MAX_YAML_NODES == 2_000_000
    monkeypatch.setenv(MAX_YAML_NODES_ENV, "100000")
    path = write(tmp_path / "suite" / "benchmark.yaml", "benchmarks:\n- [" + "a," * 150_000 + "a]\n")
    with pytest.raises(InputError) as info:
        load_suite(path)
    assert str(info.value) == (
        f"file {path}: suite file refused: more than 100,000 nodes at line 2, column 199996 (set by {MAX_YAML_NODES_ENV})"
    )


def test_openai_embeddings_timeout_is_a_deadline_for_a_trickling_server() -> None:
    from retrieval_pipeline.core.retrieval.engines.embedding_server import EmbeddingServerError, OpenAIEmbeddingEncoder
    from retrieval_pipeline.core.retrieval.engines.remote import RetryPolicy

    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    with TrickleServer(head, b" ", pieces=120, every_s=0.25) as server:
        base_url = server.url.removesuffix("/search") + "/v1"
        with OpenAIEmbeddingEncoder(
            base_url, "m", timeout_s=1.0, dim=3, policy=RetryPolicy(max_retries=1, backoff_base_s=0, backoff_max_s=0)
        ) as encoder:
            started = time.monotonic()
            with pytest.raises(EmbeddingServerError) as info:
                encoder.encode(["a text"])
            elapsed = time.monotonic() - started
    assert elapsed < 4, f"two attempts of a 1 s deadline took {elapsed:.1f} s"
    assert "no complete answer within 1 s (a deadline for the whole request)" in str(info.value)
