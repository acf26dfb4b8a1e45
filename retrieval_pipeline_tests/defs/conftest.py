"""A tiny dataset registered as partition ``stdlib`` (the partition key the project defines), so the real
asset graph runs in-process on small inline suites, the keyword encoder and temporary folders."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.defs.resources import EncoderResource
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

API_SUITE = """
benchmarks:
- id: api_understanding:serialise
  question: How do I turn a Python dict into a JSON string?
  benchmark_type: api_understanding
  answers:
  - answer: dumps
    fully_qualified_class_name: [json.dumps]
- id: api_understanding:parse
  question: Which function parses a JSON document from a string?
  benchmark_type: api_understanding
  answers:
  - answer: loads
    fully_qualified_class_name: [json.loads]
- id: api_understanding:read_rows
  question: How can I read rows of a CSV file as dictionaries keyed by the header?
  benchmark_type: api_understanding
  answers:
  - answer: DictReader
    fully_qualified_class_name: [csv.DictReader]
- id: api_understanding:missing_gold
  question: How do I frobnicate?
  benchmark_type: api_understanding
  answers:
  - answer: frob
    fully_qualified_class_name: [json.frobnicate]
- question: a case without an id
  benchmark_type: api_understanding
  answers:
  - fully_qualified_class_name: [json.dumps]
"""

FIX_SUITE = """
benchmarks:
- id: fix_errors:01_writer
  name: write rows
  benchmark_type: fix_error
  fixed_file: cases/01/fixed.py
  test_file: cases/01/test_case.py
  unfixed_file: cases/01/unfixed.py
  description: Write the rows to a CSV file with a header using a dictionary writer.
"""

FIXED = """
import csv

def write(path, rows):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["a", "b"])
        writer.writeheader()
        writer.writerows(rows)
"""

VOCAB = ["json", "string", "dict", "parse", "csv", "rows", "header", "dictionary", "writer", "reader", "file", "write"]


def write_dataset(root: Path, thresholds: str = "") -> Path:
    (root / "suites" / "cases" / "01").mkdir(parents=True)
    (root / "suites" / "api_understanding.yaml").write_text(API_SUITE)
    (root / "suites" / "fix_errors.yaml").write_text(FIX_SUITE)
    (root / "suites" / "cases" / "01" / "fixed.py").write_text(FIXED)
    registry = root / "datasets.yaml"
    registry.write_text(
        textwrap.dedent(f"""
        root: .
        defaults:
          filter: {{judge: auto, random_contexts: 2}}
          thresholds: {{hit_rate@5: {{min: 0.0, severity: ERROR}}, mrr: {{min: 0.0, severity: WARN}}}}
        datasets:
          stdlib:
            suites: [suites/api_understanding.yaml, suites/fix_errors.yaml]
            corpus: {{introspect_modules: [json, csv]}}
            {thresholds}
    """)
    )
    return registry


@pytest.fixture
def tiny_resources(tmp_path: Path):
    """Resources for the tiny dataset; returns a factory taking extra registry YAML."""

    def make(thresholds: str = "") -> dict[str, object]:
        return resources_in(tmp_path, KeywordEncoderResource(vocabulary=VOCAB), write_dataset(tmp_path / "in", thresholds))

    return make


@pytest.fixture
def real_resources(tmp_path):
    """Every output and cache under ``tmp_path``, with the real encoders (all-MiniLM-L6-v2 and co., offline)."""
    return resources_in(tmp_path, EncoderResource())
