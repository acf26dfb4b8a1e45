from __future__ import annotations

import json

from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.pairs.llm_targets import LLMTargetInferer
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline_tests.fakes.openai_server import FakeOpenAIServer

DOCS = [
    Document("pkg.agents.SequentialAgent", "runs agents in order", kind="class", module="pkg.agents"),
    Document("pkg.agents.LoopAgent", "runs an agent repeatedly", kind="class", module="pkg.agents"),
]


def infer(answer: str, case: Case):
    with FakeOpenAIServer(lambda messages: json.dumps({"primary_class": answer, "rationale": "r"})) as server:
        with LLMClient(LLMSettings(base_url=server.base_url, model=server.model)) as client:
            return LLMTargetInferer(client, AstTargetInferer()).infer(case, CorpusLookup.from_documents(DOCS))


def test_agreement_with_a_description_only_ast_result():
    case = Case("c1", "s", "fix_error", "f.yaml", 0, "Create a `SequentialAgent` that runs two agents.")
    result = infer("SequentialAgent", case)
    assert result.target == "pkg.agents.SequentialAgent" and result.evidence["agree"] is True


def test_llm_wins_when_the_ast_only_had_the_description_and_disagreement_is_recorded():
    case = Case("c2", "s", "fix_error", "f.yaml", 0, "Create a `SequentialAgent` that repeats a sub-agent.")
    result = infer("pkg.agents.LoopAgent", case)
    assert result.target == "pkg.agents.LoopAgent" and result.evidence["agree"] is False
    assert result.evidence["ast"] == "pkg.agents.SequentialAgent" and "llm" in result.evidence["reconciled"]


def test_an_answer_outside_the_corpus_keeps_the_ast_target():
    case = Case("c3", "s", "fix_error", "f.yaml", 0, "Create a `LoopAgent`.")
    result = infer("util-c", case)
    assert result.target == "pkg.agents.LoopAgent" and result.evidence["llm"] is None and result.evidence["agree"] is False
