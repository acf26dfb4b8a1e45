"""Faults that change outcomes: LLM calls that fail for good, through the real client and filter.

``test_faults.py`` covers crashes and torn files; ``test_llm_client.py`` covers retries that end well. Here the
retries run out: an OpenAI-compatible fake on loopback
(:class:`~retrieval_pipeline_tests.fakes.persistent_faults.PersistentFaultServer`) fails chosen prompts on
every attempt, or a seeded draw fails some calls on both attempts. Each test compares the forward-RAG filter
(:func:`~retrieval_pipeline.core.filtering.filter.filter_pairs`, the real :class:`LLMClient` and its on-disk cache)
with a fault-free run of the same pairs and asserts:

* the exact keep set: the fault-free keep set less the pairs with a failed call;
* undecided pairs carry the error of the call that failed (reason and ``judge_details``), never a guess;
* a re-run with the faults gone re-asks exactly the failed calls (the decided ones come from the cache) and
  decides exactly the undecided pairs, as the fault-free run did.

Counting a failed random-context (necessity) call as "kept" fails
``test_retries_that_run_out_leave_exactly_those_pairs_undecided_with_their_error``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from retrieval_pipeline.core.common.types import Document, QAPair
from retrieval_pipeline.core.filtering.filter import filter_pairs
from retrieval_pipeline.core.filtering.settings import FilterSettings, NegativeSettings
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline_tests.fakes.persistent_faults import PersistentFaultServer

DOCS = [
    Document("json", "json module: encode and decode JSON", kind="module", module="json"),
    Document("json.dumps", "Serialize obj to a JSON formatted str using this conversion table.", kind="function", module="json"),
    Document("json.loads", "Deserialize s (a str instance containing a JSON document) to a Python object.", kind="function", module="json"),
    Document("json.dump", "Serialize obj as a JSON formatted stream to fp.", kind="function", module="json"),
    Document("json.JSONDecoder", "Simple JSON decoder, decodes documents.", kind="class", module="json"),
    Document("csv.reader", "Return a reader object which will iterate over lines in the given csvfile.", kind="function", module="csv"),
    Document("csv.writer", "Return a writer object that converts data into delimited strings.", kind="function", module="csv"),
]
#: ``query_id: (question, gold)``; every question is distinct, so a prompt names its pair.
QUESTIONS = {
    "serialise": ("How do I serialize an object to a JSON formatted str?", "json.dumps"),
    "parse": ("How do I deserialize a str holding a JSON document?", "json.loads"),
    "dump": ("How do I write an object to a file?", "json.dump"),
    "decode": ("Which class decodes JSON documents?", "json.JSONDecoder"),
    "read_csv": ("How do I iterate over the lines of a CSV file?", "csv.reader"),
    "write_csv": ("How do I turn rows into delimited strings?", "csv.writer"),
}
#: The stand-in model: the gold context answers every question but ``dump``'s (insufficient); the random
#: contexts answer only ``decode``'s (not necessary). So, fault-free, by hand:
INSUFFICIENT, LEAKY = {"dump"}, {"decode"}
FAULT_FREE_KEEP = {"serialise", "parse", "read_csv", "write_csv"}
RANDOM_CONTEXTS = 2
FILTER = FilterSettings(judge="llm", random_contexts=RANDOM_CONTEXTS)
NEGATIVES = NegativeSettings(per_query_siblings=1, per_query_bm25=1)


def pairs() -> list[QAPair]:
    return [
        QAPair(query_id=q, suite="api", benchmark_type="api_understanding", source_file="api.yaml", query=text,
               gold_doc_ids=[gold], status="resolved", method="exact")
        for q, (text, gold) in QUESTIONS.items()
    ]  # fmt: skip


def pair_of(prompt: str) -> str:
    """The query id whose question the prompt asks."""
    (query_id,) = [q for q, (text, _) in QUESTIONS.items() if f"Question: {text}" in prompt]
    return query_id


def is_necessity(prompt: str) -> bool:
    """The random-context prompt holds ``RANDOM_CONTEXTS`` contexts; the gold one holds one (one gold per pair)."""
    return prompt.count("[context ") == RANDOM_CONTEXTS


def answer(messages: list[dict[str, Any]]) -> str:
    """The scripted model (see :data:`INSUFFICIENT` and :data:`LEAKY`)."""
    prompt = messages[1]["content"]
    query_id = pair_of(prompt)
    answerable = query_id in LEAKY if is_necessity(prompt) else query_id not in INSUFFICIENT
    return json.dumps({"answerable": answerable, "answer": "yes" if answerable else "", "rationale": f"read for {query_id}"})


@contextmanager
def llm_client(server: PersistentFaultServer, cache: Path, max_retries: int) -> Iterator[LLMClient]:
    """The real client on the fake, with the on-disk cache at ``cache`` and no backoff wait."""
    settings = LLMSettings(
        base_url=server.base_url, model=server.model, max_retries=max_retries, json_retries=1, timeout_s=10, max_concurrency=4
    )
    with LLMCache(cache) as store, LLMClient(settings, store, sleep=lambda _seconds: None) as client:
        yield client


def run_filter(server: PersistentFaultServer, cache: Path, max_retries: int = 2) -> pd.DataFrame:
    """``verified_pairs`` rows of :func:`pairs` judged through ``server``, indexed by query id."""
    with llm_client(server, cache, max_retries) as client:
        result = filter_pairs(pairs(), DOCS, FILTER, NEGATIVES, client)
    counts = result.summary
    assert counts["kept"] + counts["dropped"] + counts["undecided"] == counts["pairs"] == len(QUESTIONS)
    return result.frame.set_index("query_id")


def kept(frame: pd.DataFrame) -> set[str]:
    return set(frame.index[frame["keep"]])


def undecided(frame: pd.DataFrame) -> set[str]:
    return set(frame.index[frame["undecided"]])


def call_errors(row: pd.Series) -> dict[str, str]:
    """``{"sufficiency" | "necessity": error}`` of a row's failed calls, from ``judge_details``."""
    details = json.loads(row["judge_details"])
    return {call: d["error"] for call, d in details.items() if d["error"] is not None}


@pytest.fixture
def fault_free(tmp_path: Path) -> pd.DataFrame:
    """The decisions without any fault (its own cache)."""
    with PersistentFaultServer(answer, fails=lambda _prompt: False) as server:
        frame = run_filter(server, tmp_path / "fault_free.sqlite")
    assert kept(frame) == FAULT_FREE_KEEP and undecided(frame) == set()
    assert frame.loc["dump", "reason"].startswith("dropped (insufficient)")
    assert frame.loc["decode", "reason"].startswith("dropped (not necessary)")
    return frame


#: Calls that fail on every attempt: ``serialise``'s necessity call (its sufficiency call succeeds and says
#: answerable, so only the failed random-context call stands between it and "kept"), ``read_csv``'s
#: sufficiency call, and both of ``decode``'s (dropped when fault-free).
FAILING = {("serialise", "necessity"), ("read_csv", "sufficiency"), ("decode", "sufficiency"), ("decode", "necessity")}


def fails_for_good(prompt: str) -> bool:
    return (pair_of(prompt), "necessity" if is_necessity(prompt) else "sufficiency") in FAILING


def test_retries_that_run_out_leave_exactly_those_pairs_undecided_with_their_error(tmp_path: Path, fault_free: pd.DataFrame) -> None:
    cache, max_retries = tmp_path / "llm.sqlite", 2
    with PersistentFaultServer(answer, fails=fails_for_good) as server:
        faulted = run_filter(server, cache, max_retries)
        asked = Counter(server.prompts())
        server.stop_faults()
        start = server.request_count
        rerun = run_filter(server, cache, max_retries)
        reasked = server.prompts(start)

    failed_pairs = {q for q, _ in FAILING}
    assert kept(faulted) == FAULT_FREE_KEEP - failed_pairs == {"parse", "write_csv"}
    assert undecided(faulted) == failed_pairs
    assert set(faulted.index[~faulted["keep"] & ~faulted["undecided"]]) == {"dump"}  # still dropped, insufficient
    for query_id in failed_pairs:
        row = faulted.loc[query_id]
        errors = call_errors(row)
        assert set(errors) == {call for q, call in FAILING if q == query_id}
        first = errors.get("sufficiency", errors.get("necessity"))  # the reason names the gold call's error first
        assert row["reason"] == f"undecided: {first}" and not row["keep"]
        assert "HTTP 429" in first and f"after {max_retries + 1} attempt(s)" in first
        assert pd.isna(row["sufficiency"]) and pd.isna(row["best_random"])  # no number is made up
    details = json.loads(faulted.loc["serialise", "judge_details"])
    assert details["sufficiency"]["value"]["answerable"] is True  # the gold call succeeded: only necessity was missing
    # every attempt of a failing call reached the server: max_retries + 1 per failing call, one per other call
    assert sum(n for p, n in asked.items() if fails_for_good(p)) == (max_retries + 1) * len(FAILING)

    # the re-run asks exactly the failed calls again, and decides exactly the undecided pairs, as fault-free
    assert sorted((pair_of(p), is_necessity(p)) for p in reasked) == sorted((q, c == "necessity") for q, c in FAILING)
    assert undecided(rerun) == set()
    changed = {q for q in rerun.index if (rerun.loc[q, ["keep", "reason"]] != faulted.loc[q, ["keep", "reason"]]).any()}
    assert changed == failed_pairs
    pd.testing.assert_frame_equal(rerun[["keep", "undecided", "reason", "sufficiency", "best_random"]],
                                  fault_free[["keep", "undecided", "reason", "sufficiency", "best_random"]])  # fmt: skip


def test_a_failed_necessity_call_alone_never_counts_as_kept(tmp_path: Path, fault_free: pd.DataFrame) -> None:
    """Every pair's random-context call fails for good while its gold call succeeds: nothing is kept or dropped."""
    with PersistentFaultServer(answer, fails=is_necessity, kind="500") as server:
        frame = run_filter(server, tmp_path / "llm.sqlite", max_retries=1)
    assert kept(frame) == set() and undecided(frame) == set(QUESTIONS)
    for query_id, row in frame.iterrows():
        assert set(call_errors(row)) == {"necessity"}, query_id
        assert row["reason"].startswith("undecided: InternalServerError (HTTP 500)") and "after 2 attempt(s)" in row["reason"]


#: A seed whose draws (500 or 429, each attempt with probability 0.5, two attempts a call) make some calls
#: fail for good and leave others decided; the draws depend only on the seed and the prompt, not on timing.
SEED = 7


def test_seeded_final_failures_change_only_the_failed_pairs_and_a_rerun_decides_them(tmp_path: Path, fault_free: pd.DataFrame) -> None:
    cache = tmp_path / "llm.sqlite"
    with PersistentFaultServer(answer, fails=lambda _prompt: False, fault_rate=0.5, faults=("500", "429"), seed=SEED) as server:
        faulted = run_filter(server, cache, max_retries=1)
        failed_calls = sum(len(call_errors(row)) for _, row in faulted.iterrows())
        server_faults = sum(server.fault_counts.values())
        server.stop_faults()
        start = server.request_count
        rerun = run_filter(server, cache, max_retries=1)
        reasked = server.prompts(start)

    lost = undecided(faulted)
    print(f"\n[seeded faults] seed {SEED}: {server_faults} faults, {failed_calls} calls failed for good, undecided {sorted(lost)}")
    assert 0 < len(lost) < len(QUESTIONS), f"seed {SEED} must fail some calls for good and not all ({server_faults} faults)"
    assert server_faults > 2 * failed_calls  # some faults were retried away: those calls are decided, not undecided
    assert kept(faulted) == FAULT_FREE_KEEP - lost
    decided = [q for q in QUESTIONS if q not in lost]
    pd.testing.assert_frame_equal(faulted.loc[decided, ["keep", "reason"]], fault_free.loc[decided, ["keep", "reason"]])
    for query_id in lost:
        errors = call_errors(faulted.loc[query_id])
        first = errors.get("sufficiency", errors.get("necessity"))
        assert faulted.loc[query_id, "reason"] == f"undecided: {first}" and "after 2 attempt(s)" in first
    assert len(reasked) == failed_calls and {pair_of(p) for p in reasked} == lost
    assert undecided(rerun) == set() and kept(rerun) == FAULT_FREE_KEEP
    pd.testing.assert_frame_equal(rerun[["keep", "reason"]], fault_free[["keep", "reason"]])
