"""fix_error targets inferred by an LLM from the description and solution code, reconciled with AST.

Reconciliation, per case:

* both name the same corpus document → that target (agreement);
* they differ and the AST read a solution file → the AST target: static evidence beats a model's
  reading of the same code; the disagreement is recorded with both answers;
* they differ and the AST only had the description → the LLM target when it resolves to a corpus
  document (it read the code or understood the prose), else the AST's;
* the LLM call failed → the AST target, with the error recorded.

The evidence of every case carries ``ast``, ``llm``, ``agree`` and the model's rationale, so the
agreement rate and the list of disagreements come straight from the pairs table.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer, TargetInference, read_case_file, resolve_symbol
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.services.llm.client import LLMCall, LLMClient

MAX_CODE_CHARS = 4000


class PrimarySubject(BaseModel):
    primary_class: str = Field(description="the fully qualified or short name of the primary class or function")
    rationale: str = ""


def target_messages(case: Case, candidates: Sequence[str]) -> list[dict[str, str]]:
    """The prompt: description, the solution code when present, and candidate names as hints."""
    code = _solution_code(case)
    hint = f"\nCandidates seen in the code or description: {', '.join(candidates)}." if candidates else ""
    user = (
        f"Task: {case.query}{code}{hint}\n\nWhich library class or function is the primary subject of this task, "
        'the one a developer must understand to fix it? Reply as {"primary_class": "...", "rationale": "..."}.'
    )
    return [
        {"role": "system", "content": "You label programming tasks. Reply with one JSON object and nothing else."},
        {"role": "user", "content": user},
    ]


def _solution_code(case: Case) -> str:
    """The first readable solution file as a prompt section; a file :func:`read_case_file` refuses is left out."""
    for role in ("fixed", "unfixed", "test"):
        path = case.files.get(role)
        if not path:
            continue
        try:
            text = read_case_file(path, role)
        except (OSError, UnicodeDecodeError, ValueError):  # PathRefused is a ValueError: refused, never sent
            continue
        return f"\n\nSolution code ({role}):\n```python\n{text[:MAX_CODE_CHARS]}\n```"
    return ""


class LLMTargetInferer:
    """The :class:`TargetInferer` seam filled by an LLM, reconciled with :class:`AstTargetInferer`."""

    def __init__(self, client: LLMClient, ast_inferer: AstTargetInferer | None = None) -> None:
        self.client = client
        self.ast = ast_inferer or AstTargetInferer()
        self.name = f"llm:{client.settings.model}"

    def infer(self, case: Case, lookup: CorpusLookup) -> TargetInference:
        return self.infer_all([case], lookup)[0]

    def infer_all(self, cases: Sequence[Case], lookup: CorpusLookup) -> list[TargetInference]:
        """All cases at once (the client runs the calls concurrently and caches them)."""
        ast_results = [self.ast.infer(c, lookup) for c in cases]
        calls = self.client.map_json([(target_messages(c, _candidate_names(a)), PrimarySubject) for c, a in zip(cases, ast_results)])
        return [self._reconcile(a, call, lookup) for a, call in zip(ast_results, calls)]

    def _reconcile(self, ast_result: TargetInference, call: LLMCall, lookup: CorpusLookup) -> TargetInference:
        answer = (call.value or {}).get("primary_class")
        match = resolve_symbol(answer.strip().strip("`"), lookup) if answer else None
        llm_target = match.doc_id if match else None
        evidence = {
            **ast_result.evidence,
            "ast": ast_result.target,
            "llm": llm_target,
            "llm_answer": answer,
            "llm_rationale": (call.value or {}).get("rationale"),
            "llm_error": call.error,
            "agree": llm_target is not None and llm_target == ast_result.target,
        }
        if call.value is None or llm_target is None or llm_target == ast_result.target:
            target, how = ast_result.target, ("agree" if evidence["agree"] else "ast (no usable LLM answer)")
        elif ast_result.evidence.get("source") == "file":
            target, how = ast_result.target, "ast (solution file read; LLM disagreed)"
        else:
            target, how = llm_target, "llm (AST had only the description)"
        evidence["reconciled"] = how
        warnings = list(ast_result.warnings) + ([f"case {ast_result.case_id!r}: LLM call failed: {call.error}"] if call.error else [])
        method = ast_result.method if target == ast_result.target else "llm"
        return TargetInference(ast_result.case_id, target, method, evidence, warnings)


def _candidate_names(result: TargetInference) -> list[str]:
    """Hints for the prompt: the documents the AST scored, and the names the description mentioned."""
    entries = list(result.evidence.get("candidates", [])) + list(result.evidence.get("names", []))
    names = [(e.get("doc_id") or e.get("name")) if isinstance(e, dict) else e for e in entries]
    return [str(n) for n in dict.fromkeys(names) if n][:12]
