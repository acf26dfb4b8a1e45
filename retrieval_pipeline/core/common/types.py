"""The shapes every stage agrees on.

Every input (benchmark suites, API indexes, QA sets) is reduced to the same three things:

* a **corpus** of :class:`Document` (what retrievers index),
* **queries** (here: :class:`Case` rows that carry a question),
* **qrels** ``{query_id: {doc_id: grade}}`` (what counts as relevant).

Everything downstream (filter, indexes, runs, metrics) is written once against these shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: ``{query_id: {doc_id: grade}}``; a grade >= 1 is relevant.
Qrels = dict[str, dict[str, int]]
#: One ranked hit: ``(doc_id, score)``, best first.
Hit = tuple[str, float]
#: ``{query_id: [(doc_id, score), ...]}``, best first.
Run = dict[str, list[Hit]]

#: Case types a benchmark suite YAML may hold.
BENCHMARK_TYPES = ("api_understanding", "fix_error", "multiple_choice")


@dataclass
class Document:
    """One retrievable unit: an API object (FQN) or a passage."""

    doc_id: str
    text: str
    title: str = ""
    kind: str = "passage"  # module | class | function | method | property | passage
    module: str | None = None
    aliases: list[str] = field(default_factory=list)
    source: str = ""  # where it came from: a file path, or "introspection:<module>"


@dataclass
class Case:
    """One validated benchmark case, whatever its suite type."""

    case_id: str
    suite: str
    benchmark_type: str  # one of BENCHMARK_TYPES
    source_file: str
    index: int  # 0-based position in the source file
    query: str  # the question; for fix_error the description
    gold_fqns: list[str] = field(default_factory=list)  # api_understanding
    files: dict[str, str] = field(default_factory=dict)  # fix_error: role -> resolved path
    options: dict[str, str] = field(default_factory=dict)  # multiple_choice: letter -> text
    correct_answer: str | None = None
    explanation: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # everything else the case carried


@dataclass
class Rejected:
    """A row that did not make it, and why. Nothing is dropped without one of these."""

    source_file: str
    case_id: str | None
    index: int | None
    reason: str


#: :class:`QAPair` fields stored as JSON text in the ``qa_pairs`` frame (see :mod:`retrieval_pipeline.core.common.frames`).
PAIR_JSON_FIELDS = ("evidence", "warnings")


@dataclass
class QAPair:
    query_id: str
    suite: str
    benchmark_type: str
    source_file: str
    query: str
    gold_doc_ids: list[str]
    status: str  # resolved | unresolved | not_retrieval
    method: str  # how the gold was found: exact/alias/suffix mix, ast:..., description:..., none
    evidence: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    gold_grades: list[int] = field(default_factory=list)  # aligned with gold_doc_ids; empty means all 1

    def grades(self) -> list[int]:
        return list(self.gold_grades) or [1] * len(self.gold_doc_ids)
