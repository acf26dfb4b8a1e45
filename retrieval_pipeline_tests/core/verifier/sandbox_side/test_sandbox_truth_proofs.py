"""The sandbox side of the proofs that an option is *the* answer, by kind of claim, run in this process on fakes:

* a call's result keeps its arguments (``proof_kinds._kept_arguments``): recorded ``kept`` only when every keyword is
  read back as given from an instance of the class called;
* a class keeps its data in memory (``atoms._atom_persists_nothing``, an ``upgrade`` atom of ``_decide_atoms``): never
  false, open when any module behind the class mentions a way to keep data outside the process;
* a parameter's documentation read from the ``Args:``/``Attributes:`` section (``read_docs.section_texts``) only when
  nothing else documents it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs import proof_source
from retrieval_pipeline.core.verifier.proofs.atom_proofs import ATOM_SOURCE
from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE, PRELUDE_SOURCE
from retrieval_pipeline.core.verifier.sandbox_side import proof_prelude

KEEPING_LIBRARY = """
from pydantic import BaseModel


class Part(BaseModel):
    text: str | None = None


class Content(BaseModel):
    role: str | None = None
    parts: list[Part] | None = None


class Shouting(BaseModel):
    role: str | None = None

    def model_post_init(self, context):
        self.role = (self.role or "").upper()


class Plain:
    def __init__(self, role=None):
        self.kind = role  # stored under another name: not read back as given
"""


@pytest.fixture
def proofs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keeplib_xyz.py").write_text(KEEPING_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, Any] = {"__name__": "proofs_under_test"}
    exec(compile(proof_source.compose("helpers", proof_source.KINDS_SOURCE), "<proof>", "exec"), namespace)
    return namespace


def run_expression(proofs: dict[str, Any], expr: str) -> dict[str, Any]:
    data = {"names": {}, "free": ["keeplib_xyz"], "setup": "", "mode": "evaluates", "kept": True}
    try:
        proofs["_prove_expression"](expr=expr, **data)
    except AssertionError:
        pass
    return json.loads(Path(proof_prelude.EVIDENCE).read_text())


def test_a_built_object_that_keeps_every_argument_is_recorded_as_kept(proofs: dict[str, Any]) -> None:
    record = run_expression(proofs, "keeplib_xyz.Content(role='user', parts=[keeplib_xyz.Part(text='Hello')])")
    assert record["option_true"] is True and record["kept"] is True and "keeps every argument" in record["reason"]


@pytest.mark.parametrize(
    "expr",
    [
        "keeplib_xyz.Shouting(role='user')",  # evaluates, but the value is changed: 'USER'
        "keeplib_xyz.Plain(role='user')",  # evaluates, but no attribute of that name holds it
    ],
)
def test_a_built_object_that_changes_or_drops_an_argument_is_not_kept(proofs: dict[str, Any], expr: str) -> None:
    record = run_expression(proofs, expr)
    assert record["option_true"] is True and record["kept"] is False  # consistent at most: it evaluates


def test_an_ignored_keyword_stays_undecided_before_anything_is_kept(proofs: dict[str, Any]) -> None:
    record = run_expression(proofs, "keeplib_xyz.Content(role='user', text='Hello')")  # soundness rule 5 first
    assert record["option_true"] is None and "kept" not in record


# --------------------------------------------------------------------------------------------------
# A class keeps its data in memory

MEMORY_PACKAGE = {
    "__init__.py": "from .memory import InMemory\n# the package also offers: SqliteStore (needs sqlite)\n",
    "_util.py": "def copy(x):\n    return dict(x)\n",
    "memory.py": "from . import _util\n\n\nclass InMemory:\n    def __init__(self):\n        self.sessions = {}\n",
    "disk.py": (
        "import json\n\n\nclass OnDisk:\n    def __init__(self):\n        self.cache = {}\n\n"
        "    def save(self):\n        with open('x.json', 'w') as f:\n            json.dump(self.cache, f)\n"
    ),
    "hub_user.py": "from memlib_xyz import InMemory\n\n\nclass Wrapped(InMemory):\n    pass\n",
}


@pytest.fixture
def memory_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    package = tmp_path / "memlib_xyz"
    package.mkdir()
    for name, text in MEMORY_PACKAGE.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("memlib_xyz")]:
        monkeypatch.delitem(sys.modules, name)
    namespace: dict[str, Any] = {"__name__": "memory_atoms_under_test"}
    exec(compile(PRELUDE_SOURCE + "\n" + ATOM_SOURCE, "<atoms>", "exec"), namespace)
    return namespace


def memory_claim(cls: str):
    question = f"When using `memlib_xyz.{cls}`, how is session data persisted?"
    return decompose("c", question, {"A": "It is kept in a Python dictionary in RAM and lost when the process exits."})[0]


def test_kept_in_memory_asks_for_nothing_outside_the_process_as_its_truth_condition() -> None:
    claim = memory_claim("InMemory")
    atoms = claim.details["atoms"]
    assert [a["check"] for a in atoms] == ["holds", "persists_nothing"] and atoms[1]["upgrade"] is True
    assert claim.decides == "necessary" and claim.details["truth_when"] == "upgraded"
    both = decompose("c", "When using `memlib_xyz.InMemory`, how is data persisted?", {"A": "In a dict in memory and a SQLite file."})[0]
    assert "truth_when" not in both.details  # names a storage besides memory: no proof of "in memory" alone


@pytest.mark.parametrize(
    ("path", "state"),
    [
        ("memlib_xyz.memory.InMemory", "true"),  # `from . import _util` reads _util, not the package's own text
        ("memlib_xyz.disk.OnDisk", "undecided"),  # holds a dict, but writes a file: open, never false
        ("memlib_xyz.hub_user.Wrapped", "undecided"),  # imports a name from the package: its text (sqlite) is read
    ],
)
def test_nothing_outside_the_process_is_read_from_the_modules_behind_the_class(memory_helpers, path: str, state: str) -> None:
    patterns = memory_claim("InMemory").details["atoms"][1]["patterns"]
    found, reason = memory_helpers["_check"]({"check": "persists_nothing", "path": path, "patterns": patterns}, {})
    assert found == state, reason


def test_an_upgrade_atom_is_recorded_beside_the_necessary_ones_and_never_makes_the_option_false(
    memory_helpers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    patterns = memory_claim("InMemory").details["atoms"][1]["patterns"]

    def recorded(path: str) -> dict[str, Any]:
        atoms = [{"check": "holds", "path": path, "type": "dict"},
                 {"check": "persists_nothing", "path": path, "patterns": patterns, "upgrade": True}]  # fmt: skip
        try:
            memory_helpers["_decide_atoms"](atoms, {})
        except AssertionError:
            pass
        return json.loads((tmp_path / EVIDENCE_FILE).read_text())

    assert recorded("memlib_xyz.memory.InMemory")["upgraded"] is True
    on_disk = recorded("memlib_xyz.disk.OnDisk")
    assert on_disk["option_true"] is True and on_disk["upgraded"] is False  # still consistent, not false


# --------------------------------------------------------------------------------------------------
# A parameter's documented purpose, read from the Args/Attributes section when nothing else documents it


def run_async(user_id, new_message=None, state_delta=None):
    """Main entry method.

    Args:
      user_id: The user ID of the session.
      new_message: A new message to append to the
        session, as the user's input.
      state_delta: Optional state changes.

    Yields:
      new_message: not a parameter entry (another section).
    """


class Documented:
    """A runner.

    Attributes:
        app_name (str): The app name of the runner.
    """

    def __init__(self, app_name=None, plugins=None):
        """Builds it.

        Args:
            plugins: A list of plugins.
        """


class Described:
    app_name: str = ""
    """The name from the class body."""

    def __init__(self, app_name=""):
        """Args:
        app_name: The name from the Args section.
        """


def test_an_args_entry_is_the_documentation_of_a_parameter() -> None:
    from retrieval_pipeline.core.verifier.sandbox_side import read_docs

    assert read_docs.documented_entry(run_async.__doc__, "new_message") == (
        "A new message to append to the session, as the user's input."
    )  # the continuation line, and not the Yields section's entry
    assert read_docs.documented_entry(run_async.__doc__, "user") == ""  # a prefix of a name is not the name
    assert read_docs.documented_entry(":param str app_name: The name.\n:param x: Other.", "app_name") == "The name."
    assert read_docs.section_texts(Documented, "app_name") == ["The app name of the runner."]
    assert read_docs.section_texts(Documented, "plugins") == ["A list of plugins."]
    assert read_docs.section_texts(Documented, "session") == []


def test_the_args_section_is_read_only_when_nothing_else_documents_the_member(monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_pipeline.core.verifier.sandbox_side import read_docs

    fake = {"tests.Documented": Documented, "tests.Described": Described, "tests.run_async": run_async}
    monkeypatch.setattr(read_docs, "load", lambda path: fake[path])
    assert read_docs.read({"path": "tests.run_async", "member": "new_message"})[0].startswith("A new message")
    assert read_docs.read({"path": "tests.Documented", "member": "app_name"}) == ["The app name of the runner."]
    assert read_docs.read({"path": "tests.Described", "member": "app_name"}) == ["The name from the class body."]
    with pytest.raises(AttributeError):
        read_docs.read({"path": "tests.run_async", "member": "session_id"})
