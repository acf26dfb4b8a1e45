"""The bad-input catalogue: each probe is one realistic bad (or borderline) input, and its outcome.

Every probe writes its input under a fresh folder, runs the loader that reads it and checks three things:
the message names the file and the case, row, line, dataset or field, and says why; whether the input is
refused as a whole or only the bad part is rejected; and the counts, ``read = accepted + rejected`` for
each unit (datasets, cases, rows, documents, corpus/query/qrels lines, solution files).

Probes are data (:data:`PROBES`, grouped by kind: registry, suite, nq, context_qa, beir, fix_file), so
``benchmarks/bad_input_catalogue.py`` prints the same catalogue as a table. What the older tests already
assert is not repeated here:

* ``test_registry.py``: unknown/duplicate retrievers, baseline, checked_retrievers, empty retriever list,
  ``retrieval.depth: 0``, a corpus block with no source;
* ``test_dataset_names.py``: unsafe or non-string dataset names;
* ``test_yaml_limits.py``: alias bombs, recursive/undefined aliases, deep nesting, oversized YAML, devices;
* ``test_hostile_paths.py``: suite file paths leaving the root (``..``, absolute, symlinks), FIFOs, devices;
* ``test_suites.py``: missing id/question/description, gold FQNs, options, correct_answer, benchmark_type,
  non-mapping rows, duplicate ids, YAML syntax errors, wrong top level;
* ``test_nq.py``: missing columns, empty or missing file, empty cells, stray fields, non-UTF-8 bytes,
  unclosed quote, sampling, BOM with columns in any order;
* ``test_beir.py``: malformed JSON, invalid UTF-8, missing files, bad corpus rows, one bad qrels line
  (wrong columns, non-integer grade, unknown query/document, duplicate judgement, empty id);
* ``test_context_qa.py``: empty/missing/non-string question or context, junk-only context, non-object
  rows, exact duplicates, malformed JSON, not a list, clashing document stems.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Case, Document
from retrieval_pipeline.core.datasets import adapter_for
from retrieval_pipeline.core.datasets.context_qa.reader import load_context_qa
from retrieval_pipeline.core.datasets.nq.reader import load_nq_csv
from retrieval_pipeline.core.datasets.suite.reader import load_suite
from retrieval_pipeline.core.pairs.fix_targets import AstTargetInferer
from retrieval_pipeline.core.pairs.gold import CorpusLookup
from retrieval_pipeline.core.registry import DatasetConfig, load_registry

#: ``{unit: (read, accepted, rejected)}``, e.g. ``{"rows": (3, 2, 1)}``.
Counts = dict[str, tuple[int, int, int]]


@dataclass(frozen=True)
class Outcome:
    """What a loader made of one probe's input.

    Attributes:
        message: Every reject reason or warning, one per line; or the error that refused the whole input.
        counts: Read, accepted and rejected per unit (empty when the whole input was refused).
        refused: The loader raised: nothing of the input was used.
    """

    message: str
    counts: Counts = field(default_factory=dict)
    refused: bool = False


@dataclass(frozen=True)
class Probe:
    """One catalogue entry: an input, and what must come out of it.

    Attributes:
        kind: The input kind (``registry``, ``suite``, ``nq``, ``context_qa``, ``beir``, ``fix_file``).
        id: A short description of the input (the pytest id and the table's "input" column).
        build: Writes the input under the given folder and runs the loader on it.
        expect: Substrings the message must hold; ``{root}`` stands for the probe's folder.
        counts: The expected counts.
        refused: Whether the whole input must be refused.
    """

    kind: str
    id: str
    build: Callable[[Path], Outcome]
    expect: tuple[str, ...]
    counts: Counts
    refused: bool = False


def run_probe(probe: Probe, root: Path) -> Outcome:
    """Write the probe's input under ``root`` (created) and load it."""
    root.mkdir(parents=True, exist_ok=True)
    return probe.build(root)


def check_probe(probe: Probe, outcome: Outcome, root: Path) -> None:
    """Assert the outcome: the message's words, refused or not, counts as expected and adding up."""
    for words in probe.expect:
        assert words.replace("{root}", str(root)) in outcome.message, (words, outcome.message)
    assert outcome.refused == probe.refused, outcome.message
    assert outcome.counts == probe.counts, (outcome.counts, outcome.message)
    for unit, (read, accepted, rejected) in outcome.counts.items():
        assert read == accepted + rejected, unit
    assert bool(outcome.message) == (probe.refused or any(r for _, _, r in outcome.counts.values()) or bool(probe.expect))
    assert len(outcome.message) < 3000  # short: a large input is never echoed


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def _refused(call: Callable[[], Outcome]) -> Outcome:
    try:
        return call()
    except InputError as exc:
        return Outcome(str(exc), refused=True)


# --------------------------------------------------------------------------------------------------
# registry: one good dataset and one bad one; only the bad one is invalid, naming the file, dataset and field
# --------------------------------------------------------------------------------------------------

SUITE_ENTRY = "suites: [s.yaml]\ncorpus: {introspect_modules: [json]}"
CQA_ENTRY = "kind: context_qa\ncontext_qa: {qa: qa.json, pydoc_topics: ['*']}"


def _registry(bad_entry: str) -> Callable[[Path], Outcome]:
    """A registry with dataset ``good`` and dataset ``bad`` (``bad_entry``: its YAML lines, or a flow value)."""

    def build(root: Path) -> Outcome:
        indented = "\n".join(f"    {line}" for line in SUITE_ENTRY.splitlines())
        bad = f" {bad_entry}" if bad_entry.startswith("[") else "\n" + "\n".join(f"    {line}" for line in bad_entry.splitlines())
        path = _write(root / "datasets.yaml", f"datasets:\n  good:\n{indented}\n  bad:{bad}\n")
        registry = load_registry(path, root=root)
        counts = {"datasets": (len(registry.names), len(registry.datasets), len(registry.errors))}
        try:
            registry.get("bad")
        except InputError as exc:
            return Outcome(str(exc), counts)
        return Outcome("", counts)

    return build


def registry_probe(probe_id: str, bad_entry: str, *expect: str, valid: bool = False) -> Probe:
    where = () if valid else ("file {root}/datasets.yaml", "dataset 'bad' is invalid: ")
    return Probe("registry", probe_id, _registry(bad_entry), (*where, *expect), {"datasets": (2, 2, 0) if valid else (2, 1, 1)})


REGISTRY_PROBES = [
    registry_probe(
        "threshold cut-off deeper than the run depth (hit_rate@500, depth 100)",
        f"{SUITE_ENTRY}\nthresholds: {{hit_rate@500: {{min: 0.5}}}}",
        "thresholds.hit_rate@500: 'hit_rate@500' has cut-off 500, deeper than the run depth 100",
        "(computed: hit_rate@1, hit_rate@5, hit_rate@10)",
    ),
    registry_probe(
        "misspelled threshold metric (recal@5)",
        f"{SUITE_ENTRY}\nthresholds: {{recal@5: {{min: 0.5}}}}",
        "thresholds.recal@5: unknown metric 'recal@5' (did you mean recall@5?)",
    ),
    registry_probe(
        "floor on a lower-is-better metric (latency_p95_ms)",
        f"{SUITE_ENTRY}\nthresholds: {{latency_p95_ms: {{min: 100}}}}",
        "thresholds.latency_p95_ms: lower is better for latency_p95_ms, so a floor (min) cannot watch it",
    ),
    registry_probe(
        "floor on avg_rank_when_found (lower is better)",
        f"{SUITE_ENTRY}\nthresholds: {{avg_rank_when_found: {{min: 2}}}}",
        "thresholds.avg_rank_when_found: lower is better",
    ),
    registry_probe(
        "registered metric at a cut-off the evaluation skips (hit_rate@20)",
        f"{SUITE_ENTRY}\nthresholds: {{hit_rate@20: {{min: 0.5}}}}",
        "thresholds.hit_rate@20: hit_rate@20 is not computed by the evaluation of a 'suite' dataset",
        "(computed: hit_rate@1, hit_rate@5, hit_rate@10)",
    ),
    registry_probe(
        "threshold on a bookkeeping column (query_id)",
        f"{SUITE_ENTRY}\nthresholds: {{query_id: {{min: 0.5}}}}",
        "thresholds.query_id: 'query_id' is a bookkeeping column, not a metric",
    ),
    registry_probe(
        "cut-off metric named without its cut-off (recall)",
        f"{SUITE_ENTRY}\nthresholds: {{recall: {{min: 0.5}}}}",
        "thresholds.recall: unknown metric 'recall' (recall needs a cut-off: recall@k",
        "(computed: recall@1, recall@5, recall@10)",
    ),
    registry_probe(
        "cut-off zero (hit_rate@0)",
        f"{SUITE_ENTRY}\nthresholds: {{hit_rate@0: {{min: 0.5}}}}",
        "thresholds.hit_rate@0: unknown metric 'hit_rate@0' (the cut-off must be an integer >= 1, got '0')",
    ),
    registry_probe(
        "context-QA metric on a suite dataset (context_coverage@5)",
        f"{SUITE_ENTRY}\nthresholds: {{context_coverage@5: {{min: 0.5}}}}",
        "thresholds.context_coverage@5: context_coverage@5 is not computed by the evaluation of a 'suite' dataset",
    ),
    registry_probe(
        "context-QA metric on a context_qa dataset (control: valid)",
        f"{CQA_ENTRY}\nthresholds: {{context_coverage@5: {{min: 0.5}}, hit@3: {{min: 0.4}}}}",
        valid=True,
    ),
    registry_probe(
        "NaN floor (min: .nan)",
        f"{SUITE_ENTRY}\nthresholds: {{mrr: {{min: .nan}}}}",
        "thresholds.mrr: min must be a finite number, got nan",
    ),
    registry_probe(
        "floor without min", f"{SUITE_ENTRY}\nthresholds: {{hit_rate@5: {{severity: ERROR}}}}", "thresholds.hit_rate@5.min: Field required"
    ),
    registry_probe(
        "floor min as a word (min: high)",
        f"{SUITE_ENTRY}\nthresholds: {{hit_rate@5: {{min: high}}}}",
        "thresholds.hit_rate@5.min: Input should be a valid number",
    ),
    registry_probe(
        "unknown severity (FATAL)",
        f"{SUITE_ENTRY}\nthresholds: {{hit_rate@5: {{min: 0.5, severity: FATAL}}}}",
        "thresholds.hit_rate@5.severity: Input should be 'ERROR' or 'WARN'",
    ),
    registry_probe(
        "unknown key in a floor (max:)",
        f"{SUITE_ENTRY}\nthresholds: {{hit_rate@5: {{min: 0.5, max: 0.9}}}}",
        "thresholds.hit_rate@5.max: Extra inputs are not permitted",
    ),
    registry_probe(
        "misspelled drift metric (hit_rte@5)",
        f"{SUITE_ENTRY}\ndrift: {{metric: hit_rte@5}}",
        "drift.metric: unknown metric 'hit_rte@5' (did you mean hit_rate@5?)",
    ),
    registry_probe(
        "drift on a lower-is-better metric (latency_mean_ms)",
        f"{SUITE_ENTRY}\ndrift: {{metric: latency_mean_ms}}",
        "drift.metric: lower is better for latency_mean_ms, so the drift rule (it warns on a drop) cannot watch it",
    ),
    registry_probe(
        "drift drop of 150% (max_relative_drop: 1.5)",
        f"{SUITE_ENTRY}\ndrift: {{max_relative_drop: 1.5}}",
        "drift.max_relative_drop: Input should be less than 1",
    ),
    registry_probe(
        "run depth below the default drift cut-off (depth 3)",
        f"{SUITE_ENTRY}\nretrieval: {{depth: 3}}",
        "drift.metric: 'hit_rate@5' has cut-off 5, deeper than the run depth 3 (computed: hit_rate@1)",
    ),
    registry_probe(
        "three metric problems at once, all listed",
        f"{SUITE_ENTRY}\nthresholds: {{recal@5: {{min: 0.5}}, latency_p95_ms: {{min: 9}}}}\ndrift: {{metric: ndcg@100}}",
        "thresholds.recal@5: unknown metric",
        "; thresholds.latency_p95_ms: lower is better",
        "; drift.metric: ndcg@100 is not computed by the evaluation of a 'suite' dataset (computed: ndcg@10)",
    ),
    registry_probe(
        "chunk overlap equal to the chunk size",
        "kind: context_qa\ncontext_qa: {qa: qa.json, pydoc_topics: ['*'], chunking: {size: 400, overlap: 400}}",
        "context_qa.chunking: overlap (400) must be smaller than size (400)",
    ),
    registry_probe(
        "chunk overlap larger than the chunk size",
        "kind: context_qa\ncontext_qa: {qa: qa.json, pydoc_topics: ['*'], chunking: {size: 100, overlap: 500}}",
        "context_qa.chunking: overlap (500) must be smaller than size (100)",
    ),
    registry_probe(
        "negative chunk overlap",
        "kind: context_qa\ncontext_qa: {qa: qa.json, pydoc_topics: ['*'], chunking: {overlap: -5}}",
        "context_qa.chunking.overlap: Input should be greater than or equal to 0",
    ),
    registry_probe(
        "similarity threshold above 1",
        "kind: context_qa\ncontext_qa: {qa: qa.json, pydoc_topics: ['*'], similarity: {threshold: 1.5}}",
        "context_qa.similarity.threshold: Input should be less than or equal to 1",
    ),
    registry_probe(
        "both documents and pydoc_topics",
        "kind: context_qa\ncontext_qa: {qa: qa.json, documents: [a.md], pydoc_topics: ['*']}",
        "context_qa needs exactly one of documents, pydoc_topics",
    ),
    registry_probe(
        "negative latency sample",
        f"{SUITE_ENTRY}\nretrieval: {{latency_sample: -1}}",
        "retrieval.latency_sample: Input should be greater than or equal to 0",
    ),
    registry_probe(
        "negative BM25 negatives per query",
        f"{SUITE_ENTRY}\nnegatives: {{per_query_bm25: -2}}",
        "negatives.per_query_bm25: Input should be greater than or equal to 0",
    ),
    registry_probe(
        "NQ sample_size 0", "kind: nq\nnq: {csv: a.csv, sample_size: 0}", "nq.sample_size: Input should be greater than or equal to 1"
    ),
    registry_probe("unknown judge (judge: gpt)", f"{SUITE_ENTRY}\nfilter: {{judge: gpt}}", "filter.judge: Input should be"),
    registry_probe(
        "misspelled block (threshold: instead of thresholds:)",
        f"{SUITE_ENTRY}\nthreshold: {{mrr: {{min: 0.5}}}}",
        "unknown settings ['threshold']",
    ),
    registry_probe("dataset settings are a list", "[a, b]", "expected a mapping of settings, got list"),
]


# --------------------------------------------------------------------------------------------------
# suite: a good row, then the probe's row(s); the bad row is rejected naming file and case (or index)
# --------------------------------------------------------------------------------------------------

GOOD_ROW = "- {id: api_ok, benchmark_type: api_understanding, question: Which class?, answers: [{fully_qualified_class_name: a.B}]}"


def api_row(case_id: str) -> str:
    return f"- {{id: {case_id}, benchmark_type: api_understanding, question: Q?, answers: [{{fully_qualified_class_name: a.B}}]}}"


def _suite(rows: str | bytes, *, raw: bool = False) -> Callable[[Path], Outcome]:
    """``benchmarks:`` + the good row + ``rows`` (or ``rows`` as the whole file when ``raw``)."""

    def build(root: Path) -> Outcome:
        content = rows if raw else f"benchmarks:\n{GOOD_ROW}\n{rows}\n"
        path = _write(root / "suite" / "benchmark.yaml", content)

        def load() -> Outcome:
            loaded = load_suite(path)
            reasons = "\n".join(r.reason for r in loaded.rejects)
            return Outcome(reasons, {"cases": (loaded.total, len(loaded.cases), len(loaded.rejects))})

        return _refused(load)

    return build


def suite_probe(
    probe_id: str, rows: str | bytes, *expect: str, counts: tuple[int, int, int] = (2, 1, 1), raw: bool = False, refused: bool = False
) -> Probe:
    return Probe(
        "suite",
        probe_id,
        _suite(rows, raw=raw),
        ("{root}/suite/benchmark.yaml", *expect) if expect else (),
        {} if refused else {"cases": counts},
        refused,
    )


SUITE_PROBES = [
    suite_probe("id is a list [1, 2]", api_row("[1, 2]"), "case at index 1: 'id' must be a string or an integer, got list '[1, 2]'"),
    suite_probe("id is a mapping", api_row("{a: 1}"), "case at index 1: 'id' must be a string or an integer, got dict"),
    suite_probe("id is a float (1.5)", api_row("1.5"), "case at index 1: 'id' must be a string or an integer, got float"),
    suite_probe("id is a boolean (yes)", api_row("true"), "case at index 1: 'id' must be a string or an integer, got bool"),
    suite_probe("id with a space", api_row("'api one'"), "case at index 1: 'id' 'api one' contains whitespace"),
    suite_probe("id with a newline", api_row('"api\\none"'), "case at index 1: 'id' 'api\\none' contains whitespace; ids are written to"),
    suite_probe("id with a tab", api_row('"api\\tone"'), "'id' 'api\\tone' contains whitespace"),
    suite_probe(
        "id with a control character (BEL)", api_row('"api\\x07"'), "case at index 1: 'id' 'api\\x07' contains a control character"
    ),
    suite_probe("id of 300 characters", api_row("x" * 300), "case at index 1: 'id' 'xxxx", "is longer than 200 characters"),
    suite_probe("integer id (control: accepted as '7')", api_row("7"), counts=(2, 2, 0)),
    suite_probe(
        "integer id 7 then string id '7'",
        f"{api_row('7')}\n{api_row(repr('7'))}",
        "case '7' (index 2): duplicate 'id' '7' (first seen at index 1)",
        counts=(3, 2, 1),
    ),
    suite_probe(
        "question is a list",
        "- {id: q_list, benchmark_type: api_understanding, question: [a, b], answers: []}",
        "case 'q_list' (index 1): 'question' must be text, got list",
    ),
    suite_probe(
        "description is a number",
        "- {id: fix_num, benchmark_type: fix_error, description: 42}",
        "case 'fix_num' (index 1): 'description' must be text, got int",
    ),
    suite_probe(
        "options given as a list",
        "- {id: mc_list, benchmark_type: multiple_choice, question: Q?, options: [a, b], correct_answer: A}",
        "case 'mc_list' (index 1): 'options' must be a mapping letter -> text (got list)",
    ),
    suite_probe(
        "fixed_file is a number",
        "- {id: fix_int, benchmark_type: fix_error, description: Fix it., fixed_file: 7}",
        "case 'fix_int' (index 1): 'fixed_file' must be a non-empty path string (got 7)",
    ),
    suite_probe("null row (- ~)", "- ~", "case at index 1: case is not a mapping (got NoneType)"),
    suite_probe(
        "BOM and CRLF line endings (control: accepted)", f"\ufeffbenchmarks:\r\n{GOOD_ROW}\r\n".encode(), counts=(1, 1, 0), raw=True
    ),
    suite_probe(
        "Latin-1 bytes in a question",
        f"benchmarks:\n{GOOD_ROW}\n".encode() + b"- {id: x, question: caf\xe9}\n",
        "cannot read suite file: 'utf-8' codec can't decode byte 0xe9",
        raw=True,
        refused=True,
    ),
    suite_probe("empty file (0 bytes)", b"", "top level must be a mapping with a 'benchmarks' list", raw=True, refused=True),
    suite_probe(
        "benchmarks is a mapping",
        "benchmarks: {api_ok: {question: Q?}}\n",
        "top level must be a mapping with a 'benchmarks' list",
        raw=True,
        refused=True,
    ),
]


# --------------------------------------------------------------------------------------------------
# nq: CSV rows; a bad row is rejected naming file and row, a bad file is refused naming file and row
# --------------------------------------------------------------------------------------------------

NQ_HEADER = "question,long_answer,short_answer\n"


def _nq(content: str | bytes) -> Callable[[Path], Outcome]:
    def build(root: Path) -> Outcome:
        path = _write(root / "nq.csv", content)

        def load() -> Outcome:
            loaded = load_nq_csv(path)
            return Outcome("\n".join(r.reason for r in loaded.rejects), {"rows": (loaded.total, len(loaded.rows), len(loaded.rejects))})

        return _refused(load)

    return build


def nq_probe(probe_id: str, content: str | bytes, *expect: str, counts: tuple[int, int, int] | None = (3, 2, 1)) -> Probe:
    return Probe(
        "nq", probe_id, _nq(content), ("{root}/nq.csv", *expect) if expect else (), {"rows": counts} if counts else {}, counts is None
    )


ONE_MB = 1024 * 1024

NQ_PROBES = [
    nq_probe(
        "1 MB long_answer cell",
        f"{NQ_HEADER}q1,p1,a\nq2,{'x' * ONE_MB},b\nq3,p3,c\n",
        "file {root}/nq.csv, row 3: 'long_answer' (1,048,576 characters) over the per-cell limit of 100,000 characters",
    ),
    nq_probe(
        "150,000-character question (over csv's default field limit)",
        f"{NQ_HEADER}q1,p1,a\n{'q' * 150_000},p2,b\nq3,p3,c\n",
        "row 3: 'question' (150,000 characters) over the per-cell limit",
    ),
    nq_probe("99,000-character passage (control: accepted)", f"{NQ_HEADER}q1,p1,a\nq2,{'x' * 99_000},b\nq3,p3,c\n", counts=(3, 3, 0)),
    nq_probe(
        "11 MB quoted field (rejects its row, not the file)",
        f'{NQ_HEADER}q1,p1,a\nq2,"{"x" * (11 * ONE_MB)}",b\n',
        "file {root}/nq.csv, row 3: 'long_answer' (11,534,336 characters) over the per-cell limit of 100,000 characters",
        counts=(2, 1, 1),
    ),
    nq_probe(
        "exact duplicate row",
        f"{NQ_HEADER}who made python,Guido made it.,Guido\nq2,p2,b\nwho made python, Guido  made it. ,Guido\n",
        "file {root}/nq.csv, row 4: exact duplicate of row 2 (nq_q000000): same question and long answer",
    ),
    nq_probe(
        "same question, another passage (control: both kept)",
        f"{NQ_HEADER}who made python,Guido made it.,a\nwho made python,Guido.,b\n",
        counts=(2, 2, 0),
    ),
    nq_probe("header only", NQ_HEADER, counts=(0, 0, 0)),
    nq_probe("row without the short_answer field (control: accepted)", f"{NQ_HEADER}q1,p1\n", counts=(1, 1, 0)),
    nq_probe("CRLF line endings (control: accepted)", f"{NQ_HEADER}q1,p1,a\nq2,p2,b\n".replace("\n", "\r\n"), counts=(2, 2, 0)),
    nq_probe(
        "semicolon-separated export",
        "question;long_answer;short_answer\nq1;p1;a\n",
        "missing required column(s) question, long_answer, short_answer;",
        "the header has 'question;long_answer;short_answer'",
        counts=None,
    ),
    nq_probe(
        "a column named twice",
        "question,long_answer,short_answer,question\nq1,p1,a,q\n",
        "column(s) question appear more than once in the header",
        counts=None,
    ),
    nq_probe(
        "UTF-16 file",
        f"{NQ_HEADER}q1,p1,a\n".encode("utf-16"),
        "not valid UTF-8 in row 1, byte offset 0 (0xff: invalid start byte)",
        counts=None,
    ),
    nq_probe("short answer only, empty passage", f"{NQ_HEADER}q1,p1,a\nq2,,b\nq3,p3,c\n", "file {root}/nq.csv, row 3: empty 'long_answer'"),
]


# --------------------------------------------------------------------------------------------------
# context_qa: the QA file (rows) and the markdown documents (corpus)
# --------------------------------------------------------------------------------------------------

QA_ROW = {"question": "What is covered?", "answer": "Fire.", "context": "Fire damage is covered."}


def _qa(content: str | bytes) -> Callable[[Path], Outcome]:
    def build(root: Path) -> Outcome:
        path = _write(root / "qa.json", content)

        def load() -> Outcome:
            loaded = load_context_qa(path)
            return Outcome("\n".join(r.reason for r in loaded.rejects), {"rows": (loaded.total, len(loaded.cases), len(loaded.rejects))})

        return _refused(load)

    return build


def _documents(files: dict[str, str | bytes]) -> Callable[[Path], Outcome]:
    """The context_qa adapter's corpus over ``files`` (name -> content), as the ``corpus`` asset builds it."""

    def build(root: Path) -> Outcome:
        paths = [str(_write(root / name, content)) for name, content in files.items()]
        config = DatasetConfig(name="c", kind="context_qa", context_qa={"qa": str(root / "qa.json"), "documents": paths})

        def load() -> Outcome:
            built = adapter_for(config).build_corpus(config)
            report = built.report
            counts = {"documents": (report["documents_read"], report["documents"], report["documents_rejected"])}
            return Outcome("\n".join(r.reason for r in built.rejects), counts)

        return _refused(load)

    return build


REAL_MD = "# Home policy\n\nFire damage is covered up to the sum insured.\n"


def qa_probe(probe_id: str, content: str | bytes, *expect: str, counts: tuple[int, int, int] | None) -> Probe:
    return Probe(
        "context_qa",
        probe_id,
        _qa(content),
        ("{root}/qa.json", *expect) if expect else (),
        {"rows": counts} if counts else {},
        counts is None,
    )


def doc_probe(probe_id: str, files: dict[str, str | bytes], *expect: str, counts: tuple[int, int, int] | None) -> Probe:
    return Probe("context_qa", probe_id, _documents(files), expect, {"documents": counts} if counts else {}, counts is None)


CONTEXT_QA_PROBES = [
    doc_probe(
        "empty .md beside a real one",
        {"home.md": REAL_MD, "auto.md": ""},
        "file {root}/auto.md: document 'auto' is empty (0 characters): it contributes no chunk",
        counts=(2, 1, 1),
    ),
    doc_probe(
        "whitespace-only .md",
        {"home.md": REAL_MD, "auto.md": "\n  \n\t\n"},
        "file {root}/auto.md: document 'auto' is whitespace only (6 characters): it contributes no chunk",
        counts=(2, 1, 1),
    ),
    doc_probe(
        "headings-only .md",
        {"home.md": REAL_MD, "auto.md": "# Auto policy\n\n## Exclusions\n"},
        "file {root}/auto.md: document 'auto' has headings but no text: it contributes no chunk",
        counts=(2, 1, 1),
    ),
    doc_probe("every document empty", {"home.md": "", "auto.md": " "}, "{root}/home.md", "{root}/auto.md", counts=(2, 0, 2)),
    doc_probe("BOM before the first heading (control: heading kept)", {"home.md": "\ufeff" + REAL_MD}, counts=(1, 1, 0)),
    doc_probe(
        "Latin-1 .md",
        {"home.md": REAL_MD, "auto.md": "# Auto\n\nCaf\xe9 damage.\n".encode("latin-1")},
        "file {root}/auto.md: cannot read document: 'utf-8' codec can't decode byte 0xe9",
        counts=None,
    ),
    qa_probe("QA file with a BOM (control: accepted)", "\ufeff" + json.dumps([QA_ROW]), counts=(1, 1, 0)),
    qa_probe("empty QA file (0 bytes)", b"", "the file is empty; expected a JSON list of QA objects", counts=None),
    qa_probe(
        "UTF-16 QA file", json.dumps([QA_ROW]).encode("utf-16"), "cannot read context-QA file: 'utf-8' codec can't decode", counts=None
    ),
    qa_probe(
        "question is a list",
        json.dumps([QA_ROW, {**QA_ROW, "question": ["What", "is", "covered?"]}]),
        "row 1: 'question' must be a string, got list",
        counts=(2, 1, 1),
    ),
    qa_probe("null row", json.dumps([QA_ROW, None]), "file {root}/qa.json, row 1: expected a JSON object, got NoneType", counts=(2, 1, 1)),
    qa_probe(
        "SQuAD-style object instead of a list",
        json.dumps({"data": [QA_ROW]}),
        "expected a JSON list of QA objects at the top level, got dict",
        counts=None,
    ),
]


# --------------------------------------------------------------------------------------------------
# beir: corpus, queries and qrels lines each add up; a query left with no valid judgement is a reject
# --------------------------------------------------------------------------------------------------

BEIR_CORPUS = [{"_id": "d1", "title": "Paris", "text": "Capital of France."}, {"_id": "d2", "text": "Berlin is in Germany."}]
BEIR_QUERIES = [{"_id": "q1", "text": "capital of france"}, {"_id": "q2", "text": "where is berlin"}, {"_id": "q3", "text": "never judged"}]
BEIR_HEADER = "query-id\tcorpus-id\tscore"


def _beir(qrels: list[str], corpus: list[object] | None = None, queries: list[object] | None = None) -> Callable[[Path], Outcome]:
    """A BEIR folder loaded through its adapter (cases and corpus), as the ingest assets load it."""

    def build(root: Path) -> Outcome:
        folder = root / "toy"
        _write(folder / "corpus.jsonl", "".join(json.dumps(r) + "\n" for r in (BEIR_CORPUS if corpus is None else corpus)))
        _write(folder / "queries.jsonl", "".join(json.dumps(r) + "\n" for r in (BEIR_QUERIES if queries is None else queries)))
        _write(folder / "qrels" / "test.tsv", "".join(line + "\n" for line in qrels))
        config = DatasetConfig(name="b", kind="beir", beir={"path": str(folder)})

        def load() -> Outcome:
            adapter = adapter_for(config)
            cases, built = adapter.load_cases(config), adapter.build_corpus(config)
            assert len(cases.cases) + len(cases.rejects) == cases.total  # what raw_cases asserts
            r = cases.report
            counts = {
                "corpus lines": (r["corpus_lines"], len(built.documents), len(built.rejects)),
                "queries": (r["split_queries_read"], r["cases"], r["split_queries_rejected"]),
                "qrels lines": (r["qrels_lines"], r["qrels_kept"], r["qrels_rejected"]),
            }
            return Outcome("\n".join(x.reason for x in [*built.rejects, *cases.rejects]), counts)

        return _refused(load)

    return build


def beir_probe(
    probe_id: str,
    qrels: list[str],
    *expect: str,
    counts: tuple[tuple[int, int, int], ...],
    corpus: list[object] | None = None,
    queries: list[object] | None = None,
) -> Probe:
    units = ("corpus lines", "queries", "qrels lines")
    return Probe("beir", probe_id, _beir(qrels, corpus, queries), expect, dict(zip(units, counts)))


QRELS_OK = ["q1\td1\t2", "q2\td2\t1"]
QUERIES_FILE, QRELS_FILE = "{root}/toy/queries.jsonl", "{root}/toy/qrels/test.tsv"

BEIR_PROBES = [
    beir_probe(
        "grade 1.5 is a query's only judgement",
        [BEIR_HEADER, "q1\td1\t2", "q2\td2\t1.5"],
        f"file {QRELS_FILE}, line 3: non-integer grade: '1.5'",
        f"file {QUERIES_FILE}, line 2: query 'q2' has no valid judgement in {QRELS_FILE}:",
        "its 1 qrels line(s) there were rejected (line 3)",
        counts=((2, 2, 0), (2, 1, 1), (2, 1, 1)),
    ),
    beir_probe(
        "grade 'high' on every line of a query",
        ["q1\td1\t2", "q2\td1\thigh", "q2\td2\thigh"],
        "line 2: non-integer grade: 'high'",
        "line 3: non-integer grade: 'high'",
        "query 'q2' has no valid judgement",
        "its 2 qrels line(s) there were rejected (line 2, 3)",
        counts=((2, 2, 0), (2, 1, 1), (3, 1, 2)),
    ),
    beir_probe(
        "grade 1.5 beside a valid grade (control: query kept)",
        ["q1\td1\t2", "q2\td1\t1.5", "q2\td2\t1"],
        "line 2: non-integer grade: '1.5'",
        counts=((2, 2, 0), (2, 2, 0), (3, 2, 1)),
    ),
    beir_probe(
        "query judged only against a document missing from the corpus",
        ["q1\td1\t2", "q2\td404\t1"],
        "line 2: unknown document: 'd404' is not in corpus.jsonl",
        "query 'q2' has no valid judgement",
        counts=((2, 2, 0), (2, 1, 1), (2, 1, 1)),
    ),
    beir_probe(
        "query judged only against a rejected document",
        ["q1\td1\t2", "q2\td3\t1"],
        "{root}/toy/corpus.jsonl, line 3: document 'd3' has empty 'title' and 'text'",
        "unknown document: 'd3' was rejected in corpus.jsonl (line 3)",
        "query 'q2' has no valid judgement",
        counts=((3, 2, 1), (2, 1, 1), (2, 1, 1)),
        corpus=[*BEIR_CORPUS, {"_id": "d3", "text": " "}],
    ),
    beir_probe(
        "grade 1.0 written as a float",
        ["q1\td1\t1.0", "q2\td2\t1"],
        "line 1: non-integer grade: '1.0'",
        "query 'q1' has no valid judgement",
        counts=((2, 2, 0), (2, 1, 1), (2, 1, 1)),
    ),
    beir_probe("negative TREC grade (control: judged non-relevant)", ["q1\td1\t2", "q2\td2\t-1"], counts=((2, 2, 0), (2, 2, 0), (2, 2, 0))),
    beir_probe("qrels with only a header", [BEIR_HEADER], counts=((2, 2, 0), (0, 0, 0), (0, 0, 0))),
    beir_probe(
        "empty queries.jsonl",
        QRELS_OK,
        "line 1: unknown query: 'q1' is not in queries.jsonl",
        "line 2: unknown query: 'q2'",
        counts=((2, 2, 0), (0, 0, 0), (2, 0, 2)),
        queries=[],
    ),
    beir_probe(
        "query row without text and its judgement",
        QRELS_OK,
        f"file {QUERIES_FILE}, line 2: query 'q2' has empty 'text'",
        "line 2: unknown query: 'q2' was rejected in queries.jsonl (line 2)",
        counts=((2, 2, 0), (2, 1, 1), (2, 1, 1)),
        queries=[BEIR_QUERIES[0], {"_id": "q2", "text": ""}],
    ),
    beir_probe(
        "query id with a tab",
        ["q1\td1\t2"],
        "line 2: '_id' 'q\\t2' contains whitespace",
        counts=((2, 2, 0), (2, 1, 1), (1, 1, 0)),
        queries=[BEIR_QUERIES[0], {"_id": "q\t2", "text": "tab"}],
    ),
    beir_probe(
        "CRLF qrels with a header (control: accepted)",
        [f"{BEIR_HEADER}\r", "q1\td1\t2\r", "q2\td2\t1\r"],
        counts=((2, 2, 0), (2, 2, 0), (2, 2, 0)),
    ),
]


# --------------------------------------------------------------------------------------------------
# fix_file: a fix_error case's solution file is not usable code; the inferer warns and falls back
# --------------------------------------------------------------------------------------------------

FIX_DOCS = [
    Document("pkg.agents.SequentialAgent", "runs agents in order", kind="class", module="pkg.agents"),
    Document("pkg.agents.LoopAgent", "runs an agent repeatedly", kind="class", module="pkg.agents"),
]
FIX_CODE = "from pkg.agents import SequentialAgent\nroot_agent = SequentialAgent()\n"


def _fix_file(content: bytes, *, llm: bool = False) -> Callable[[Path], Outcome]:
    """Infer the target of a fix_error case whose ``fixed`` file holds ``content`` (AST, or LLM reconciled with AST)."""

    def build(root: Path) -> Outcome:
        path = _write(root / "cases" / "fixed.py", content)
        case = Case(
            "fix:probe", "s", "fix_error", str(root / "benchmark.yaml"), 0, "Repeat a step with a `LoopAgent`.", files={"fixed": str(path)}
        )
        lookup = CorpusLookup.from_documents(FIX_DOCS)
        prompts: list[str] = []
        if llm:
            from retrieval_pipeline.core.pairs.llm_targets import LLMTargetInferer
            from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
            from retrieval_pipeline_tests.fakes.openai_server import FakeOpenAIServer

            def reply(messages: list[dict[str, str]]) -> str:
                prompts.append(json.dumps(messages))
                return json.dumps({"primary_class": "LoopAgent", "rationale": "the description says so"})

            with FakeOpenAIServer(reply) as server, LLMClient(LLMSettings(base_url=server.base_url, model=server.model)) as client:
                result = LLMTargetInferer(client, AstTargetInferer()).infer(case, lookup)
        else:
            result = AstTargetInferer().infer(case, lookup)
        used = int(result.evidence.get("source") == "file")
        sent = [f"code sent to the LLM: {any('Solution code' in p for p in prompts)}"] if llm else []
        lines = [*result.warnings, f"target {result.target} by {result.method}", *sent]
        return Outcome("\n".join(lines), {"solution files": (1, used, 1 - used)})

    return build


def fix_probe(probe_id: str, content: bytes, *expect: str, used: bool = False, llm: bool = False) -> Probe:
    return Probe("fix_file", probe_id, _fix_file(content, llm=llm), expect, {"solution files": (1, 1, 0) if used else (1, 0, 1)})


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))

FIX_FILE_PROBES = [
    fix_probe(
        "PNG image as fixed_file",
        PNG,
        "case 'fix:probe': fixed file {root}/cases/fixed.py not read: fixed file holds binary data",
        "target pkg.agents.LoopAgent by description",
    ),
    fix_probe(
        "PNG image as fixed_file, LLM mode",
        PNG,
        "case 'fix:probe': fixed file {root}/cases/fixed.py not read",
        "binary data",
        "target pkg.agents.LoopAgent by",
        "code sent to the LLM: False",
        llm=True,
    ),
    fix_probe(
        "Latin-1 source without a coding line",
        b"# caf\xe9\n" + FIX_CODE.encode(),
        "fixed file {root}/cases/fixed.py not read: fixed file is not utf-8 text (byte 0xe9 at offset 5",
        "target pkg.agents.LoopAgent by description",
    ),
    fix_probe(
        "Latin-1 source with a coding line (control: read)",
        b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIX_CODE.encode(),
        "target pkg.agents.SequentialAgent by ast",
        used=True,
    ),
    fix_probe(
        "UTF-8 source with a BOM (control: read)",
        b"\xef\xbb\xbf" + FIX_CODE.encode(),
        "target pkg.agents.SequentialAgent by ast",
        used=True,
    ),
    fix_probe(
        "UTF-16 source",
        FIX_CODE.encode("utf-16"),
        "fixed file {root}/cases/fixed.py not read",
        "binary data (a NUL byte at offset 3)",
        "target pkg.agents.LoopAgent by description",
    ),
    fix_probe(
        "unknown coding line (coding: klingon)",
        b"# coding: klingon\n" + FIX_CODE.encode(),
        "not read: fixed file has an unusable encoding declaration (unknown encoding",
        "target pkg.agents.LoopAgent by description",
    ),
]


#: The whole catalogue, in table order.
PROBES: list[Probe] = [*REGISTRY_PROBES, *SUITE_PROBES, *NQ_PROBES, *CONTEXT_QA_PROBES, *BEIR_PROBES, *FIX_FILE_PROBES]


def params(kind: str) -> list[object]:
    return [pytest.param(p, id=p.id) for p in PROBES if p.kind == kind]


def test_the_catalogue_is_large_and_its_ids_unique() -> None:
    assert len(PROBES) >= 40 and len({(p.kind, p.id) for p in PROBES}) == len(PROBES)


# One test function per input kind, each the same two lines, on purpose: the kind is in the test's name, so
# `-k nq_probe` runs one kind's probes and a failure says which reader let bad input through.
@pytest.mark.parametrize("probe", params("registry"))
def test_registry_probe(probe: Probe, tmp_path: Path) -> None:
    check_probe(probe, run_probe(probe, tmp_path), tmp_path)


@pytest.mark.parametrize("probe", params("suite"))
def test_suite_probe(probe: Probe, tmp_path: Path) -> None:
    check_probe(probe, run_probe(probe, tmp_path), tmp_path)


@pytest.mark.parametrize("probe", params("nq"))
def test_nq_probe(probe: Probe, tmp_path: Path) -> None:
    check_probe(probe, run_probe(probe, tmp_path), tmp_path)


@pytest.mark.parametrize("probe", params("context_qa"))
def test_context_qa_probe(probe: Probe, tmp_path: Path) -> None:
    check_probe(probe, run_probe(probe, tmp_path), tmp_path)


@pytest.mark.parametrize("probe", params("beir"))
def test_beir_probe(probe: Probe, tmp_path: Path) -> None:
    check_probe(probe, run_probe(probe, tmp_path), tmp_path)


@pytest.mark.parametrize("probe", params("fix_file"))
def test_fix_file_probe(probe: Probe, tmp_path: Path) -> None:
    check_probe(probe, run_probe(probe, tmp_path), tmp_path)


def test_a_bom_md_keeps_its_first_heading(tmp_path: Path) -> None:
    """The BOM control above counts; this checks the chunk: the heading is a heading, not text after a BOM."""
    path = _write(tmp_path / "home.md", "\ufeff" + REAL_MD)
    config = DatasetConfig(name="c", kind="context_qa", context_qa={"qa": str(tmp_path / "qa.json"), "documents": [str(path)]})
    (chunk,) = adapter_for(config).build_corpus(config).documents
    assert chunk.title == "Home policy" and "\ufeff" not in chunk.text


def test_the_bad_threshold_no_longer_reaches_the_pipeline(tmp_path: Path) -> None:
    """The registry keeps the good dataset usable and leaves the bad one out of ``datasets`` (so no check spec is made for it)."""
    entry = "    suites: [s.yaml]\n    corpus: {introspect_modules: [json]}\n"
    text = f"datasets:\n  good:\n{entry}  bad:\n{entry}    thresholds: {{hit_rate@500: {{min: 0.5}}}}\n"
    registry = load_registry(_write(tmp_path / "datasets.yaml", text), root=tmp_path)
    assert list(registry.datasets) == ["good"] and registry.names == ["good", "bad"]
    assert all("hit_rate@500" not in d.thresholds for d in registry.datasets.values())
