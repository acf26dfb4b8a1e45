"""Gold resolution by import: a tiny fake library, imported in a sandboxed subprocess of this venv's python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.pairs import import_resolver
from retrieval_pipeline.core.pairs.gold import CorpusLookup, resolve_golds
from retrieval_pipeline.core.pairs.import_resolver import ImportResolver, LibraryEnvironmentError
from retrieval_pipeline_tests.core.conftest import require_sandbox

PROJECT_ROOT = Path(__file__).resolve().parents[3]
ADK_PYTHON = PROJECT_ROOT / ".venvs" / "adk" / "bin" / "python"
WIDGET = "fakelib.core.models.Widget"

#: The fake library: ``fakelib.Gadget`` re-exports ``Widget`` under another name; two modules fail on import.
FAKE_LIBRARY = {
    "fakelib/__init__.py": "from fakelib.core.models import Widget as Gadget\nfrom fakelib.core.models import helper\nLIMIT = 3\n",
    "fakelib/core/__init__.py": "",
    "fakelib/core/models.py": "class Widget:\n    class Part:\n        pass\n\n\ndef helper():\n    return 1\n",
    "fakelib/broken.py": "raise RuntimeError('boom at import')\n",
    "fakelib/exits.py": "import sys\nsys.exit(3)\n",
    "fakelib/needs_dep.py": "import no_such_dependency_xyz\n",
}


@pytest.fixture
def sandboxed() -> None:
    """Skip (fail under CI=true) when the verifier's sandbox cannot run here."""
    require_sandbox()


@pytest.fixture
def fake_library(tmp_path: Path) -> Path:
    """A folder holding the package ``fakelib`` (put on the script's sys.path, shown in the sandbox)."""
    root = tmp_path / "site"
    for name, text in FAKE_LIBRARY.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def resolver(library: Path, **kw: object) -> ImportResolver:
    """This venv's python as the library's environment, the fake library on its path."""
    return ImportResolver(python=Path(sys.executable), dataset="fake", search_paths=(library,), timeout_s=60, **kw)  # type: ignore[arg-type]


def doc(doc_id: str, aliases: list[str] | None = None, kind: str = "class") -> Document:
    return Document(doc_id=doc_id, text=doc_id, title=doc_id.rsplit(".", 1)[-1], kind=kind, aliases=aliases or [])


def test_a_reexport_resolves_to_its_canonical_path(sandboxed: None, fake_library: Path) -> None:
    lookup = CorpusLookup.from_documents([doc(WIDGET), doc("fakelib.core.models.helper", kind="function")])
    result = resolver(fake_library).resolve(["fakelib.Gadget", " fakelib.helper ", "fakelib.Gadget.Part"], lookup)
    assert set(result) == {"fakelib.Gadget", "fakelib.helper", "fakelib.Gadget.Part"}  # keys stripped
    gadget = result["fakelib.Gadget"]
    assert (gadget.doc_id, gadget.method) == (WIDGET, "import")
    assert gadget.note == f"resolved by import: fakelib.Gadget is {WIDGET}"
    assert (result["fakelib.helper"].doc_id, result["fakelib.helper"].method) == ("fakelib.core.models.helper", "import")
    part = result["fakelib.Gadget.Part"]  # canonical path is not in the corpus
    assert (part.doc_id, part.method) == (None, "unresolved")
    assert f"is {WIDGET}.Part, which the corpus does not hold" in part.note


def test_import_golds_reports_kind_identity_and_errors(sandboxed: None, fake_library: Path) -> None:
    asked = ["fakelib.Gadget", "fakelib", "fakelib.LIMIT", "fakelib.broken.X", "fakelib.exits", "fakelib.Nope", "fakelib.needs_dep.Y"]
    found = resolver(fake_library).import_golds(asked)
    assert (found["fakelib.Gadget"].canonical, found["fakelib.Gadget"].kind, found["fakelib.Gadget"].identical) == (WIDGET, "class", True)
    assert (found["fakelib"].canonical, found["fakelib"].kind) == ("fakelib", "module")
    assert found["fakelib.LIMIT"].canonical is None and found["fakelib.LIMIT"].kind == "object:int"
    assert "no __module__/__qualname__" in str(found["fakelib.LIMIT"].error)
    assert found["fakelib.broken.X"].error == "RuntimeError: boom at import"
    assert found["fakelib.exits"].error == "SystemExit: 3"  # a module ending the interpreter is one gold's failure
    assert str(found["fakelib.Nope"].error).startswith("AttributeError:")
    assert "no_such_dependency_xyz" in str(found["fakelib.needs_dep.Y"].error)  # a missing dependency, not "no such gold"


def test_a_gold_whose_import_raises_is_unresolved_with_the_exception(sandboxed: None, fake_library: Path) -> None:
    lookup = CorpusLookup.from_documents([doc(WIDGET)])
    result = resolver(fake_library).resolve(["fakelib.broken.Thing"], lookup)["fakelib.broken.Thing"]
    assert (result.doc_id, result.method) == (None, "unresolved")
    assert result.note == f"import failed in {sys.executable}: RuntimeError: boom at import"


def test_a_canonical_path_matched_by_alias_says_so(sandboxed: None, fake_library: Path) -> None:
    lookup = CorpusLookup.from_documents([doc("fakelib.widgets.Widget", aliases=[WIDGET])])
    result = resolver(fake_library).resolve(["fakelib.Gadget"], lookup)["fakelib.Gadget"]
    assert (result.doc_id, result.method) == ("fakelib.widgets.Widget", "import")
    assert result.note.startswith(f"resolved by import: fakelib.Gadget is {WIDGET} (alias of fakelib.widgets.Widget")


def test_all_unresolved_golds_go_in_one_sandboxed_isolated_run(
    sandboxed: None, fake_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[list[str], list[str]]] = []
    real = import_resolver.run_in_sandbox

    def counting(files, argv, settings, **kw):  # noqa: ANN001, ANN202 - the real signature
        calls.append((list(argv), json.loads(files[import_resolver.REQUEST_FILE])["golds"]))
        return real(files, argv, settings, **kw)

    monkeypatch.setattr(import_resolver, "run_in_sandbox", counting)
    lookup = CorpusLookup.from_documents([doc(WIDGET), doc("fakelib.core.models.helper", kind="function")])
    golds = ["fakelib.core.models.Widget", "fakelib.Gadget", "fakelib.helper", "fakelib.Gadget", "fakelib.Nope"]
    resolved = resolve_golds(golds, lookup, resolver(fake_library))
    assert {g: r.method for g, r in resolved.items()} == {
        "fakelib.core.models.Widget": "exact",
        "fakelib.Gadget": "import",
        "fakelib.helper": "suffix",  # the index resolves it: never imported
        "fakelib.Nope": "unresolved",
    }
    assert calls == [([sys.executable, "-I", import_resolver.SCRIPT_FILE], ["fakelib.Gadget", "fakelib.Nope"])]  # one isolated run


def test_golds_outside_the_import_name_or_malformed_are_never_sent(fake_library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError("nothing should be imported")

    monkeypatch.setattr(import_resolver, "run_in_sandbox", refuse)
    lookup = CorpusLookup.from_documents([doc(WIDGET)])
    result = resolver(fake_library, import_name="fakelib").resolve(["os.system", "fakelib.x-y", "fakelibrary.X", "a" * 400], lookup)
    assert all(r.method == "unresolved" and r.note.startswith("not imported: ") for r in result.values())
    assert "outside the library's import name 'fakelib'" in result["os.system"].note
    assert "outside" in result["fakelibrary.X"].note  # a shared prefix is not the package
    assert "not a dotted Python name" in result["fakelib.x-y"].note and "not a dotted" in result["a" * 400].note


def test_a_missing_interpreter_is_a_clear_error_naming_it_and_the_dataset(tmp_path: Path) -> None:
    missing = tmp_path / "venv" / "bin" / "python"
    with pytest.raises(LibraryEnvironmentError) as caught:
        ImportResolver(python=missing, dataset="adk_x").resolve(["google.adk.Agent"], CorpusLookup.from_documents([]))
    message = str(caught.value)
    assert str(missing) in message and "adk_x" in message and "does not exist" in message and "make adk-env" in message
    assert caught.value.python == str(missing)
    with pytest.raises(LibraryEnvironmentError, match="is not a file"):
        ImportResolver(python=tmp_path, dataset="adk_x").import_golds(["a.B"])


def fake_python(tmp_path: Path, body: str) -> Path:
    """An executable named python that is not one: a shell script."""
    path = tmp_path / "env" / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_broken_interpreter_is_a_clear_error_with_its_stderr(sandboxed: None, tmp_path: Path) -> None:
    python = fake_python(tmp_path, "echo 'cannot start: libpython missing' >&2\nexit 3\n")
    with pytest.raises(LibraryEnvironmentError) as caught:
        ImportResolver(python=python, dataset="adk_x", timeout_s=30).import_golds(["google.adk.Agent"])
    message = str(caught.value)
    assert f"verifier.python {python}" in message and "adk_x" in message
    assert "did not answer" in message and "exit code 3" in message and "libpython missing" in message


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"results": 5}', "malformed"),
        ('{"results": [{"gold": "a.Other"}]}', "did not answer for 1 gold"),
        ("not json", "malformed"),
    ],
)
def test_a_malformed_answer_is_a_clear_error(sandboxed: None, tmp_path: Path, answer: str, expected: str) -> None:
    python = fake_python(tmp_path, f"echo '{answer}' > imports.result.json\n")
    with pytest.raises(LibraryEnvironmentError, match=expected):
        ImportResolver(python=python, dataset="adk_x", timeout_s=30).import_golds(["a.B"])


# --------------------------------------------------------------------------- the real library


@pytest.fixture
def adk_python() -> Path:
    if not ADK_PYTHON.exists():
        pytest.skip(f"the google-adk environment {ADK_PYTHON} is absent: create it with `make adk-env`")
    return ADK_PYTHON


@pytest.mark.integration
def test_real_adk_agent_aliases_resolve_to_llm_agent(sandboxed: None, adk_python: Path, shared_data: Path) -> None:
    from retrieval_pipeline.core.datasets.api_index import load_ranked_targets

    corpus = load_ranked_targets(shared_data / "adk" / "ranked_targets" / "v1.24.1" / "ranked_targets.yaml")
    lookup = CorpusLookup.from_documents(corpus.documents)
    golds = ["google.adk.Agent", "google.adk.agents.Agent", "google.adk.agents.llm_agent.Agent"]
    result = ImportResolver(python=adk_python, dataset="adk", import_name="google.adk").resolve(golds, lookup)
    llm_agent = "google.adk.agents.llm_agent.LlmAgent"
    assert {g: (r.doc_id, r.method) for g, r in result.items()} == {g: (llm_agent, "import") for g in golds}
    assert all(r.note == f"resolved by import: {g} is {llm_agent}" for g, r in result.items())
