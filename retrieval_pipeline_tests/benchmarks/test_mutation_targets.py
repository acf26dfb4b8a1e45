"""``make mutation``'s targets name files that exist: each mutated module (and each named function in it) and each
test file run against its mutants. Files move (tests into rooms that mirror the code, a module into a package); a
target left behind would mutate nothing or run no test."""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def _defined(path: Path) -> set[str]:
    """``name`` and ``Class.method`` for every function of the module."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{f.name}" for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    return names


def test_every_target_names_modules_functions_and_tests_that_exist(load_benchmark):
    mutation = load_benchmark("mutation.py")
    missing = []
    for target in mutation.TARGETS:
        assert target.scopes and target.tests, target.name
        for scope in target.scopes:
            path = PROJECT / scope.path
            if not path.is_file():
                missing.append(f"{target.name}: module {scope.path}")
                continue
            missing += [f"{target.name}: {scope.path} has no {f}" for f in scope.functions or () if f not in _defined(path)]
        missing += [f"{target.name}: test {t}" for t in target.tests if not (PROJECT / t).is_file()]
    assert missing == []


def test_the_metrics_target_mutates_every_metric_family(load_benchmark):
    mutation = load_benchmark("mutation.py")
    (metrics,) = [t for t in mutation.TARGETS if t.name == "metrics"]
    families = PROJECT / "retrieval_pipeline/core/evaluation/metrics/families"
    modules = {p.relative_to(PROJECT).as_posix() for p in families.rglob("*.py") if p.name != "__init__.py"}
    assert modules and modules <= {s.path for s in metrics.scopes}
