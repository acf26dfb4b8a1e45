"""``pairs/sandbox_side/resolve_imports.py`` imported on its own in the host interpreter (no sandbox)."""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

import pytest

from retrieval_pipeline.core.pairs import import_resolver
from retrieval_pipeline.core.pairs.sandbox_side import resolve_imports, source


def test_the_script_run_is_this_file() -> None:
    assert source(import_resolver.SCRIPT_FILE) == Path(resolve_imports.__file__).read_text(encoding="utf-8")
    assert (import_resolver.REQUEST_FILE, import_resolver.RESULT_FILE) == ("request.json", "imports.result.json")


def test_locate_walks_attributes_past_the_longest_module() -> None:
    assert resolve_imports.locate("collections.OrderedDict") is collections.OrderedDict
    assert resolve_imports.locate("os.path.join") is os.path.join
    with pytest.raises(ModuleNotFoundError, match="no_such_top_xyz"):
        resolve_imports.locate("no_such_top_xyz.X")
    with pytest.raises(AttributeError):
        resolve_imports.locate("collections.NoSuchThing")


def test_answer_gives_canonical_path_kind_and_identity() -> None:
    found = resolve_imports.answer("collections.OrderedDict", 500)
    assert found == {
        "gold": "collections.OrderedDict",
        "canonical": "collections.OrderedDict",
        "kind": "class",
        "identical": True,
        "error": None,
    }
    module = resolve_imports.answer("json", 500)
    assert (module["canonical"], module["kind"], module["identical"]) == ("json", "module", True)
    constant = resolve_imports.answer("sys.maxsize", 500)
    assert constant["canonical"] is None and constant["kind"] == "object:int" and "no __module__/__qualname__" in constant["error"]


def test_answer_records_an_exception_cut_to_the_limit() -> None:
    failed = resolve_imports.answer("collections.NoSuchThing", 20)
    assert failed["canonical"] is None and failed["identical"] is False
    assert failed["error"].startswith("AttributeError: ") and len(failed["error"]) == 20


def test_main_reads_the_request_and_writes_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "fakemod_resolve_xyz.py").write_text("class Thing:\n    pass\n\n\nAlias = Thing\n")
    request = {"golds": ["fakemod_resolve_xyz.Alias", "fakemod_resolve_xyz.Nope"], "paths": [str(tmp_path / "lib")], "max_error_chars": 500}
    (tmp_path / "request.json").write_text(json.dumps(request))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the request's paths first
    monkeypatch.delitem(sys.modules, "fakemod_resolve_xyz", raising=False)
    resolve_imports.main()
    sys.modules.pop("fakemod_resolve_xyz", None)
    written = json.loads((tmp_path / "imports.result.json").read_text())
    assert written["executable"] == sys.executable and written["python_version"] == sys.version.split()[0]
    alias, missing = written["results"]
    assert (alias["gold"], alias["canonical"], alias["kind"], alias["identical"]) == (
        "fakemod_resolve_xyz.Alias",
        "fakemod_resolve_xyz.Thing",
        "class",
        True,
    )
    assert missing["error"].startswith("AttributeError:")
