"""The exported ``qrels.txt`` against the source, read by code that shares nothing with the writer.

Each test materialises a dataset up to ``evaluation_exports`` (BM25 only, so it is quick), reads the
exported TREC qrels with :func:`~retrieval_pipeline_tests.defs.independent.read_qrels_txt` (pandas; parity
with pytrec_eval proven below) and compares them with the *source*, read here too:

* BEIR: the source ``qrels/<split>.tsv``, grades included (a fake folder; the real MS MARCO subset);
* suites: the gold FQNs of the suite YAML (read with ``yaml``) and, for fix_error cases, targets
  checked by hand against the solution files;
* NQ: every question's gold chunk holds its own long answer from the CSV (read with pandas), and
  questions share a chunk exactly when their long answers are the same text; hand-checked rows named;
* context QA: hand-checked rows whose relevant chunks were read and compared by hand, cross-checked
  with difflib (the reference library) under a normalisation written here.

None of these imports ``core.trec``, ``core.scoring`` or ``core.filtering.retrieval_dataset``. Reversing the grades
in the BEIR pairing (``beir_pair``) fails ``test_fake_beir_export_equals_the_source_qrels_grades_included``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from difflib import SequenceMatcher
from pathlib import Path

import pandas as pd
import pytest
import yaml

from retrieval_pipeline_tests.defs.independent import (
    Exported,
    QrelsDict,
    export_dataset,
    fold,
    positives,
    read_beir_qrels,
    read_qrels_txt,
    relevant,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SAMPLES = PROJECT_ROOT / "data" / "samples"


# --------------------------------------------------------------------------------------------------
# The reader itself


def test_the_reader_agrees_with_pytrec_eval_and_refuses_what_trec_cannot_hold(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\nq1 0 d2 3\nq2 0 d1 0\nq-3 0 doc.x/y -1\n", encoding="utf-8")
    expected = {"q1": {"d1": 1, "d2": 3}, "q2": {"d1": 0}, "q-3": {"doc.x/y": -1}}
    assert read_qrels_txt(path) == expected
    with path.open(encoding="utf-8") as handle:
        assert pytrec_eval.parse_qrel(handle) == expected
    path.write_text("q1 0 d1 1\n\n  \nq1 0 d2 3\n", encoding="utf-8")  # blank lines are skipped (pytrec_eval refuses them)
    assert read_qrels_txt(path) == {"q1": {"d1": 1, "d2": 3}}
    for bad, message in [
        ("q1 0 d1\n", "4 fields"),
        ("q1 1 d1 1\n", "iteration"),
        ("q1 0 d1 1.5\n", "integer"),
        ("q 0 d 1\nq 0 d 2\n", "twice"),
    ]:
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(AssertionError, match=message):
            read_qrels_txt(path)


def assert_parity_with_pytrec_eval(path: Path) -> QrelsDict:
    """The export read here and by pytrec_eval gives the same qrels; returns them."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ours = read_qrels_txt(path)
    with path.open(encoding="utf-8") as handle:
        assert pytrec_eval.parse_qrel(handle) == ours
    return ours


# --------------------------------------------------------------------------------------------------
# BEIR: the source TSV, grades included

FAKE_CORPUS = [
    ("d1", "Zen of Python", "Beautiful is better than ugly."),
    ("d2", "PEP 8", "Style guide for Python code."),
    ("d3", "Timsort", "A hybrid stable sorting algorithm."),
    ("d4", "CPython", "The reference implementation of Python."),
    ("d5", "PyPy", "A fast Python implementation with a JIT."),
    ("d6", "pip", "The package installer for Python."),
]
FAKE_QUERIES = [("q1", "python style guide"), ("q2", "python implementations"), ("q3", "sorting"), ("q4", "not in the split")]
#: With a header line, as standard BEIR has. By hand: q1 keeps d2 (3) and d1 (1), d3 is judged non-relevant
#: (0) and d9 is not in the corpus (the line is rejected); q2 keeps d4 (2) and d5 (1); q3 has only a grade-0
#: judgement, so no relevant document: it is unresolved, dropped, and absent from the export; q4 is not judged.
FAKE_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t3\nq1\td3\t0\nq2\td4\t2\nq2\td5\t1\nq3\td3\t0\nq1\td9\t2\n"
FAKE_EXPECTED = {"q1": {"d1": 1, "d2": 3}, "q2": {"d4": 2, "d5": 1}}


def fake_beir(folder: Path) -> Path:
    """A BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv (see :data:`FAKE_QRELS`)."""
    (folder / "qrels").mkdir(parents=True)
    corpus = "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in FAKE_CORPUS)
    (folder / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in FAKE_QUERIES), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(FAKE_QRELS, encoding="utf-8")
    return folder


def beir_expected(folder: Path, split: str = "test") -> QrelsDict:
    """The source qrels with grade >= 1 whose document is in ``corpus.jsonl`` (read here with pandas)."""
    known = set(pd.read_json(folder / "corpus.jsonl", lines=True, dtype={"_id": str})["_id"])
    source = read_beir_qrels(folder / "qrels" / f"{split}.tsv")
    return relevant(source[source["doc_id"].isin(known)])


def assert_beir_export_matches(exported: Exported, expected: QrelsDict) -> None:
    """qrels.txt and the JSONL's positives both hold exactly ``expected``, grades included."""
    assert assert_parity_with_pytrec_eval(exported.export("qrels.txt")) == expected
    # split on "\n" only: JSON strings may hold U+2028 and other characters str.splitlines() breaks at
    lines = [line for line in exported.export("retrieval_dataset.jsonl").read_text(encoding="utf-8").split("\n") if line]
    records = pd.DataFrame([json.loads(line) for line in lines])
    assert positives(records) == expected


def test_fake_beir_export_equals_the_source_qrels_grades_included(tmp_path: Path) -> None:
    folder = fake_beir(tmp_path / "beir" / "fake")
    exported = export_dataset(tmp_path, "beir_msmarco", {"kind": "beir", "beir": {"path": str(folder)}, "filter": {"judge": "none"}})
    assert beir_expected(folder) == FAKE_EXPECTED  # the pandas reading of the TSV agrees with the hand derivation
    assert_beir_export_matches(exported, FAKE_EXPECTED)


@pytest.mark.integration
def test_real_beir_export_equals_the_source_qrels_grades_included(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "beir" / "msmarco"
    exported = export_dataset(tmp_path, "beir_msmarco", {"kind": "beir", "beir": {"path": str(folder)}, "filter": {"judge": "none"}})
    expected = beir_expected(folder)
    # the file (counted with wc and cut): 4,102 judgements of 43 of the 50 queries, grades 1..3, every document in the corpus
    assert (len(expected), sum(map(len, expected.values()))) == (43, 4102)
    assert {g for docs in expected.values() for g in docs.values()} == {1, 2, 3}
    assert_beir_export_matches(exported, expected)


# --------------------------------------------------------------------------------------------------
# Suites: the gold FQNs of the YAML; fix_error targets by hand

#: fix_error targets checked by hand against each case's ``fixed.py`` (and its description):
#: 01 counts words with ``Counter(...)`` imported from collections; 05 writes with ``csv.DictWriter(...)``;
#: 06 guards the total with ``threading.Lock()``; 10 hashes with ``hashlib.sha256()``.
FIX_TARGETS = {
    "fix_errors:01_word_frequency": {"collections.Counter": 1},
    "fix_errors:05_csv_report": {"csv.DictWriter": 1},
    "fix_errors:06_thread_safe_counter": {"threading.Lock": 1},
    "fix_errors:10_file_checksum": {"hashlib.sha256": 1},
}


def yaml_golds(path: Path) -> QrelsDict:
    """Every api_understanding case's gold FQNs (all of ``answers[].fully_qualified_class_name``, a list), grade 1."""
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))["benchmarks"]
    api = [c for c in cases if c.get("benchmark_type") == "api_understanding"]
    return {c["id"]: {fqn: 1 for answer in c["answers"] for fqn in answer["fully_qualified_class_name"]} for c in api}


def test_suite_export_equals_the_gold_fqns_of_the_yaml_and_the_hand_checked_targets(tmp_path: Path) -> None:
    stdlib = SAMPLES / "stdlib"
    entry = {
        "kind": "suite",
        "suites": [str(stdlib / f) for f in ("api_understanding.yaml", "fix_errors.yaml", "multiple_choice.yaml")],
        "corpus": {"introspect_modules_file": str(stdlib / "corpus_modules.txt")},
    }
    exported = export_dataset(tmp_path, "stdlib", entry)
    qrels = assert_parity_with_pytrec_eval(exported.export("qrels.txt"))
    verified = exported.value("verified_pairs")
    kept = set(verified.loc[verified["keep"], "query_id"])
    assert set(qrels) == kept  # a query is exported exactly when the filter kept its pair
    api = yaml_golds(stdlib / "api_understanding.yaml")
    assert len(api) == 79  # the sample's README
    # the sample's FQNs are written against its own corpus, so each one is a gold as written
    assert {q: docs for q, docs in qrels.items() if q.startswith("api_understanding:")} == {q: g for q, g in api.items() if q in kept}
    assert {q: qrels[q] for q in FIX_TARGETS if q in kept} == {q: g for q, g in FIX_TARGETS.items() if q in kept}
    assert len(kept & set(FIX_TARGETS)) >= 3 and sum(q.startswith("api_understanding:") for q in kept) >= 60  # the check is not vacuous


# --------------------------------------------------------------------------------------------------
# NQ: each question's gold chunk is its own long answer

#: Rows checked by hand (0-based data row, i.e. the number in ``nq_q<row>``) of ``data/samples/nq/nq_sample.csv``:
#: 8 and 22 give the same Guido van Rossum / BDFL paragraph, byte for byte; 13, 29 and 49 the same "PEP 20,
#: The Zen of Python" paragraph, 49 with a line break where 13 and 29 have a space (whitespace is folded, so
#: still one passage); 0 (who created Python) has a paragraph no other row has.
SAMPLE_SHARED = [(8, 22), (13, 29, 49)]
SAMPLE_ALONE = [0]
#: The same for the real ``natural_questions_sample.csv``: 180, 924 and 1080 are the First Battle of Bull Run
#: paragraph, 924 without the trailing newline of the other two; 432 and 1227 the World Teachers' Day
#: paragraph, 432 with a no-break space (U+00A0) where 1227 has a space; 0 (the Deadpool release) is alone.
REAL_SHARED = [(180, 924, 1080), (432, 1227)]
REAL_ALONE = [0]


def nq_id(row: int) -> str:
    """The documented question id of a 0-based data row (``nq_q000042``)."""
    return f"nq_q{row:06d}"


def assert_nq_export_matches(exported: Exported, csv_path: Path, shared: list[tuple[int, ...]], alone: list[int]) -> None:
    """Every CSV row's question has one gold, grade 1, whose text is its own long answer (whitespace folded);
    two questions share a gold exactly when their long answers fold to the same text."""
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    qrels = assert_parity_with_pytrec_eval(exported.export("qrels.txt"))
    texts = dict(zip(exported.value("corpus")["doc_id"], exported.value("corpus")["text"]))
    assert set(qrels) == {nq_id(i) for i in range(len(rows))}  # judge none, no rejected row: every question
    gold = {}
    for i, long_answer in enumerate(rows["long_answer"]):
        ((doc, grade),) = qrels[nq_id(i)].items()
        assert grade == 1 and fold(texts[doc]) == fold(long_answer), f"row {i}: gold {doc} is not its long answer"
        gold[i] = doc
    passages = rows["long_answer"].map(fold)
    assert len(set(gold.values())) == passages.nunique()  # one chunk per distinct long answer, no more
    for group in shared:
        assert len({gold[i] for i in group}) == 1, group
    for i in alone:
        assert [j for j in gold if gold[j] == gold[i]] == [i]
    questions = dict(zip(exported.value("retrieval_dataset")["id"], exported.value("retrieval_dataset")["query"]))
    assert all(questions[nq_id(i)] == q.strip() for i, q in enumerate(rows["question"]))


def test_nq_sample_export_gives_each_question_its_own_long_answer(tmp_path: Path) -> None:
    csv_path = SAMPLES / "nq" / "nq_sample.csv"
    exported = export_dataset(tmp_path, "python_nq", {"kind": "nq", "nq": {"csv": str(csv_path)}, "filter": {"judge": "none"}})
    assert_nq_export_matches(exported, csv_path, SAMPLE_SHARED, SAMPLE_ALONE)


@pytest.mark.integration
def test_real_nq_export_gives_each_question_its_own_long_answer(shared_data: Path, tmp_path: Path) -> None:
    csv_path = shared_data / "nq" / "natural_questions_sample.csv"
    exported = export_dataset(tmp_path, "nq", {"kind": "nq", "nq": {"csv": str(csv_path)}, "filter": {"judge": "none"}})
    assert_nq_export_matches(exported, csv_path, REAL_SHARED, REAL_ALONE)


# --------------------------------------------------------------------------------------------------
# Context QA: relevance on hand-checked rows

#: Rows of ``data/samples/context_qa/qa_pairs.json`` (case id ``qa_<row>``) checked by hand over the chunks of
#: five language-reference topics (a smaller corpus than the sample's ``["*"]``, so the test is quick; chunking
#: is per topic, so these chunks are the same as in the full corpus). Each expected context was read against
#: every chunk of its topic: it is the whole text of the named chunk (``with#0``), or a run of sentences inside
#: it (markup and case aside) that is more than a third of its length (``assert#2``, ``global#0``, ``lambda#0``,
#: ``lambda#1``, ``raise#0``), which bounds difflib's ratio at 0.5 or more; the neighbouring chunks hold only a
#: sentence or two of it. The topics' other chunks are about other parts of the statement.
SAMPLE_TOPICS = ["assert", "with", "lambda", "global", "raise"]
SAMPLE_HAND_CHECKED = {
    "qa_0001": {"assert#2": 1},  # __debug__ and -O: the last sentences of the assert topic
    "qa_0007": {"with#0": 1},  # what the with statement is for: with#0 word for word
    "qa_0011": {"lambda#0": 1},  # lambda creates anonymous functions
    "qa_0012": {"lambda#1": 1},  # lambdas cannot contain statements or annotations
    "qa_0014": {"global#0": 1},  # the global statement's first paragraph (global#0 adds the grammar line)
    "qa_0018": {"raise#0": 1},  # a bare raise re-raises the active exception
}

#: Rows of the real ``insurance/filtered_qa_pairs.json`` checked by hand against ``auto.md`` / ``home.md``:
INSURANCE_HAND_CHECKED = {
    "qa_0010": {"home#29": 1},  # the claims-adjudication paragraph, word for word
    "qa_0020": {"auto#6": 1},  # "non-transferable": the second paragraph of auto#6 (265 of its 362 characters)
    "qa_0053": {"auto#33": 1},  # the auto policy's 24-hour notification clause, word for word
    # the home policy's notification clause, word for word in home#26; the auto policy states the same
    # clause reworded ("The Insured must notify the Insurer of any ... of occurrence"), so auto#33 is relevant too
    "qa_0007": {"home#26": 1, "auto#33": 1},
}
#: Rows whose context is parser junk (the data README's quirk): once cleaned, a bare list of three or four cover
#: names (70 to 106 characters). In the policies each name heads its own paragraph, one or two names per chunk of
#: 278 to 381 characters, so no chunk holds the list; checked by hand, then by difflib: no chunk reaches 0.5, the
#: row is unresolved and absent from the export.
INSURANCE_JUNK = ["qa_0003", "qa_0004", "qa_0033"]

_JUNK = re.compile(r"\[?<RawText children='([^']*)'>\]?")
_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-"})


def comparable(text: str) -> str:
    """Parser junk replaced by its text, markdown markers dropped, quotes ASCII, case and whitespace folded."""
    text = _JUNK.sub(r"\1", text)
    text = re.sub(r"\*+|`+", "", text)
    text = re.sub(r"^\s*(#{1,6}|[-*+])\s+", "", text, flags=re.MULTILINE)
    return fold(text.translate(_QUOTES).casefold())


def difflib_relevant(context: str, chunks: Mapping[str, str], threshold: float = 0.5) -> dict[str, int]:
    """The chunks whose difflib ratio to ``context`` reaches the threshold (autojunk off), grade 1."""
    wanted = comparable(context)
    ratio = {d: SequenceMatcher(None, wanted, comparable(t), autojunk=False).ratio() for d, t in chunks.items()}
    return {d: 1 for d, r in ratio.items() if r >= threshold}


def assert_context_rows(exported: Exported, qa_path: Path, hand_checked: Mapping[str, Mapping[str, int]], absent: list[str]) -> None:
    """The hand-checked rows' exported golds are exactly the hand-derived chunks, which difflib confirms."""
    qrels = assert_parity_with_pytrec_eval(exported.export("qrels.txt"))
    rows = json.loads(qa_path.read_text(encoding="utf-8"))
    chunks = dict(zip(exported.value("corpus")["doc_id"], exported.value("corpus")["text"]))
    for query_id, expected in hand_checked.items():
        assert qrels.get(query_id) == expected, query_id
        assert difflib_relevant(rows[int(query_id[3:])]["context"], chunks) == expected, query_id
    for query_id in absent:
        assert query_id not in qrels and difflib_relevant(rows[int(query_id[3:])]["context"], chunks) == {}, query_id
    assert {g for docs in qrels.values() for g in docs.values()} == {1}


def test_context_qa_sample_export_on_hand_checked_rows(tmp_path: Path) -> None:
    qa_path = SAMPLES / "context_qa" / "qa_pairs.json"
    entry = {"kind": "context_qa", "context_qa": {"qa": str(qa_path), "pydoc_topics": SAMPLE_TOPICS}, "filter": {"judge": "none"}}
    exported = export_dataset(tmp_path, "python_reference_qa", entry)
    assert_context_rows(exported, qa_path, SAMPLE_HAND_CHECKED, [])


@pytest.mark.integration
def test_real_insurance_export_on_hand_checked_rows(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "insurance"
    source = {"qa": str(folder / "filtered_qa_pairs.json"), "documents": [str(folder / "documents" / f) for f in ("auto.md", "home.md")]}
    exported = export_dataset(tmp_path, "insurance", {"kind": "context_qa", "context_qa": source, "filter": {"judge": "none"}})
    assert_context_rows(exported, folder / "filtered_qa_pairs.json", INSURANCE_HAND_CHECKED, INSURANCE_JUNK)
