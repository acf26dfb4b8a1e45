"""The forward-RAG filter in core: judge selection, decisions, hard negatives, rows and counts (no Dagster)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from retrieval_pipeline.core.common.asset_metadata import Markdown
from retrieval_pipeline.core.common.types import Document, QAPair
from retrieval_pipeline.core.filtering.filter import (
    LLM_JUDGE_NOTE,
    NO_ENDPOINT_WARNING,
    HardNegatives,
    filter_pairs,
    judge_pairs,
    needs_llm,
)
from retrieval_pipeline.core.filtering.settings import FilterSettings, NegativeSettings
from retrieval_pipeline.core.services.llm.client import LLMCall

DOCS = [
    Document("json", "json module: encode and decode JSON", kind="module", module="json"),
    Document("json.dumps", "Serialize obj to a JSON formatted str using this conversion table.", kind="function", module="json"),
    Document("json.loads", "Deserialize s (a str instance containing a JSON document) to a Python object.", kind="function", module="json"),
    Document("json.dump", "dump", kind="function", module="json"),  # nothing beyond its own name: insufficient
    Document("json.JSONDecoder", "Simple JSON decoder, decodes documents.", kind="class", module="json"),
    Document("csv.reader", "Return a reader object which will iterate over lines in the given csvfile.", kind="function", module="csv"),
    Document("csv.writer", "Return a writer object that converts data into delimited strings.", kind="function", module="csv"),
]

COLUMNS = [
    "query_id",
    "suite",
    "benchmark_type",
    "query",
    "gold_doc_ids",
    "gold_grades",
    "gold_method",
    "keep",
    "undecided",
    "judge",
    "reason",
    "sufficiency",
    "best_random",
    "random_doc_ids",
    "judge_details",
    "sibling_negatives",
    "bm25_negatives",
]


def pair(query_id: str, query: str, golds: list[str], status: str = "resolved", benchmark_type: str = "api_understanding") -> QAPair:
    return QAPair(query_id, "api", benchmark_type, "api.yaml", query, golds, status, "exact" if golds else "none")


#: One pair of each fate, by construction: 2 kept by the offline judge, 1 dropped as insufficient (its gold
#: says nothing beyond its name), 1 dropped unresolved; the multiple-choice case is not a retrieval pair.
PAIRS = [
    pair("serialise", "serialize an object to a JSON formatted str", ["json.dumps"]),
    pair("parse", "deserialize a str containing a JSON document to a Python object", ["json.loads"]),
    pair("dump_to_file", "write an object to a file", ["json.dump"]),
    pair("frobnicate", "how do I frobnicate", [], status="unresolved"),
    pair("mc", "Which import is right?", [], status="not_retrieval", benchmark_type="multiple_choice"),
]
NEGATIVES = NegativeSettings(per_query_siblings=2, per_query_bm25=2)


def test_offline_judge_keeps_drops_and_counts_every_retrieval_pair():
    result = filter_pairs(PAIRS, DOCS, FilterSettings(judge="offline_lexical", random_contexts=2), NEGATIVES)
    frame = result.frame.set_index("query_id")
    assert list(result.frame.columns) == COLUMNS
    assert list(result.frame["query_id"]) == ["serialise", "parse", "dump_to_file", "frobnicate"]  # mc left out, order kept
    assert frame["keep"].to_dict() == {"serialise": True, "parse": True, "dump_to_file": False, "frobnicate": False}
    assert frame.loc["dump_to_file", "reason"].startswith("dropped (insufficient)")
    assert frame.loc["frobnicate", "reason"] == "dropped: gold target unresolved (none)"
    assert frame.loc["frobnicate", "judge"] == "none" and frame.loc["serialise", "judge"] == "offline_lexical"
    assert result.judge == "offline_lexical" and result.warnings == []
    assert result.summary == {
        "pairs": 4,
        "kept": 2,
        "dropped": 2,
        "undecided": 0,
        "judge": "offline_lexical",
        "judge_note": "offline_lexical is a deterministic stand-in for an LLM judge",
    }
    assert result.details["decisions_by_reason"] == {"kept": 2, "dropped (insufficient)": 1, "dropped": 1}
    dropped_table = result.details["dropped_pairs"]
    assert isinstance(dropped_table, Markdown) and "dump_to_file" in dropped_table and "serialise" not in dropped_table


def test_kept_pairs_get_sibling_and_bm25_negatives_dropped_ones_none():
    frame = filter_pairs(PAIRS, DOCS, FilterSettings(judge="offline_lexical", random_contexts=2), NEGATIVES).frame.set_index("query_id")
    # json.dumps' module siblings, same kind (function) first, in corpus order; never the gold
    assert list(frame.loc["serialise", "sibling_negatives"]) == ["json.loads", "json.dump"]
    bm25 = list(frame.loc["serialise", "bm25_negatives"])
    assert len(bm25) == 2 and not {"json.dumps", "json.loads", "json.dump"} & set(bm25)
    assert list(frame.loc["dump_to_file", "sibling_negatives"]) == [] and list(frame.loc["frobnicate", "bm25_negatives"]) == []
    assert list(frame.loc["serialise", "gold_grades"]) == [1]  # no grades given: every gold counts 1
    assert len(frame.loc["serialise", "random_doc_ids"]) == 2 and "json.dumps" not in frame.loc["serialise", "random_doc_ids"]


def test_judge_none_keeps_every_resolved_pair_and_still_drops_unresolved():
    result = filter_pairs(PAIRS, DOCS, FilterSettings(judge="none"), NEGATIVES)
    assert result.summary == {"pairs": 4, "kept": 3, "dropped": 1, "undecided": 0, "judge": "none", "judge_note": "filter off"}
    assert result.details["decisions_by_reason"] == {"kept": 3, "dropped": 1}


def test_judge_llm_without_a_client_falls_back_with_a_warning():
    result = filter_pairs(PAIRS, DOCS, FilterSettings(judge="llm", random_contexts=2), NEGATIVES)
    assert result.warnings == [NO_ENDPOINT_WARNING] and result.judge == "offline_lexical"
    assert needs_llm(FilterSettings(judge="llm")) and needs_llm(FilterSettings(judge="auto"))
    assert not needs_llm(FilterSettings(judge="none")) and not needs_llm(FilterSettings(judge="offline_lexical"))


class FakeClient:
    """The two methods the LLM judge uses: ``settings.model`` and ``map_json`` (answers from ``answer(prompt)``)."""

    def __init__(self, answer: Any) -> None:
        self.settings = SimpleNamespace(model="fake")
        self.answer = answer
        self.prompts: list[str] = []

    def map_json(self, requests: list[tuple[list[dict[str, str]], Any]]) -> list[LLMCall]:
        calls = []
        for messages, _schema in requests:
            prompt = messages[-1]["content"]
            self.prompts.append(prompt)
            value, error = self.answer(prompt)
            calls.append(LLMCall("k", value, error, False, 1, 10, 2, "fake"))
        return calls


def scripted(prompt: str) -> tuple[dict[str, Any] | None, str | None]:
    """Gold prompts hold one context (answerable), random ones two (not); the 'object to a file' question times out."""
    if "write an object to a file" in prompt:
        return None, "timeout"
    answerable = prompt.count("[context ") == 1
    return {"answerable": answerable, "answer": "x" if answerable else "", "rationale": "read it"}, None


def test_llm_judge_decides_with_the_client_and_a_failed_call_is_undecided():
    client = FakeClient(scripted)
    result = filter_pairs(PAIRS, DOCS, FilterSettings(judge="auto", random_contexts=2), NEGATIVES, client)  # type: ignore[arg-type]
    frame = result.frame.set_index("query_id")
    assert len(client.prompts) == 2 * 3  # sufficiency + necessity for each of the 3 resolved pairs; none for the others
    assert frame["keep"].to_dict() == {"serialise": True, "parse": True, "dump_to_file": False, "frobnicate": False}
    assert frame["undecided"].to_dict() == {"serialise": False, "parse": False, "dump_to_file": True, "frobnicate": False}
    assert frame.loc["dump_to_file", "reason"] == "undecided: timeout"
    assert result.summary == {"pairs": 4, "kept": 2, "dropped": 1, "undecided": 1, "judge": "llm:fake", "judge_note": LLM_JUDGE_NOTE}
    assert result.details["decisions_by_reason"] == {"kept": 2, "undecided": 1, "dropped": 1}
    details = json.loads(frame.loc["serialise", "judge_details"])
    assert details["sufficiency"]["value"]["rationale"] == "read it" and details["necessity"]["value"]["answerable"] is False


def test_a_client_is_not_used_when_the_settings_say_offline_or_none():
    client = FakeClient(scripted)
    resolved = [("q", "serialize an object", ["json.dumps"])]
    texts = {d.doc_id: d.text for d in DOCS}
    assert judge_pairs(resolved, texts, FilterSettings(judge="offline_lexical"), client).judge == "offline_lexical"  # type: ignore[arg-type]
    assert judge_pairs(resolved, texts, FilterSettings(judge="none"), client).judge == "none"  # type: ignore[arg-type]
    assert client.prompts == []


def test_metadata_puts_extra_values_between_summary_and_details():
    result = filter_pairs(PAIRS, DOCS, FilterSettings(judge="none"), NEGATIVES)
    keys = list(result.metadata({"llm_calls": 0}))
    assert keys == ["pairs", "kept", "dropped", "undecided", "judge", "judge_note", "llm_calls", "decisions_by_reason", "dropped_pairs"]


def test_no_retrieval_pair_gives_an_empty_table_and_zero_counts():
    only_mc = [p for p in PAIRS if p.status == "not_retrieval"]
    result = filter_pairs(only_mc, DOCS, FilterSettings(judge="offline_lexical"), NEGATIVES)
    assert result.frame.empty
    assert result.summary["pairs"] == result.summary["kept"] == result.summary["dropped"] == result.summary["undecided"] == 0
    assert result.details == {"decisions_by_reason": {}, "dropped_pairs": "_none_"}


@pytest.mark.parametrize("siblings, bm25", [(2, 3), (3, 0), (1, 1)])
def test_hard_negatives_respect_the_budgets_and_never_repeat(siblings, bm25):
    negatives = HardNegatives(DOCS, NegativeSettings(per_query_siblings=siblings, per_query_bm25=bm25))
    sib, hard = negatives.for_query("a JSON decoder object", ["json.JSONDecoder"])
    assert len(sib) == min(siblings, 3) and len(hard) == bm25  # json has 3 non-module members beside the gold
    assert not set(sib) & set(hard) and "json.JSONDecoder" not in sib + hard
