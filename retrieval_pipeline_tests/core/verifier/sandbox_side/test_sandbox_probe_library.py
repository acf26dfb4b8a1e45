"""``sandbox_side/probe_library.py`` imported on its own in the host interpreter (no sandbox)."""

from __future__ import annotations

import ast
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pluggy  # an installed distribution small enough to probe: pytest's own
import pytest

from retrieval_pipeline.core.verifier.proofs import library_index
from retrieval_pipeline.core.verifier.sandbox_side import probe_library, source

#: A small package: a re-export, an alias of a module, a module whose import fails, one defined only in source.
FAKE = {
    "probefake_xyz/__init__.py": "from probefake_xyz.core import Engine\nimport json as codec\n",
    "probefake_xyz/core.py": "class Engine:\n    pass\n\n\ndef start():\n    return Engine()\n",
    "probefake_xyz/broken.py": "import no_such_dependency_xyz\n\n\nclass Hidden:\n    pass\n",
    "probefake_xyz/notes.py": "TEXT = 'Mentioned only in a string, like Widget'\n",
    "probefake_xyz/__main__.py": "raise SystemExit('never imported')\n",
    "probefake_xyz/data.txt": "not python\n",
}


class FakeDistribution:
    """What :func:`probe_library.installed_roots` reads of a distribution: its files and ``top_level.txt``."""

    def __init__(self, files: list[str], top_level: str | None = None) -> None:
        self.files = files
        self.top_level = top_level

    def read_text(self, name: str) -> str | None:
        return self.top_level if name == "top_level.txt" else None


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, text in FAKE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():  # the probe ignores warnings process-wide
        yield tmp_path
    for module in [m for m in sys.modules if m.split(".")[0] == "probefake_xyz"]:
        del sys.modules[module]


def request(import_name: str | None = "probefake_xyz", distribution: str | None = None, cpu: float = 60.0) -> dict[str, object]:
    return {"distribution": distribution, "import_name": import_name, "cpu_budget_s": cpu, "wall_budget_s": 600.0}


def test_the_script_run_is_this_file() -> None:
    assert source(library_index.PROBE_FILE) == Path(probe_library.__file__).read_text(encoding="utf-8")


def test_module_names_of_files() -> None:
    assert probe_library.module_name(["pkg", "__init__.py"]) == "pkg"
    assert probe_library.module_name(["pkg", "sub", "mod.py"]) == "pkg.sub.mod"
    assert probe_library.module_name(["pkg", "data.txt"]) is None
    assert probe_library.module_name(["my-pkg", "mod.py"]) is None  # not an identifier: not importable


def test_installed_roots_from_record_else_top_level() -> None:
    record = FakeDistribution(
        ["google/adk/__init__.py", "google/adk/agents/__init__.py", "google/adk/x.py", "google_adk-1.0.dist-info/RECORD", "../../bin/adk"]
    )
    assert probe_library.installed_roots(record) == (["google.adk"], "RECORD")  # google/ has no __init__.py: a namespace
    assert probe_library.installed_roots(FakeDistribution(["single.py"])) == (["single"], "RECORD")
    assert probe_library.installed_roots(FakeDistribution([], "pkg\nnot-valid\n")) == (["pkg"], "top_level.txt")


def test_choose_root_takes_the_one_public_root_or_the_one_named_like_the_distribution() -> None:
    assert probe_library.choose_root(["_private", "pkg", "tests"], "whatever") == "pkg"
    assert probe_library.choose_root(["a_b", "c"], "A-B") == "a_b"
    assert probe_library.choose_root(["a", "b"], "c") is None


def test_module_level_defs_reach_into_blocks() -> None:
    tree = ast.parse(
        "try:\n    import x\n    A = 1\nexcept ImportError:\n    def f():\n        inner = 2\nif x:\n    class K: pass\nB: int = 3\n"
    )
    assert sorted(probe_library.module_level_defs(tree)) == ["A", "B", "K", "f"]


def test_probe_indexes_what_it_imported_and_reads_the_source_of_what_it_did_not(fake_package: Path) -> None:
    out = probe_library.probe(request())
    assert out["error"] is None and out["import_name_source"] == "verifier.import_name"
    assert out["modules_found"] == 4  # __main__ is never imported, data.txt is no module
    assert out["modules_imported"] == 3 and list(out["failed"]) == ["probefake_xyz.broken"]
    assert out["failed"]["probefake_xyz.broken"] == "ModuleNotFoundError: No module named 'no_such_dependency_xyz'"
    assert out["names"]["Engine"] == ["probefake_xyz.core.Engine"] and out["module_aliases"]["codec"] == "json"
    assert out["source_defs"]["Hidden"] == "probefake_xyz.broken" and out["source_defs"]["start"] == "probefake_xyz.core"
    assert out["unprobed_mentions"]["Hidden"] == "probefake_xyz.broken" and "Widget" not in out["unprobed_mentions"]  # notes was imported
    assert out["budget_hit"] is None and out["not_reached"] == []


def test_a_spent_budget_leaves_modules_not_reached_but_always_indexes_the_root(fake_package: Path) -> None:
    out = probe_library.probe(request(cpu=-1.0))
    assert out["budget_hit"] == "cpu" and out["modules_imported"] == 1
    assert sorted(out["not_reached"]) == ["probefake_xyz.broken", "probefake_xyz.core", "probefake_xyz.notes"]


def test_settings_that_name_nothing_probeable_are_reported_not_raised(fake_package: Path) -> None:
    missing = probe_library.probe(request(import_name=None, distribution="no-such-distribution-xyz"))["error"]
    assert missing["setting"] == "verifier.library" and "is not an installed distribution" in missing["message"]
    unimportable = probe_library.probe(request(import_name="no_such_module_xyz"))["error"]
    assert unimportable["setting"] == "verifier.import_name" and "cannot be imported" in unimportable["message"]
    alone = probe_library.probe(request(import_name=None))
    assert alone["error"] is None and alone["import_name"] is None and alone["modules_found"] == 0  # the standard library alone


def test_main_reads_the_request_and_writes_the_report(fake_package: Path) -> None:
    (fake_package / probe_library.REQUEST).write_text(json.dumps(request()))
    probe_library.main()
    report = json.loads((fake_package / probe_library.REPORT).read_text())
    assert report["import_name"] == "probefake_xyz" and report["python"] == sys.executable and report["seconds"] >= 0


def test_the_import_name_is_derived_from_the_distribution_record(fake_package: Path) -> None:
    out = probe_library.probe(request(import_name=None, distribution="pluggy"))
    assert out["error"] is None and out["import_name"] == "pluggy" and out["import_name_source"] == "RECORD of pluggy"
    assert out["version"] == pluggy.__version__ and "PluginManager" in out["names"]
    wrong = probe_library.probe(request(import_name="probefake_xyz", distribution="pluggy"))["error"]
    assert wrong["setting"] == "verifier.import_name" and "that distribution installs: pluggy" in wrong["message"]
