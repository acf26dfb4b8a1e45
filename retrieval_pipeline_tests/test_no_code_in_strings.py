"""No executable Python hides in a string literal of the package: code that runs elsewhere is a real file.

A string (or f-string template) counts when it parses as Python holding a statement, over 3 non-blank lines.
Config text that only looks like annotations (``passwd: files``) and text made of bare names (a template of
placeholders) are not code.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "retrieval_pipeline"
STATEMENTS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.For,
    ast.While,
    ast.If,
    ast.Try,
    ast.With,
)
STATEMENTS += (ast.Assign, ast.AugAssign, ast.Return, ast.Expr)


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # a template: each hole becomes a name
        return "".join(v.value if isinstance(v, ast.Constant) else "_X_" for v in node.values)
    return None


def _code_lines(text: str) -> int:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return 0
    if not any(isinstance(n, STATEMENTS) and not (isinstance(n, ast.Expr) and not isinstance(n.value, ast.Call)) for n in tree.body):
        return 0
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def code_strings(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            text = None if id(node) in docstrings or id(node) in parts else _text(node)
            if text and "\n" in text and (lines := _code_lines(text)) > 3:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {lines} lines")
    return found


def test_the_package_holds_no_python_in_strings():
    assert code_strings(PACKAGE) == []


def test_the_scan_finds_a_templated_script(tmp_path: Path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        'SCRIPT = f"""\nimport json\nfor name in {1}:\n    print(json.dumps(name))\nresult = 1\n"""\n'
        'ETC = "passwd: files\\ngroup: files\\nshadow: files\\nhosts: files\\n"\n'
    )
    assert code_strings(package) == ["pkg/m.py:1: 4 lines"]
