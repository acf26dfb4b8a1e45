"""A cycle of hybrid components refuses only the retrievers in it (and those using them); the others load and run.

Each index asset depends on its components' indexes, so a cycle kept as a spec made the whole asset graph
cyclic: the code location failed to load and every dataset was blocked, although no dataset listed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs

PROJECT = Path(__file__).resolve().parents[3]
CYCLE = """
retrievers:
  bm25: {kind: bm25}
  bm25_code: {kind: bm25, tokenizer: code}
  fused: {kind: hybrid, method: rrf, retrievers: [bm25, bm25_code]}
  loop_a: {kind: hybrid, method: rrf, retrievers: [bm25, loop_b]}
  loop_b: {kind: hybrid, method: rrf, retrievers: [bm25_code, loop_a]}
  uses_loop: {kind: hybrid, method: rrf, retrievers: [bm25, loop_a]}
"""


def test_a_cycle_refuses_its_members_naming_the_file_and_the_cycle(tmp_path: Path) -> None:
    path = tmp_path / "retrievers.yaml"
    path.write_text(CYCLE)
    registry = load_retriever_specs(path)
    assert list(registry.specs) == ["bm25", "bm25_code", "fused"]
    assert registry.closure(["fused"]) == ["bm25", "bm25_code", "fused"]
    assert registry.errors["loop_a"] == "it is its own component, through a cycle: loop_a -> loop_b -> loop_a"
    assert registry.errors["loop_b"] == "it is its own component, through a cycle: loop_b -> loop_a -> loop_b"
    assert "['loop_a'] are refused" in registry.errors["uses_loop"]
    with pytest.raises(RetrieverError, match=rf"^{path}: retriever 'loop_a' is invalid: .*loop_a -> loop_b -> loop_a"):
        registry.get("loop_a")


def test_the_asset_graph_loads_and_the_other_datasets_stay_valid(tmp_path: Path) -> None:
    (tmp_path / "retrievers.yaml").write_text(CYCLE)
    (tmp_path / "datasets.yaml").write_text(
        textwrap.dedent("""
        root: .
        datasets:
          fine:
            suites: [s.yaml]
            corpus: {introspect_modules: [json]}
            retrievers: [bm25, fused]
          loops:
            suites: [s.yaml]
            corpus: {introspect_modules: [json]}
            retrievers: [bm25, loop_a]
        """)
    )
    probe = textwrap.dedent("""
        import json
        from retrieval_pipeline.definitions import defs
        from retrieval_pipeline.defs.partitions import REGISTRY
        d = defs()
        graph = d.resolve_asset_graph()
        job = d.get_repository_def().get_implicit_job_def_for_assets(list(graph.materializable_asset_keys))
        print(json.dumps({"job": job.name, "valid": sorted(REGISTRY.datasets), "errors": REGISTRY.errors}))
    """)
    env = {**os.environ, "RETRIEVAL_PIPELINE_REGISTRY": str(tmp_path / "datasets.yaml")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["job"] == "__ASSET_JOB" and loaded["valid"] == ["fine"]
    error = loaded["errors"]["loops"]
    assert str(tmp_path / "retrievers.yaml") in error and "loop_a -> loop_b -> loop_a" in error
