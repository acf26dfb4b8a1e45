"""Proofs that an option is *the* answer, by the kind of claim it makes (docs/verifier.md, "A design half and a check
half"): each one decides true only when the library says so, and stays undecided (or consistent) when the claim is close
but wrong, so that "None of the above" is proven false only by an option proven true.

* a call's result keeps its arguments (a construction question: "How do you construct a ... object with ...?");
* a class keeps its data in memory (it holds dicts, and nothing behind it reaches outside the process);
* a missing argument, observed (the snippet's error names the argument an option names).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.verifier.claims.claims import construction_asked
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.observation import missing_argument as missing_module
from retrieval_pipeline.core.verifier.observation.missing_argument import asks_missing, missing_argument
from retrieval_pipeline.core.verifier.proofs import proof_source
from retrieval_pipeline.core.verifier.proofs.atom_proofs import ATOM_SOURCE
from retrieval_pipeline.core.verifier.proofs.proof_source import EVIDENCE_FILE, PRELUDE_SOURCE
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver, Proof
from retrieval_pipeline.core.verifier.sandbox_side import proof_prelude
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, decide, option_evidence

# --------------------------------------------------------------------------------------------------
# A call's result keeps its arguments

CONSTRUCT = "How do you correctly construct a user message content object with text?"


def call(text: str) -> ast.Call:
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


@pytest.mark.parametrize(
    ("question", "option", "asked"),
    [
        (CONSTRUCT, "types.Content(role='user', parts=[types.Part(text='Hello')])", True),
        (CONSTRUCT, "types.Content(role='user', parts=[])", False),  # the question's "with text" is not in the call
        (CONSTRUCT, "types.Blob(data=b'Hello', mime_type='text/plain')", False),  # builds nothing the question names
        (CONSTRUCT, "types.Content('user', [types.Part(text='Hello')])", False),  # positional: nothing to read back by name
        ("Which configuration object holds the user's content?", "types.Content(role='user', parts=[])", False),  # not "how to build"
        ("How do you create a `RunConfig` with streaming?", "RunConfig(streaming_mode='sse')", True),
        ("How do you create a `RunConfig` with streaming?", "make_config(streaming_mode='sse')", False),  # no class
    ],
)
def test_a_construction_question_asks_for_a_call_that_keeps_its_arguments(question: str, option: str, asked: bool) -> None:
    assert construction_asked(question, call(option)) is asked


def test_the_claim_carries_the_truth_condition_only_for_a_construction_question() -> None:
    built = decompose("c", CONSTRUCT, {"A": "types.Content(role='user', parts=[types.Part(text='Hello')])"})[0]
    assert built.kind == "expression" and built.decides == "necessary" and built.details["truth_when"] == "kept"
    other = decompose("c", "Which call is accepted?", {"A": "types.Content(role='user', parts=[])"})[0]
    assert "truth_when" not in other.details


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


def _execution(record: dict[str, Any]) -> Execution:
    return Execution(0, True, "passed", "", "", 0.1, None, {EVIDENCE_FILE: json.dumps(record)})


def test_the_host_takes_the_option_as_true_only_when_the_proof_recorded_its_truth_condition() -> None:
    claim = decompose("c", CONSTRUCT, {"A": "types.Content(role='user', parts=[types.Part(text='Hello')])"})[0]
    proof = Proof(claim, "def test_x():\n    pass\n", "proof", "test_option_A.py")
    kept = option_evidence(proof, _execution({"option_true": True, "reason": "evaluates", "kept": True}))
    dropped = option_evidence(proof, _execution({"option_true": True, "reason": "evaluates", "kept": False}))
    silent = option_evidence(proof, _execution({"option_true": True, "reason": "evaluates"}))
    assert (kept.state, dropped.state, silent.state) == ("true", "consistent", "consistent")
    plain = decompose("c", "Which call is accepted?", {"A": "types.Content(role='user', parts=[])"})[0]
    other = option_evidence(Proof(plain, "", "proof", "t.py"), _execution({"option_true": True, "reason": "x", "kept": True}))
    assert other.state == "consistent"  # a record key the claim does not ask for proves nothing


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
# A missing argument, observed

MISSING = "Which argument is missing in this `Runner` initialization?"
SNIPPET = "def code_under_test():\n    Runner(agent=my_agent)\n"


def test_the_questions_that_ask_for_a_missing_argument() -> None:
    assert asks_missing(MISSING) and asks_missing("What required parameter was omitted from the call?")
    assert not asks_missing("Which argument does `Runner` accept?") and not asks_missing("What is missing from the docs?")


def keyword_evidence(options: dict[str, str], states: dict[str, str]) -> list[OptionEvidence]:
    claims = decompose("c", MISSING, options)
    return [OptionEvidence(c.letter, c, "proof", None, states.get(c.letter, "undecided")) for c in claims]  # type: ignore[arg-type]


OPTIONS = {"A": "`tools`", "B": "`app_name`", "C": "`description`", "D": "`session_service`", "E": "None of the above"}


def observed(monkeypatch: pytest.MonkeyPatch, raised: dict[str, Any] | None) -> None:
    observation = {"called": "code_under_test", "raised": raised, "stdout": "", "returned": None}
    monkeypatch.setattr(
        missing_module, "observe", lambda *args, **kwargs: (observation, Execution(0, True, "passed", "", "", 0.1, None, {}))
    )


def test_the_option_naming_the_argument_the_error_says_is_missing_is_true(monkeypatch: pytest.MonkeyPatch) -> None:
    observed(
        monkeypatch,
        {"type": "TypeError", "mro": ["TypeError"], "message": "Runner.__init__() missing 1 required keyword-only argument: 'app_name'"},
    )
    before = keyword_evidence(OPTIONS, {"A": "false", "B": "consistent", "C": "false", "D": "consistent"})
    after = missing_argument(MISSING, SNIPPET, before, None, None)  # type: ignore[arg-type]
    assert {e.letter: e.state for e in after} == {"A": "false", "B": "true", "C": "false", "D": "consistent", "E": "undecided"}
    assert "names 'app_name' as missing" in after[1].note
    assert decide("c", "B", after).verdict == "Unverifiable"  # D is still open: not Valid by this alone
    settled = [e if e.letter != "D" else OptionEvidence("D", e.claim, "proof", False, "false") for e in after]
    assert decide("c", "B", settled).verdict == "Valid" and decide("c", "E", settled).verdict == "Incorrect"


@pytest.mark.parametrize(
    "raised",
    [
        {"type": "TypeError", "mro": ["TypeError"], "message": "Runner.__init__() missing 1 required keyword-only argument: 'node'"},
        {"type": "ValueError", "mro": ["ValueError"], "message": "app_name looks wrong"},  # no missing argument listed
        None,  # nothing raised
        {"type": "TypeError", "mro": ["TypeError"], "message": "missing 1 required positional argument: 'app_name'", "limit": 1},
    ],
)
def test_an_error_that_names_no_option_or_an_unmentioned_argument_decides_nothing(monkeypatch: pytest.MonkeyPatch, raised) -> None:
    """``node``: a required argument neither the question nor an option mentions, the snippet is abridged (rule 3)."""
    if raised and raised.pop("limit", None):
        monkeypatch.setattr(missing_module, "untrusted", lambda *args: "the snippet's run hit a limit (memory)")
    observed(monkeypatch, raised)
    before = keyword_evidence(OPTIONS, {"A": "false", "B": "consistent", "C": "false", "D": "consistent"})
    after = missing_argument(MISSING, SNIPPET, before, None, None)  # type: ignore[arg-type]
    assert [e.state for e in after] == [e.state for e in before]


def test_a_question_that_does_not_ask_for_a_missing_argument_runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(missing_module, "observe", lambda *args, **kwargs: pytest.fail("observed"))
    claims = decompose("c", "Which argument does `Runner` accept?", OPTIONS)
    before = [OptionEvidence(c.letter, c, "proof", None, "consistent") for c in claims]
    assert missing_argument("Which argument does `Runner` accept?", SNIPPET, before, None, None) == before  # type: ignore[arg-type]


def test_the_offline_prover_passes_the_truth_condition_to_the_expression_proof() -> None:
    claim = decompose("c", CONSTRUCT, {"A": "types.Content(role='user', parts=[types.Part(text='Hello')])"})[0]
    function, data = OfflineProver(None)._expression_test(claim)
    assert function == "_prove_expression" and data["kept"] is True


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
