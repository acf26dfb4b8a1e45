"""Failure buckets: each rule on small hand-made cases, precedence, counts that add up, and bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation import bucket_evidence as ev
from retrieval_pipeline.core.evaluation import buckets as fb
from retrieval_pipeline.core.evaluation.bucket_evidence import Doc
from retrieval_pipeline.core.evaluation.buckets import Miss

PROJECT_ROOT = Path(__file__).resolve().parents[3]

# --- words ------------------------------------------------------------------------------------


def test_content_words_split_identifiers_and_drop_stop_short_and_digit_tokens() -> None:
    assert ev.content_words("How do I copy a file with shutil.copy2?") == ("copy", "file", "shutil", "copy2")
    assert ev.content_words("Use an OrderedDict or max_length") == ("ordered", "dict", "ordereddict", "max", "length")
    assert ev.content_words("os io 256 a1 the which") == ()  # short, digits only, stop words
    assert ev.content_words("get the name, move it, keep it") == ("get", "name", "move", "keep")  # kept on purpose
    assert ev.content_words("file File FILE") == ("file",)  # distinct, first appearance


def test_stop_words_are_scikit_learns_minus_the_kept_words() -> None:
    text = pytest.importorskip("sklearn.feature_extraction.text")
    assert (text.ENGLISH_STOP_WORDS - ev.KEPT_WORDS) <= ev.stop_words()
    assert not ev.KEPT_WORDS & ev.stop_words()
    assert ev.FRAMING_WORDS <= ev.stop_words()


@pytest.mark.parametrize(
    ("word", "other", "expected"),
    [
        ("copy", "copy", True),
        ("copy", "copy2", True),  # same root
        ("sha", "sha256", True),  # same root, below MIN_STEM
        ("copy", "copystat", True),  # prefix of 4, the shorter word whole
        ("permission", "permissions", True),
        ("modification", "modified", True),  # common 'modifi' (6) >= 8 - 2
        ("directory", "directories", True),  # common 'director' (8) >= 9 - 2
        ("file", "filter", False),  # common 'fil' (3) < 4
        ("copy", "copies", False),  # common 'cop' (3)
        ("bit", "bits", False),  # common 'bit' (3) < MIN_STEM
        ("parse", "parameter", False),  # common 'par' (3)
    ],
)
def test_words_match(word: str, other: str, expected: bool) -> None:
    assert ev.words_match(word, other) is expected
    assert ev.words_match(other, word) is expected  # symmetric


@pytest.mark.parametrize(
    ("word", "other", "expected"),
    [
        ("agent", "agents", True),
        ("copy", "copy2", True),
        ("copy", "copystat", False),  # words_match says yes; as names they differ
        ("invocation", "invocationcontext", False),
        ("dumps", "loads", False),
    ],
)
def test_names_match_is_stricter_than_words_match(word: str, other: str, expected: bool) -> None:
    assert ev.names_match(word, other) is expected


def test_vocabulary_index_gives_the_same_answers_as_trying_every_word() -> None:
    """Parity of the stem/root index with brute force over every word, on words built to share prefixes."""
    rng = np.random.default_rng(7)
    letters = np.array(list("abcd12"))
    words = sorted({"".join(rng.choice(letters, size=rng.integers(1, 9))) for _ in range(3000)})
    text_words = frozenset(words[::3])
    vocabulary = ev.Vocabulary(text_words)
    found = [vocabulary.matches(w) for w in words]
    brute = [any(ev.words_match(w, t) for t in text_words) for w in words]
    assert found == brute
    assert 0 < sum(found) < len(words)  # the sample exercises both answers


def test_overlap_keeps_query_order() -> None:
    assert ev.overlap(("bits", "copy", "time"), ev.Vocabulary.of("Copy data and mode bits.")) == ("bits", "copy")


# --- kinship and vagueness --------------------------------------------------------------------

SHUTIL = Doc("shutil", "High-level file operations.", "shutil", "module", "shutil")
COPY = Doc("shutil.copy", "Copy data and mode bits.", "copy", "function", "shutil")
COPY2 = Doc("shutil.copy2", "Copy data and metadata.", "copy2", "function", "shutil")
BASE = Doc("pkg.agents.base_agent.BaseAgent", "Base class for all agents.", "BaseAgent", "class", "pkg.agents.base_agent")
LLM = Doc(
    "pkg.agents.llm_agent.LlmAgent",
    "LLM-based agent.\n- clone(self) [from BaseAgent]",
    "LlmAgent",
    "class",
    "pkg.agents.llm_agent",
    ("pkg.agents.LlmAgent",),
)


@pytest.mark.parametrize(
    ("doc", "gold", "expected"),
    [
        (SHUTIL, COPY2, "parent"),
        (COPY, COPY2, "sibling"),
        (COPY2, SHUTIL, None),  # a member is more specific, not kin
        (BASE, LLM, "base class"),  # cited as [from BaseAgent] in the gold's text
        (LLM, BASE, None),
        (Doc("pkg.agents", kind="module"), LLM, "parent"),  # through the alias pkg.agents.LlmAgent
        (Doc("pkg.agents.SequentialAgent", kind="class"), LLM, "sibling"),  # alias parent pkg.agents
        (Doc("pkg.agents.parallel_agent", kind="module"), LLM, None),  # a module beside a class is no sibling
        (Doc("pkg.agents.llm_agent.LlmAgent.run", kind="method"), LLM, None),
        (Doc("guide#2", kind="chunk", module="guide"), Doc("guide#0", kind="chunk", module="guide"), "same page"),
        (Doc("guide#2", kind="chunk", module="guide"), Doc("faq#0", kind="chunk", module="faq"), None),
        (Doc("p1", kind="passage", title="Python"), Doc("p2", kind="passage", title="Python"), "same page"),
        (Doc("nq_1", kind="passage"), Doc("nq_2", kind="passage"), None),  # no title, no module: no page
        (Doc("shutil", kind="passage", title="shutil"), COPY2, None),  # prose and API objects are never kin
    ],
)
def test_kinship(doc: Doc, gold: Doc, expected: str | None) -> None:
    assert ev.kinship(doc, gold) == expected


def test_specific_words_and_vagueness() -> None:
    assert ev.specific_words(COPY2, SHUTIL) == {"copy2"}
    assert ev.specific_words(COPY2, COPY) == frozenset()  # copy2 and copy are the same name
    assert ev.specific_words(LLM, BASE) == {"llm", "llmagent"}  # 'agent' is the base class's too
    assert not ev.is_vague(("copy", "file"), COPY2, SHUTIL)  # 'copy' names copy2 against the module
    assert ev.is_vague(("copy", "file"), COPY2, COPY)  # nothing could tell copy2 from copy
    assert ev.is_vague(("agents", "class"), LLM, BASE)
    assert not ev.is_vague(("llm", "agents"), LLM, BASE)
    reader = Doc("csv.reader", title="reader", kind="function")
    dict_reader = Doc("csv.DictReader", title="DictReader", kind="class")
    assert ev.specific_words(dict_reader, reader) == {"dict", "dictreader"}
    assert not ev.is_vague(("read", "rows", "dictionaries"), dict_reader, reader)  # 'dictionaries' says 'dict'
    assert ev.is_vague(("read", "rows", "mappings"), dict_reader, reader)


# --- rules on one miss ------------------------------------------------------------------------


def miss(query: str, golds: list[Doc], above: list[Doc], rank: float = 9.0, hard: dict[str, str] | None = None) -> Miss:
    return Miss("r", "q", query, tuple(golds), rank, tuple(enumerate(above, start=1)), hard or {})


def test_vocabulary_mismatch_names_the_query_words_and_the_gold() -> None:
    rmtree = Doc("shutil.rmtree", "Recursively delete a directory tree.")
    found = fb.vocabulary_mismatch(miss("How do I erase a folder and everything inside?", [rmtree], []))
    assert found is not None
    assert found.evidence == "no content word of the query ('erase', 'folder', 'inside') appears in the gold shutil.rmtree's text"
    assert fb.vocabulary_mismatch(miss("delete a folder", [rmtree], [])) is None


def test_vocabulary_mismatch_needs_every_gold_to_miss() -> None:
    golds = [Doc("a.x", "nothing here"), Doc("a.y", "erase the folder")]
    assert fb.vocabulary_mismatch(miss("erase a folder", golds, [])) is None
    found = fb.vocabulary_mismatch(miss("erase a folder", golds[:1] + [Doc("a.z", "other words")], []))
    assert found is not None and "any gold's (a.x, a.z) text" in found.evidence


def test_distractor_is_the_best_ranked_hard_negative_or_kin_with_more_overlap() -> None:
    query = "How do I copy a file and keep its permission bits?"
    gold = Doc("shutil.copy2", "Copy data and metadata. Return the file's destination.", kind="function")
    plain = Doc("os.chmod", "Change the permission bits of a file; copy keep.", kind="function")  # more overlap, not a negative
    equal = Doc("os.stat", "Stat a file; copy.", kind="function")  # a hard negative, overlap 2 = the gold's
    sibling = Doc("shutil.copy", "Copy data and mode bits, the permission bits of the file.", kind="function")
    found = fb.distractor_overlap(miss(query, [gold], [plain, equal, sibling], rank=7, hard={"os.stat": "bm25"}))
    assert found is not None
    assert (found.outranking_doc, found.outranking_rank) == ("shutil.copy", 3)
    assert found.evidence == (
        "shutil.copy (sibling, overlap 4 words: copy, file, permission, bits) ranks 3, above gold shutil.copy2 (overlap 2: copy, file; rank 7)"
    )
    assert fb.distractor_overlap(miss(query, [gold], [plain, equal], hard={"os.stat": "bm25"})) is None


def test_distractor_labels_a_hard_negative_by_its_kind() -> None:
    gold = Doc("time.strptime", "Parse a string to a time tuple.")
    negative = Doc("datetime.fromisoformat", "Parse an ISO timestamp string.")
    found = fb.distractor_overlap(miss("parse an ISO timestamp", [gold], [negative], hard={"datetime.fromisoformat": "bm25"}))
    assert found is not None and found.evidence.startswith(
        "datetime.fromisoformat (bm25 hard negative, overlap 3 words: parse, iso, timestamp)"
    )


def test_specificity_gap_is_the_best_ranked_kin_the_query_cannot_tell_from_the_gold() -> None:
    dumps = Doc("json.dumps", "Serialize a dict to a JSON formatted string.", "dumps", "function", "json")
    parent = Doc("json", "JSON encoder and decoder.", "json", "module", "json")
    other = Doc("os.remove", "Remove a file.", "remove", "function", "os")
    found = fb.specificity_gap(miss("How do I turn a dict into a string?", [dumps], [other, parent], rank=3))
    assert found is not None and (found.outranking_doc, found.outranking_rank) == ("json", 2)
    assert (
        found.evidence
        == "the query says none of the name words specific to gold json.dumps (dumps); its parent json ranks 2, above the gold (rank 3)"
    )
    assert fb.specificity_gap(miss("How do I dump a dict into a string?", [dumps], [other, parent])) is None  # names the gold
    assert fb.specificity_gap(miss("turn a dict into a string", [dumps], [other])) is None  # no kin above


def test_specificity_gap_says_when_the_names_cannot_differ() -> None:
    found = fb.specificity_gap(miss("copy a file", [COPY2], [COPY], rank=math.nan))
    assert found is not None
    assert (
        found.evidence
        == "gold shutil.copy2's name words (copy2) are all its sibling's too; its sibling shutil.copy ranks 1, above the gold (not retrieved)"
    )


def test_precedence_and_also_when_every_rule_applies() -> None:
    gold = Doc("pkg.special_thing", "nothing relevant here", kind="function")
    sibling = Doc("pkg.other_thing", "a generic widget", kind="function")
    row = fb.classify(miss("a generic widget", [gold], [sibling], hard={"pkg.other_thing": "sibling"}))
    assert row["bucket"] == "vocabulary_mismatch"
    assert row["also"] == ["distractor_overlap", "specificity_gap"]
    assert row["outranking_doc"] is None  # the primary finding cites no hit


def test_unexplained_says_what_was_checked() -> None:
    gold = Doc("json.loads", "Parse a JSON document from a string.")
    row = fb.classify(miss("parse a JSON string", [gold], [Doc("os.remove", "Remove a file.")], rank=4))
    assert row["bucket"] == "unexplained" and row["also"] == []
    assert row["evidence"].startswith("query shares 3 content words (parse, json, string) with gold json.loads (rank 4)")
    assert row["evidence"].endswith("best hit above it: os.remove (rank 1, overlap 0)")


# --- frames -----------------------------------------------------------------------------------


def corpus_frame() -> pd.DataFrame:
    docs = [
        ("shutil", "High-level file operations.", "shutil", "module", "shutil"),
        ("shutil.copy", "Copy data and mode bits, the permission bits of the file.", "copy", "function", "shutil"),
        ("shutil.copy2", "Copy data and metadata. Return the file's destination.", "copy2", "function", "shutil"),
        ("shutil.rmtree", "Recursively delete a directory tree.", "rmtree", "function", "shutil"),
        ("json", "JSON encoder and decoder.", "json", "module", "json"),
        ("json.dumps", "Serialize a dict to a JSON formatted string.", "dumps", "function", "json"),
        ("json.loads", "Parse a JSON document from a string into an object.", "loads", "function", "json"),
        ("os.remove", "Remove a file path.", "remove", "function", "os"),
        ("csv.reader", "Return a reader over the rows of a CSV file.", "reader", "function", "csv"),
    ]
    frame = pd.DataFrame(docs, columns=["doc_id", "text", "title", "kind", "module"])
    frame["aliases"] = [[] for _ in docs]
    return frame


def dataset_frame() -> pd.DataFrame:
    texts = dict(zip(corpus_frame()["doc_id"], corpus_frame()["text"]))

    def ctx(fqn: str, **extra) -> dict:
        return {"fqn": fqn, "text": texts[fqn], **extra}

    rows = [
        (
            "q_vocab",
            "How do I erase a folder and everything inside?",
            ["shutil.rmtree"],
            [ctx("os.remove", is_hard_negative=True, kind="bm25")],
        ),
        (
            "q_distractor",
            "How do I copy a file and keep its permission bits?",
            ["shutil.copy2"],
            [ctx("shutil.copy", is_hard_negative=True, kind="sibling")],
        ),
        ("q_spec", "How do I turn a dict into a string?", ["json.dumps"], []),
        ("q_unexpl", "Which function parses a JSON document from a string?", ["json.loads"], []),
        ("q_hit", "How can I read rows of a CSV file?", ["csv.reader"], []),
    ]
    return pd.DataFrame(
        [
            {"id": i, "query": q, "positive_ctxs": [ctx(g, rank_relevance=1) for g in golds], "negative_ctxs": negs, "metadata": "{}"}
            for i, q, golds, negs in rows
        ]
    )


#: (retriever, query_id, first_relevant_rank, top_hits); misses at k=2 counted by hand: r1 4, r2 1, r3 0.
RUNS = [
    ("r1", "q_vocab", 3, ["os.remove", "json.loads", "shutil.rmtree"]),
    ("r1", "q_distractor", 3, ["shutil.copy", "json.dumps", "shutil.copy2"]),
    ("r1", "q_spec", 3, ["json", "json.loads", "json.dumps"]),
    ("r1", "q_unexpl", 3, ["os.remove", "csv.reader", "json.loads"]),
    ("r1", "q_hit", 1, ["csv.reader"]),
    ("r2", "q_vocab", 1, ["shutil.rmtree"]),
    ("r2", "q_distractor", 2, ["shutil.copy", "shutil.copy2"]),
    ("r2", "q_spec", 1, ["json.dumps"]),
    ("r2", "q_unexpl", math.nan, ["os.remove", "shutil"]),
    ("r2", "q_hit", 1, ["csv.reader"]),
    *[("r3", q, 1, ["x"]) for q in ("q_vocab", "q_distractor", "q_spec", "q_unexpl", "q_hit")],
]
HAND_MISSES = {"r1": 4, "r2": 1, "r3": 0}


def results_frame() -> pd.DataFrame:
    return pd.DataFrame(RUNS, columns=["retriever", "query_id", "first_relevant_rank", "top_hits"])


def buckets(k: int = 2) -> pd.DataFrame:
    return fb.failure_buckets(results_frame(), dataset_frame(), corpus_frame(), k=k, dataset="toy")


def test_one_row_per_miss_with_the_bucket_each_rule_gives() -> None:
    frame = buckets()
    assert list(frame.columns) == list(fb.COLUMNS)
    got = {(r.retriever, r.query_id): r.bucket for r in frame.itertuples()}
    assert got == {
        ("r1", "q_vocab"): "vocabulary_mismatch",
        ("r1", "q_distractor"): "distractor_overlap",
        ("r1", "q_spec"): "specificity_gap",
        ("r1", "q_unexpl"): "unexplained",
        ("r2", "q_unexpl"): "unexplained",
    }
    rows = frame.set_index(["retriever", "query_id"])
    distractor = rows.loc[("r1", "q_distractor")]
    assert (distractor["gold"], distractor["gold_rank"], distractor["outranking_doc"], distractor["outranking_rank"]) == (
        "shutil.copy2",
        3.0,
        "shutil.copy",
        1,
    )
    assert list(distractor["also"]) == ["specificity_gap"]  # copy2 and copy: the names cannot differ
    assert "overlap 4 words: copy, file, permission, bits" in distractor["evidence"]
    assert rows.loc[("r1", "q_spec"), "outranking_doc"] == "json"
    not_retrieved = rows.loc[("r2", "q_unexpl")]
    assert math.isnan(not_retrieved["gold_rank"]) and "(not retrieved)" in not_retrieved["evidence"]


def test_bucket_counts_add_up_to_the_misses_per_retriever() -> None:
    frame = buckets()
    counts = fb.bucket_counts(frame, fb.queries_per_retriever(results_frame())).set_index("retriever")
    assert list(counts.index) == ["r1", "r2", "r3"]  # every retriever, a clean one too
    assert counts["misses"].to_dict() == HAND_MISSES
    assert (counts[list(fb.BUCKETS)].sum(axis=1) == counts["misses"]).all()
    assert counts["queries"].to_dict() == {"r1": 5, "r2": 5, "r3": 5}
    assert counts.loc["r1", list(fb.BUCKETS)].tolist() == [1, 1, 1, 1]


def test_a_larger_k_misses_fewer_queries() -> None:
    assert len(buckets(k=3)) == 1  # only r2's unretrieved gold is still missed
    assert len(buckets(k=1)) == 6  # r2's gold at rank 2 is now missed too


def test_no_miss_gives_a_row_of_zeros_and_no_examples() -> None:
    frame = buckets(k=10).iloc[:0]
    counts = fb.bucket_counts(frame, {"r1": 5, "r2": 5})
    assert counts[["queries", "misses", *fb.BUCKETS]].to_numpy().tolist() == [[5, 0, 0, 0, 0, 0]] * 2
    meta = fb.failure_metadata(frame, counts, k=10)
    assert (meta["misses"], meta["miss_rate"], meta["examples"]) == (0, 0.0, "_none_")


def test_bucket_counts_refuse_an_unknown_retriever() -> None:
    with pytest.raises(ValueError, match="r1"):
        fb.bucket_counts(buckets(), {"r2": 5})


def test_failure_metadata_has_one_table_and_headline_counts() -> None:
    frame = buckets()
    counts = fb.bucket_counts(frame, fb.queries_per_retriever(results_frame()))
    meta = fb.failure_metadata(frame, counts, k=2)
    assert meta["misses"] == 5 and sum(meta[f"misses/{b}"] for b in fb.BUCKETS) == 5
    assert meta["miss_rate"] == round(5 / 15, 3)
    table = str(meta["bucket_counts"]).splitlines()
    assert table[0].split("|")[1].strip() == "retriever" and len(table) == 2 + 3  # header, rule, one line per retriever
    assert "shutil.copy (sibling" in meta["examples"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r, d, c: (r.drop(columns="top_hits"), d, c), "query_results/toy"),
        (lambda r, d, c: (r, d.drop(columns="negative_ctxs"), c), "retrieval_dataset lacks columns"),
        (lambda r, d, c: (r, d, c.drop(columns="aliases")), "corpus lacks columns"),
        (lambda r, d, c: (r.replace({"query_id": {"q_vocab": "q_gone"}}), d, c), "case 'q_gone'"),
        (lambda r, d, c: (r.assign(top_hits=[["nowhere"]] * len(r)), d, c), "top hit 'nowhere'"),
        (lambda r, d, c: (r, d.assign(positive_ctxs=[[]] * len(d)), c), "without positive_ctxs"),
    ],
)
def test_bad_input_names_the_frame_dataset_and_case(change, message: str) -> None:
    results, dataset, corpus = change(results_frame(), dataset_frame(), corpus_frame())
    with pytest.raises(InputError, match=message):
        fb.failure_buckets(results, dataset, corpus, k=2, dataset="toy")


def test_k_must_be_positive() -> None:
    with pytest.raises(InputError, match="k must be a positive integer"):
        buckets(k=0)


@pytest.mark.integration
@pytest.mark.parametrize("dataset", ["stdlib", "python_nq", "adk_v1_24_1"])
def test_real_runs_counts_add_up_to_one_minus_hit_rate(dataset: str) -> None:
    out = PROJECT_ROOT / "data" / "out"
    paths = [out / name / f"{dataset}.parquet" for name in ("query_results", "retrieval_dataset", "corpus")]
    if not all(p.exists() for p in paths):
        pytest.skip(f"no materialised {dataset} run under {out} (materialise query_results for it first)")
    results, data, corpus = (pd.read_parquet(p) for p in paths)
    frame = fb.failure_buckets(results, data, corpus, k=5, dataset=dataset)
    counts = fb.bucket_counts(frame, fb.queries_per_retriever(results)).set_index("retriever")
    expected = results.groupby("retriever")["hit_rate@5"].apply(lambda s: int((s == 0).sum()))  # the evaluation's own misses
    assert counts["misses"].to_dict() == expected.to_dict()
    assert (counts[list(fb.BUCKETS)].sum(axis=1) == counts["misses"]).all()
    assert frame["evidence"].str.len().gt(20).all()
