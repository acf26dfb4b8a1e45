"""No project module is imported inside a function, except the documented lazy imports listed here.

Dagster imports the definitions often, so what loads torch or a network client is imported on first use; every
such import is named below with its reason. Anything else belongs at the top of its module, where the import
rules (``.importlinter``) see it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "retrieval_pipeline"
#: ``(file relative to the package, imported module)``: why it is imported inside a function.
LAZY = {
    ("__init__.py", "retrieval_pipeline"): "`import retrieval_pipeline` stays light: the API loads on first attribute use",
    ("__init__.py", "retrieval_pipeline.core.evaluation.metrics.names"): "the same, for parse_metric",
    ("cli/evaluate_csv.py", "retrieval_pipeline.core.retrieval.models.encoders"): "keyword search never loads torch",
    ("cli/make_targets.py", "retrieval_pipeline.cli.run"): "refused make variables are one line before the definitions load",
    (
        "core/evaluation/statistics/stats.py",
        "retrieval_pipeline.core.evaluation.statistics.kernels",
    ): "Numba loads only for large randomisation tests",
    ("core/evaluation/metrics/judging.py", "retrieval_pipeline.core.evaluation.metrics.kernels"): "Numba loads only for large runs",
    (
        "core/retrieval/engines/bm25/okapi_bm25.py",
        "retrieval_pipeline.core.retrieval.engines.bm25.bm25_kernels",
    ): "Numba loads only for indexes of a million postings or more",
    ("core/retrieval/engines/embedding_server.py", "retrieval_pipeline.core.services.llm.transport"): "httpx only with the openai client",
}


def function_imports(root: Path) -> set[tuple[str, str]]:
    found = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                modules = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
                modules += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                found |= {(path.relative_to(root).as_posix(), m) for m in modules if m.split(".")[0] == root.name}
    return found


def test_project_imports_inside_functions_are_only_the_documented_lazy_ones():
    assert function_imports(PACKAGE) - set(LAZY) == set()


def test_the_scan_sees_an_import_inside_a_function(tmp_path: Path):
    package = tmp_path / "retrieval_pipeline"
    package.mkdir()
    (package / "m.py").write_text("import os\n\n\ndef f():\n    from retrieval_pipeline.core import types\n    return types, os\n")
    assert function_imports(package) == {("m.py", "retrieval_pipeline.core")}


#: Libraries that loading the definitions must not import: each costs 0.6 to 2 s in every Dagster process (the
#: webserver, the daemon, each code server and each step of a multiprocess run), and only some steps use them.
HEAVY_AT_LOAD = ("openai", "scipy.stats", "sklearn", "matplotlib", "torch", "sentence_transformers", "onnxruntime")


def test_loading_the_definitions_leaves_the_heavy_libraries_to_their_first_use(project_root: Path) -> None:
    code = (
        "import sys\nfrom retrieval_pipeline.definitions import defs\ndefs()\n"
        f"print(' '.join(m for m in {HEAVY_AT_LOAD!r} if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=project_root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == []
