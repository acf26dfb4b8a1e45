"""The LLM layer through the assets, against an OpenAI-compatible server on loopback that injects faults."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from retrieval_pipeline.definitions import defs
from retrieval_pipeline.defs.resources import LLMResource
from retrieval_pipeline_tests.defs.conftest import VOCAB, write_dataset
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.openai_server import FakeOpenAIServer
from retrieval_pipeline_tests.fakes.persistent_faults import PersistentFaultServer
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

SECRET = "sk-test-DO-NOT-LEAK-4242"


def scripted_answer(messages: list[dict]) -> str:
    """A stand-in model: the gold prompt holds one context (answerable), the random one several (not)."""
    last = messages[-1]["content"]
    if "primary subject" in last:
        return json.dumps({"primary_class": "csv.DictWriter", "rationale": "the writer builds the file"})
    if "Score the retrieval" in last:
        return json.dumps({"quality": 0.8, "completeness": 0.6, "relevance": 0.9, "rationale": "on topic"})
    answerable = last.count("[context ") == 1
    return json.dumps({"answerable": answerable, "answer": "x" if answerable else "", "rationale": "read the contexts"})


def run(resources, instance, judge_retrieved=False):
    config = dg.RunConfig(ops={"query_results": {"config": {"judge_retrieved": judge_retrieved}}})
    return dg.materialize(
        list(defs().assets), partition_key="stdlib", resources=resources, instance=instance, run_config=config, raise_on_error=False
    )


def meta(result, key):
    event = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(key)][0]
    return {k: v.value for k, v in event.materialization.metadata.items()}


@pytest.fixture
def llm_resources(tmp_path):
    def make(server: FakeOpenAIServer, root=None) -> dict:
        """Resources on ``server``, everything under ``root`` (default: the test's tmp_path)."""
        root = root or tmp_path
        llm = LLMResource(
            provider="openai_compatible",
            base_url=server.base_url,
            model=server.model,
            api_key=SECRET,
            cache_path=str(root / "cache" / "llm.sqlite"),
            timeout_s=0.5,
            max_concurrency=4,
        )
        return resources_in(root, KeywordEncoderResource(vocabulary=VOCAB), write_dataset(root / "in"), llm)

    return make


def test_llm_decides_targets_filter_and_judge_with_stored_rationales(llm_resources, tmp_path):
    with FakeOpenAIServer(scripted_answer) as server:
        resources = llm_resources(server)
        result = run(resources, dg.DagsterInstance.ephemeral(), judge_retrieved=True)
    assert result.success
    pairs = meta(result, "qa_pairs")
    assert pairs["target_inferer"].startswith("llm:") and float(pairs["ast_llm_agreement_rate"]) == 1.0  # AST also says DictWriter
    verified = result.asset_value("verified_pairs")
    decided = verified[verified["judge"].str.startswith("llm:")]
    assert len(decided) > 0 and not decided["undecided"].any()
    details = json.loads(decided.iloc[0]["judge_details"])
    assert details["sufficiency"]["value"]["rationale"] == "read the contexts"  # the model's answer is stored
    assert int(meta(result, "verified_pairs")["llm_prompt_tokens"]) > 0
    judged = result.asset_value("query_results")
    assert judged["judge_quality"].notna().all() and judged["judge_pass"].all()
    # the key reaches the server but no output, metadata or cache file
    outputs = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not [p for p in outputs if SECRET.encode() in p.read_bytes()]
    assert SECRET not in json.dumps({k: str(v) for k, v in pairs.items()})


def test_without_the_judge_the_scores_are_null_never_zero(tiny_resources):
    result = run(tiny_resources(), dg.DagsterInstance.ephemeral())
    frame = result.asset_value("query_results")
    assert frame["judge_quality"].isna().all() and frame["judge"].isna().all()
    assert "bm25/judge_quality" not in meta(result, "retrieval_metrics")


#: The tiny dataset's retrieval pairs, counted by hand in ``conftest.py``: five API rows, one without an id (a
#: case reject), and one fix_error case; the multiple-choice suite is not part of it.
RETRIEVAL_PAIRS = {
    "api_understanding:serialise",
    "api_understanding:parse",
    "api_understanding:read_rows",
    "api_understanding:missing_gold",
    "fix_errors:01_writer",
}
UP_TO_FILTER = ["raw_cases", "case_rejects", "corpus", "corpus_rejects", "qa_pairs", "verified_pairs"]
SERIALISE = "Question: How do I turn a Python dict into a JSON string?"


def random_prompt_of_serialise(prompt: str) -> bool:
    """The necessity prompt (two random contexts: ``random_contexts: 2``) of the serialise pair."""
    return SERIALISE in prompt and prompt.count("[context ") == 2


def run_filter(resources, instance):
    """Materialise up to ``verified_pairs`` (the LLM's part of the dataset); the run must succeed."""
    result = dg.materialize(list(defs().assets), selection=UP_TO_FILTER, partition_key="stdlib", resources=resources, instance=instance)
    assert result.success
    return result, result.asset_value("verified_pairs").set_index("query_id")


def failed_calls(verified) -> list[tuple[str, str]]:
    """``(query_id, call)`` of every judge call that failed for good, from ``judge_details``."""
    return [(q, call) for q, row in verified.iterrows() for call, d in json.loads(row["judge_details"]).items() if d.get("error")]


def test_faults_that_exhaust_retries_change_only_their_pairs_and_a_rerun_decides_exactly_those(llm_resources, tmp_path):
    with FakeOpenAIServer(scripted_answer) as server:  # the fault-free reference, with its own cache and outputs
        _, reference = run_filter(llm_resources(server, tmp_path / "reference"), dg.DagsterInstance.ephemeral())
    assert set(reference.index) == RETRIEVAL_PAIRS and not reference["undecided"].any()
    reference_keep = set(reference.index[reference["keep"]])
    assert reference_keep == RETRIEVAL_PAIRS - {"api_understanding:missing_gold"}  # gold unresolved: dropped unasked

    instance = dg.DagsterInstance.ephemeral()
    server = PersistentFaultServer(scripted_answer, fails=random_prompt_of_serialise, fault_rate=0.3, seed=3, timeout_sleep_s=1.0)
    with server:
        resources = llm_resources(server)
        first, verified = run_filter(resources, instance)
        faults = sum(server.fault_counts.values())
        failed = failed_calls(verified)
        server.stop_faults()
        start = server.request_count
        second, again = run_filter(resources, instance)
        reasked = [p for p in server.prompts(start) if "primary subject" not in p]  # the judge's prompts

    # 30% random faults, retried away, plus the serialise pair's necessity call failing on all 5 attempts
    assert faults > 5 and ("api_understanding:serialise", "necessity") in failed
    lost = {q for q, _ in failed}
    assert set(verified.index) == RETRIEVAL_PAIRS and set(verified.index[verified["undecided"]]) == lost
    assert set(verified.index[verified["keep"]]) == reference_keep - lost  # a failed call never keeps a pair
    decided = sorted(RETRIEVAL_PAIRS - lost)
    assert verified.loc[decided, "keep"].to_dict() == reference.loc[decided, "keep"].to_dict()
    row = verified.loc["api_understanding:serialise"]
    error = json.loads(row["judge_details"])["necessity"]["error"]
    assert row["reason"] == f"undecided: {error}" and "HTTP 429" in error and "after 5 attempt(s)" in error
    first_meta = meta(first, "verified_pairs")
    assert (int(first_meta["undecided"]), int(first_meta["llm_failures"])) == (len(lost), len(failed))

    # the re-run asks the failed judge calls again, nothing else, and decides exactly the undecided pairs
    asked = {f"Question: {query}\n": q for q, query in verified["query"].items()}
    reasked_calls = [
        (next(q for text, q in asked.items() if text in p), "necessity" if p.count("[context ") == 2 else "sufficiency") for p in reasked
    ]
    assert sorted(reasked_calls) == sorted(failed)
    assert not again["undecided"].any() and set(again.index[again["keep"]]) == reference_keep
    judged_calls = 2 * len(RETRIEVAL_PAIRS - {"api_understanding:missing_gold"})  # sufficiency + necessity per resolved pair
    assert int(meta(second, "verified_pairs")["llm_cache_hits"]) == judged_calls - len(failed)


@pytest.mark.integration
@pytest.mark.local_llm
def test_local_llama_server_end_to_end_plumbing(tmp_path):
    """The `local` provider: a real llama.cpp server with the packaged SmolLM2 GGUF, started and stopped.

    The tiny model is far too weak to judge (it calls almost anything answerable), so this proves
    plumbing only: every pair gets a decision or is marked undecided, and the judge is named.
    """
    from retrieval_pipeline.core.services.llm.local_server import llama_server_unavailable_reason

    reason = llama_server_unavailable_reason()
    if reason:
        pytest.skip(reason)
    llm = LLMResource(provider="local", cache_path=str(tmp_path / "cache" / "llm.sqlite"), timeout_s=120, max_concurrency=1, max_tokens=96)
    resources = resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), write_dataset(tmp_path / "in"), llm)
    # up to the filter only: the tiny model tends to call everything answerable, random contexts included,
    # which can leave no pair to evaluate downstream
    upto_filter = ["raw_cases", "case_rejects", "corpus", "corpus_rejects", "qa_pairs", "verified_pairs"]
    result = dg.materialize(
        list(defs().assets), selection=upto_filter, partition_key="stdlib", resources=resources, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success
    verified = result.asset_value("verified_pairs")
    assert set(verified["query_id"]) == RETRIEVAL_PAIRS
    resolved = verified[verified["judge"] != "none"]
    assert set(resolved["query_id"]) == RETRIEVAL_PAIRS - {"api_understanding:missing_gold"}
    assert resolved["judge"].str.startswith("llm:").all()
    # each row's reason says what its flags say; an undecided row names the failed call's error
    assert (resolved["reason"].str.startswith("kept:") == resolved["keep"]).all()
    assert (resolved["reason"].str.startswith("undecided: ") == resolved["undecided"]).all()
    for row in resolved[resolved["undecided"]].itertuples():
        errors = [d["error"] for d in json.loads(row.judge_details).values() if d["error"]]
        assert errors and row.reason == f"undecided: {errors[0]}"
    assert meta(result, "qa_pairs")["target_inferer"].startswith("llm:")
