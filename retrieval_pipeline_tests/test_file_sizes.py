"""A file is one thing, under 500 lines (``docs/architecture.md``, rule 5), and a package holds at most 12 modules at
its top ("Modules at the top of each package"), code and tests alike.

Every module of the package is shorter than :data:`MAX_LINES`, except the few listed in :data:`LONGER`, each of which
says in its module docstring why splitting it would split one thing. The list cannot go stale: each file must still
exist, still be that long, and still say why.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "retrieval_pipeline"
TESTS = Path(__file__).resolve().parent
#: A folder with more modules than this at its top (``*.py`` other than ``__init__.py``, a ``conftest.py`` counted) is
#: to be put into rooms.
MAX_MODULES = 12
#: A module of this many lines or more is too long.
MAX_LINES = 500
#: ``file relative to the package``: the words of its module docstring that say why it is one long file.
LONGER = {
    "core/verifier/sandbox_side/atoms.py": "It is one file, long as it is, because it is appended whole to the prelude",
    "core/datasets/context_qa/similarity.py": "The measure and its fast path are one module",
}


def line_count(path: Path) -> int:
    """Lines of ``path``, as ``wc -l`` counts them for a file that ends with a newline."""
    return len(path.read_text(encoding="utf-8").splitlines())


def too_long(root: Path, allowed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """``"<file>: <n> lines"`` for every ``*.py`` under ``root`` of :data:`MAX_LINES` lines or more, but ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative not in allowed and (lines := line_count(path)) >= MAX_LINES:
            found.append(f"{relative}: {lines} lines")
    return found


def test_every_module_is_under_500_lines_but_the_documented_exceptions() -> None:
    assert too_long(PACKAGE, set(LONGER)) == []


def test_each_exception_is_still_long_and_its_docstring_says_why() -> None:
    for relative, why in LONGER.items():
        path = PACKAGE / relative
        assert path.is_file(), f"{relative} is gone: take it off LONGER (and off rule 5 of docs/architecture.md)"
        assert line_count(path) >= MAX_LINES, f"{relative} fits now: take it off LONGER (and off rule 5 of docs/architecture.md)"
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert why in " ".join(docstring.split()), f"{relative}'s docstring no longer says why it is one long file"


def test_the_scan_counts_lines_at_any_depth_and_honours_the_exceptions(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "room").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * (MAX_LINES - 1))
    (package / "room" / "long.py").write_text("x = 1\n" * MAX_LINES)
    (package / "room" / "known.py").write_text("x = 1\n" * (MAX_LINES + 5))
    assert too_long(package, {"room/known.py"}) == [f"room/long.py: {MAX_LINES} lines"]


def crowded(root: Path) -> list[str]:
    """``"<folder>: <n> modules"`` for every folder under ``root`` with more than :data:`MAX_MODULES` at its top."""
    found = []
    for folder in sorted({root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")}):
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_MODULES:
            found.append(f"{folder.relative_to(root.parent).as_posix()}: {len(modules)} modules")
    return found


def test_no_package_has_more_than_12_modules_at_its_top() -> None:
    assert crowded(PACKAGE) + crowded(TESTS) == []


def test_the_module_count_sees_a_crowded_folder_at_any_depth(tmp_path: Path) -> None:
    room = tmp_path / "pkg" / "room"
    room.mkdir(parents=True)
    for i in range(MAX_MODULES + 1):
        (room / f"m{i}.py").write_text("", encoding="utf-8")
    (room / "__init__.py").write_text("", encoding="utf-8")
    assert crowded(tmp_path / "pkg") == [f"pkg/room: {MAX_MODULES + 1} modules"]
    (room / "m0.py").unlink()
    assert crowded(tmp_path / "pkg") == []
