"""Tests for building API corpora from ranked-targets YAML and from module introspection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.datasets.api_index import (
    MAX_MEMBER_LINES,
    introspect_modules,
    load_ranked_targets,
)

RANKED = """
- rank: 1
  id: pkg.mod
  name: mod
  type: MODULE
  docstring: The module.
- rank: 2
  id: pkg.mod.Widget
  name: Widget
  type: CLASS
  docstring: "A widget.\\n\\nLonger text."
  constructor_signature: 'def __init__(self, size: int):'
  aliases: [pkg.Widget]
  methods:
    - signature: 'def spin(self) -> None:'
      docstring: "Spin it.\\nDetails."
  properties:
    - signature: 'size: int'
  inherited_methods:
    Base:
      - signature: 'def close(self):'
- rank: 3
  id: pkg.mod.Widget.spin
  name: spin
  type: METHOD
  signature: 'def spin(self) -> None:'
- rank: 4
  id: pkg.mod.helper
  name: helper
  type: METHOD
  signature: 'def helper(x):'
- rank: 5
  id: pkg.mod.Widget
  name: Widget
  type: CLASS
- rank: 6
  name: nameless
  type: CLASS
"""


@pytest.fixture()
def ranked_file(tmp_path: Path) -> Path:
    path = tmp_path / "ranked_targets.yaml"
    path.write_text(textwrap.dedent(RANKED))
    return path


def test_ranked_targets_documents_and_report(ranked_file: Path) -> None:
    load = load_ranked_targets(ranked_file)
    docs = {d.doc_id: d for d in load.documents}
    assert list(docs) == ["pkg.mod", "pkg.mod.Widget", "pkg.mod.Widget.spin", "pkg.mod.helper"]
    assert load.report == {
        "total": 6,
        "kept": 4,
        "rejected": 2,
        "duplicates": 1,
        "missing_id": 1,
        "missing_docstring": 2,
        "by_kind": {"class": 1, "method": 2, "module": 1},
    }
    widget = docs["pkg.mod.Widget"]
    assert (widget.title, widget.kind, widget.module, widget.aliases) == ("Widget", "class", "pkg.mod", ["pkg.Widget"])
    assert docs["pkg.mod"].module == "pkg.mod"
    assert docs["pkg.mod.Widget.spin"].module == "pkg.mod"  # a method lives in its class's module
    assert docs["pkg.mod.helper"].module == "pkg.mod"


def test_ranked_targets_text_is_readable(ranked_file: Path) -> None:
    docs = {d.doc_id: d for d in load_ranked_targets(ranked_file).documents}
    text = docs["pkg.mod.Widget"].text
    assert text.splitlines()[:3] == ["Widget (class)", "pkg.mod.Widget", "__init__(self, size: int)"]
    assert "A widget." in text and "- spin(self) -> None: Spin it." in text and "Details." not in text
    assert "- size: int" in text and "- close(self) [from Base]" in text
    assert docs["pkg.mod.helper"].text == "helper (method)\npkg.mod.helper\nhelper(x)"  # no docstring: name + signature


def test_ranked_targets_rejects_name_file_and_entry(ranked_file: Path) -> None:
    duplicate, nameless = load_ranked_targets(ranked_file).rejects
    assert duplicate.case_id == "pkg.mod.Widget" and duplicate.index == 4
    assert "duplicate" in duplicate.reason and "index 1" in duplicate.reason and str(ranked_file) in duplicate.reason
    assert nameless.case_id is None and "'id'" in nameless.reason


def test_member_lines_are_capped(tmp_path: Path) -> None:
    methods = "\n".join(f"    - signature: 'def m{i}(self):'" for i in range(MAX_MEMBER_LINES + 5))
    path = tmp_path / "r.yaml"
    path.write_text(f"- id: a.B\n  name: B\n  type: CLASS\n  methods:\n{methods}\n")
    text = load_ranked_targets(path).documents[0].text
    assert sum(line.startswith("- m") for line in text.splitlines()) == MAX_MEMBER_LINES
    assert text.endswith("... and 5 more")


@pytest.mark.parametrize("content", ["{a: 1}\n", "- a\n  - b: [\n"])
def test_ranked_targets_bad_file_raises(tmp_path: Path, content: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(content)
    with pytest.raises(InputError, match="r.yaml"):
        load_ranked_targets(path)


@pytest.mark.integration
def test_real_ranked_targets_v1_24_1_counts_are_consistent(shared_data: Path) -> None:
    load = load_ranked_targets(shared_data / "adk" / "ranked_targets" / "v1.24.1" / "ranked_targets.yaml")
    report = load.report
    assert report["kept"] + report["rejected"] == report["total"] == 1927
    assert report["duplicates"] == 1 and report["missing_id"] == 0 and len(load.rejects) == 1
    assert len({d.doc_id for d in load.documents}) == report["kept"]
    assert sum(report["by_kind"].values()) == report["kept"]
    assert 0.2 < report["missing_docstring"] / report["kept"] < 0.4  # README: ~30% lack a docstring
    assert all(d.text and d.kind in {"module", "class", "method"} for d in load.documents)
    assert max(len(d.text) for d in load.documents) < 12_000  # bounded text


def test_introspect_json() -> None:
    import json

    load = introspect_modules(["json"])
    docs = {d.doc_id: d for d in load.documents}
    assert load.documents[0].doc_id == "json" and load.documents[0].kind == "module"
    assert docs["json.dumps"].kind == "function" and "dumps(obj" in docs["json.dumps"].text
    assert docs["json.JSONDecoder"].kind == "class"
    assert docs["json.JSONDecoder"].aliases == ["json.decoder.JSONDecoder"]  # re-exported
    assert docs["json.JSONDecoder.decode"].kind == "method"
    assert docs["json.JSONDecoder.decode"].aliases == ["json.decoder.JSONDecoder.decode"]
    assert not any(doc_id.rsplit(".", 1)[-1].startswith("_") for doc_id in docs)
    assert "json.JSONDecoder.__init__" not in docs and "json.JSONDecodeError.with_traceback" not in docs
    assert {d for d in docs if d.count(".") == 1} == {f"json.{name}" for name in json.__all__}  # __all__ respected
    assert load.report["failed_modules"] == 0 and load.report["kept"] == len(load.documents)


def test_introspect_os_path_aliases_posixpath() -> None:
    import os.path

    docs = {d.doc_id: d for d in introspect_modules(["os.path"]).documents}
    join = docs["os.path.join"]
    assert join.aliases == [f"{os.path.join.__module__}.join"]  # posixpath.join on POSIX
    assert join.module == "os.path" and join.source == "introspection:os.path"
    assert "os.path.sep" not in docs  # constants are skipped


def test_introspect_import_failure_is_a_reject_and_order_is_deterministic() -> None:
    names = ["no_such_module_xyz", "json", "json"]
    first, second = introspect_modules(names), introspect_modules(names)
    assert [d.doc_id for d in first.documents] == [d.doc_id for d in second.documents]
    assert len(first.rejects) == 1 and "no_such_module_xyz" in first.rejects[0].reason
    assert first.report["modules"] == 2 and first.report["failed_modules"] == 1


def test_introspect_class_methods_only_from_own_dict() -> None:
    docs = {d.doc_id for d in introspect_modules(["collections"]).documents}
    assert "collections.OrderedDict.move_to_end" in docs  # defined on OrderedDict
    assert "collections.OrderedDict.keys" in docs  # OrderedDict overrides dict.keys in its own __dict__
    assert "collections.Counter.most_common" in docs
    assert "collections.Counter.setdefault" not in docs  # inherited from dict, not in Counter.__dict__


def test_introspection_keeps_wrapped_functions_bound_methods_and_private_base_methods():
    """Targets developers ask about that a plain ``isfunction``/own-``__dict__`` walk would miss."""
    from retrieval_pipeline.core.datasets.api_index import introspect_modules

    ids = {d.doc_id for d in introspect_modules(["urllib.parse", "random", "argparse", "collections"]).documents}
    assert "urllib.parse.urlsplit" in ids  # functools.lru_cache wrapper
    assert "random.sample" in ids  # bound method of the module's hidden Random instance
    assert "argparse.ArgumentParser.add_argument" in ids  # defined on the private argparse._ActionsContainer
    assert "collections.OrderedDict.get" not in ids  # inherited from builtin dict: left to dict


def test_introspected_text_is_stable_across_processes():
    """Defaults that print memory addresses would change the text (and the embedding cache key) every run."""
    import subprocess
    import sys

    code = (
        "from retrieval_pipeline.core.datasets.api_index import introspect_modules as f;"
        "import hashlib;print(hashlib.sha256(''.join(d.text for d in f(['shutil','difflib','logging','dataclasses']).documents).encode()).hexdigest())"
    )
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout for _ in range(2)}
    assert len(digests) == 1
    from retrieval_pipeline.core.datasets.api_index import introspect_modules

    text = {d.doc_id: d.text for d in introspect_modules(["shutil"]).documents}["shutil.move"]
    assert "copy_function=<default>" in text and "0x" not in text


def test_methods_patched_in_by_other_packages_are_left_out(monkeypatch):
    import logging

    from retrieval_pipeline.core.datasets.api_index import introspect_modules

    def warning_once(self, msg):  # what transformers attaches to logging.Logger when imported
        pass

    warning_once.__module__ = "transformers.utils.logging"
    monkeypatch.setattr(logging.Logger, "warning_once", warning_once, raising=False)
    ids = {d.doc_id for d in introspect_modules(["logging"]).documents}
    assert "logging.Logger.info" in ids and "logging.Logger.warning_once" not in ids


def test_installed_package_is_walked_into_public_submodules():
    import pytest

    from retrieval_pipeline.core.common.errors import InputError
    from retrieval_pipeline.core.datasets.api_index import introspect_modules, package_modules

    modules = package_modules("json")
    assert modules[0] == "json" and {"json.decoder", "json.encoder", "json.tool"} <= set(modules)
    ids = {d.doc_id for d in introspect_modules(modules).documents}
    assert {"json.dumps", "json.decoder.JSONDecoder", "json.decoder.JSONDecoder.raw_decode"} <= ids
    with pytest.raises(InputError, match="not installed"):
        package_modules("no_such_package_for_sure")
