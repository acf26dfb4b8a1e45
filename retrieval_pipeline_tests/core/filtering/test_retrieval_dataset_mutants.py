"""Dataset records and JSONL, against the mutants ``benchmarks/mutation.py`` found alive in
:mod:`retrieval_pipeline.core.filtering.retrieval_dataset`: the qrels of every dataset kind are read back from these records.

What the older tests left open: the whole negative context (its text included), the dataset name that
``build_dataset`` passes on, and the JSONL bytes (UTF-8 whatever the locale, non-ASCII kept as is, values
JSON cannot hold written as text).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.filtering.retrieval_dataset import build_dataset, build_record, qrels_from_records, write_jsonl

DOCS = {d.doc_id: d for d in (Document("g", "gold text"), Document("s", "sibling text"), Document("r", "random text"))}


def test_negatives_carry_their_text():
    record = build_record(
        query_id="q",
        source="ds/suite",
        query="?",
        gold_doc_ids=["g"],
        docs=DOCS,
        sibling_ids=["s"],
        bm25_ids=[],
        random_ids=["r"],
        metadata={},
    )
    assert record["negative_ctxs"] == [
        {"fqn": "s", "text": "sibling text", "is_hard_negative": True, "kind": "sibling"},
        {"fqn": "r", "text": "random text", "is_hard_negative": False, "kind": "random"},
    ]


def _verified() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "query_id": "q1",
                "suite": "beir_mini",
                "benchmark_type": "beir",
                "query": "what?",
                "gold_doc_ids": ["g"],
                "gold_grades": [2],
                "gold_method": "beir:qrels",
                "keep": True,
                "judge": "none",
                "reason": "kept",
                "random_doc_ids": [],
                "sibling_negatives": [],
                "bm25_negatives": [],
            }
        ]
    )


def test_build_dataset_names_the_dataset_in_every_record(tmp_path: Path):
    path = tmp_path / "retrieval_dataset.jsonl"
    build_dataset(_verified(), list(DOCS.values()), "mini", path)
    (record,) = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert record["source"] == "mini/beir_mini" and record["metadata"]["dataset"] == "mini"
    assert qrels_from_records([record]) == {"q1": {"g": 2}}


def test_jsonl_keeps_non_ascii_text_and_writes_other_values_as_text(tmp_path: Path):
    path = tmp_path / "out.jsonl"
    write_jsonl([{"id": "caf\u00e9", "where": Path("/data/x"), "text": "\u6587\u66f8"}], path)
    raw = path.read_bytes()
    assert raw == '{"id": "caf\u00e9", "where": "/data/x", "text": "\u6587\u66f8"}\n'.encode()


_ASCII_LOCALE_SCRIPT = textwrap.dedent(
    """
    import locale, sys
    from pathlib import Path
    from retrieval_pipeline.core.filtering.retrieval_dataset import write_jsonl
    assert locale.getpreferredencoding(False).lower() not in ("utf-8", "utf8"), locale.getpreferredencoding(False)
    print(write_jsonl([{"id": "caf\\u00e9"}], Path(sys.argv[1])))
    """
)


def test_jsonl_is_utf8_whatever_the_locale(tmp_path: Path):
    """In an ASCII (C) locale the records are still written, as UTF-8."""
    path = tmp_path / "out.jsonl"
    assert write_jsonl([{"id": "x"}], tmp_path / "here.jsonl") == 1  # in this process too (mutmut maps tests by what they call)
    env = os.environ | {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the same modules as this process
    done = subprocess.run([sys.executable, "-c", _ASCII_LOCALE_SCRIPT, str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    assert path.read_bytes() == '{"id": "caf\u00e9"}\n'.encode()
