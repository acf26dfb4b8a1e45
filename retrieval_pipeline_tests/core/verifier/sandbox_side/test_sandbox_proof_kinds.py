"""The proof-side files (prelude, proofs of each kind, the LLM check wrapper) run in this process, as a proof runs them.

Each proof puts ``sandbox_side/proof_prelude.py`` first, then the files of its kind, in one namespace; here the
same texts are executed in a namespace of their own, in a temporary working directory that receives the
evidence file.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.verifier.proofs import proof_source
from retrieval_pipeline.core.verifier.proofs.llm_prover import GENERATED_FILE, WRAPPER_SOURCE
from retrieval_pipeline.core.verifier.sandbox_side import llm_check, proof_prelude

Outcome = tuple[bool | None, str]


@pytest.fixture
def proofs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The prelude, the proofs of each kind and the LLM wrapper, executed in one namespace (evidence goes to tmp_path)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "proofs_under_test"}
    source = proof_source.compose("helpers", proof_source.KINDS_SOURCE, WRAPPER_SOURCE)
    exec(compile(source, "<proof>", "exec"), namespace)
    return namespace


def decide(proofs: dict[str, Any], function: str, **data: Any) -> Outcome:
    """Run one proof function: the ``option_true`` and ``reason`` it recorded (a false or undecided one raises)."""
    call: Callable[..., None] = proofs[function]
    try:
        call(**data)
    except AssertionError as exc:
        assert str(exc).startswith(("option is false: ", "proof undecided: "))
    record = json.loads(Path(proof_prelude.EVIDENCE).read_text())
    return record["option_true"], record["reason"]


def test_the_texts_are_the_files_and_the_evidence_file_is_the_prelude_s() -> None:
    assert proof_source.PRELUDE_SOURCE == Path(proof_prelude.__file__).read_text(encoding="utf-8")
    assert WRAPPER_SOURCE == Path(llm_check.__file__).read_text(encoding="utf-8")
    assert proof_source.EVIDENCE_FILE == proof_prelude.EVIDENCE == "option.evidence.json"
    assert GENERATED_FILE == llm_check.GENERATED_FILE


def test_a_proof_is_its_docstring_the_files_and_one_call_with_the_data() -> None:
    test = proof_source.proof_test("B_1", "_prove_exists", {"path": "json.dumps", "names": {"x": ("path", "é\"'")}})
    assert test == (
        "PROOF = {'path': 'json.dumps', 'names': {'x': ('path', '\\xe9\"\\'')}}\n\n\ndef test_option_B_1():\n    _prove_exists(**PROOF)\n"
    )
    source = proof_source.compose('it\'s "quoted" \\ é', proof_source.KINDS_SOURCE, test)
    tree = ast.parse(source)
    assert source.isascii() and ast.get_docstring(tree, clean=False) == 'it\'s "quoted" \\ é'
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")] == ["test_option_B_1"]


def test_import(proofs: dict[str, Any]) -> None:
    assert decide(proofs, "_prove_import", statement="from json import dumps") == (True, "from json import dumps works")
    state, reason = decide(proofs, "_prove_import", statement="from json import nope_xyz")
    assert state is False and "raises ImportError" in reason


def test_exists(proofs: dict[str, Any]) -> None:
    assert decide(proofs, "_prove_exists", path="json.dumps", names={}, head_from_question=False) == (True, "json.dumps exists")
    assert decide(proofs, "_prove_exists", path="json.nope_xyz", names={}, head_from_question=False)[0] is False
    state, reason = decide(proofs, "_prove_exists", path="nosuchmodule_xyz.A", names={}, head_from_question=True)
    assert state is None and reason.startswith("the question's subject is missing")
    unprobed = {"Thing": ("unprobed", ("Thing", "defined in lib.broken, which the probe did not import"))}
    assert decide(proofs, "_prove_exists", path="Thing.attr", names=unprobed, head_from_question=False)[0] is None


def test_an_attribute_set_on_instances_exists_and_one_a_class_may_set_dynamically_is_undecided(proofs: dict[str, Any]) -> None:
    """Kind of claim: an attribute exists. ``logging.Handler`` gets ``formatter`` in ``__init__`` (``self.formatter =
    None``), not on the class: looking only at the class made it false (a right key, ``ToolContext.function_call_id`` on
    google-adk 1.20, came out Incorrect). ``argparse.Namespace`` sets whatever it is given (``setattr(self, name, ...)``):
    a name missing from it is undecided, not false."""
    assert decide(proofs, "_prove_exists", path="logging.Handler.formatter", names={}, head_from_question=False)[0] is True
    assert decide(proofs, "_prove_exists", path="logging.Handler.nope_xyz", names={}, head_from_question=False)[0] is False
    assert decide(proofs, "_prove_exists", path="argparse.Namespace.nope_xyz", names={}, head_from_question=False)[0] is None


def test_a_lower_case_head_that_is_no_module_is_undecided_not_false(proofs: dict[str, Any]) -> None:
    """`ctx.agent_name` names the option's own variable: that no module is called `ctx` proves nothing about it."""
    state, reason = decide(proofs, "_prove_exists", path="ctx.agent_name", names={}, head_from_question=False)
    assert state is None and "may be a variable" in reason
    assert decide(proofs, "_prove_exists", path="NoSuchThing_xyz.attr", names={}, head_from_question=False)[0] is False


def test_signature_and_keywords(proofs: dict[str, Any]) -> None:
    exact = {"subject": "textwrap.dedent", "names": {}, "expect_async": False}
    assert decide(proofs, "_prove_signature", expected=[["text", "POSITIONAL_OR_KEYWORD"]], **exact)[0] is True
    assert decide(proofs, "_prove_signature", expected=[["text", "KEYWORD_ONLY"]], **exact)[0] is False
    accepts = {"subject": "textwrap.indent", "names": {}, "expect_accepted": True, "value_source": None, "named_only": False}
    assert decide(proofs, "_prove_accepts", param="predicate", **accepts)[0] is True
    assert decide(proofs, "_prove_accepts", param="width", **accepts)[0] is False
    missing = decide(proofs, "_prove_accepts", param="x", **{**accepts, "subject": "nosuchmodule_xyz.f"})
    assert missing[0] is None and missing[1].startswith("cannot load nosuchmodule_xyz.f")


@pytest.mark.parametrize(
    ("expr", "mode", "extra", "expected"),
    [
        ("len('ab')", "evaluates", {}, True),
        ("1 / 0", "evaluates", {}, False),
        ("json.loads('{bad')", "raises", {"exception": "json.JSONDecodeError"}, True),
        ("json.loads('{bad')", "raises", {"exception": "KeyError"}, False),
        ("json.loads('[1]')", "raises", {"exception": "ValueError"}, False),
        ("json.loads('[1]')", "equals", {"expected": "[1]"}, True),
        ("json.loads('1')", "equals", {"expected": "1.0"}, True),  # numbers compare by value
        ("json.loads('true')", "equals", {"expected": "1"}, False),  # a bool is not a number
        ("re.search('b+', 'abbc')", "match", {"expected": "'bb'"}, True),
        ("re.search('x', 'abc')", "match", {"expected": "'x'"}, False),
        ("(", "equals", {"expected": "1"}, None),  # does not compile: undecided
    ],
)
def test_expression(proofs: dict[str, Any], expr: str, mode: str, extra: dict[str, str], expected: bool | None) -> None:
    free = [name for name in ("json", "re") if name in expr]
    state, reason = decide(proofs, "_prove_expression", names={}, free=free, setup="", expr=expr, mode=mode, **extra)
    assert state is expected, reason


def test_expression_setup_failure_is_false_only_for_evaluates(proofs: dict[str, Any]) -> None:
    data = {"names": {}, "free": [], "setup": "import nosuchmodule_xyz", "expr": "1"}
    assert decide(proofs, "_prove_expression", mode="evaluates", **data)[0] is False
    assert decide(proofs, "_prove_expression", mode="equals", expected="1", **data)[0] is None


@pytest.mark.parametrize(
    ("snippet", "details", "expected"),
    [
        ("d = {}\nd['a']", {"outcome": "raises", "exception": "KeyError"}, True),
        ("d = {}\nd['a']", {"outcome": "raises", "exception": "ValueError"}, False),
        ("x = 1", {"outcome": "runs"}, True),
        ("print(1 + 2)", {"outcome": "prints", "printed": "3"}, True),
        ("print(1 + 2)", {"outcome": "prints", "printed": "4"}, False),
        ("x = [1]\nx.append(2)", {"outcome": "value", "expr": "x", "expected": "[1, 2]"}, True),
        ("raise OSError('no')", {"outcome": "value", "expr": "x", "expected": "1"}, False),  # the state is never reached
        ("def (", {"outcome": "runs"}, None),
    ],
)
def test_snippet(proofs: dict[str, Any], snippet: str, details: dict[str, str], expected: bool | None) -> None:
    state, reason = decide(proofs, "_prove_snippet", snippet=snippet, details=details)
    assert state is expected, reason


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ("def check():\n    assert 1 + 1 == 2\n", True),
        ("def check():\n    assert 1 + 1 == 3, 'no'\n", False),
        ("async def check():\n    assert False\n", False),
        ("def check():\n    raise AssertionError('not an assert statement')\n", None),
        ("import json\n\n\ndef check():\n    json.loads('{bad')\n    assert True\n", None),
    ],
)
def test_a_generated_check_is_false_only_by_its_own_assert(proofs: dict[str, Any], check: str, expected: bool | None) -> None:
    state, reason = decide(proofs, "_prove_generated", generated=check)
    assert state is expected, reason


KEYWORD_LIBRARY = """
from pydantic import BaseModel, ConfigDict


class Ignoring(BaseModel):
    name: str


class Forbidding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


def swallow(a, **kwargs):
    return a
"""


def test_a_keyword_the_library_accepts_and_ignores_is_no_evidence(proofs: dict[str, Any], tmp_path: Path, monkeypatch) -> None:
    """Soundness: ``Model(unknown_field='x')`` evaluates because pydantic drops unknown fields, and a ``**kwargs`` callable
    takes any keyword; neither says anything about the keyword, so the option stays undecided (not consistent)."""
    (tmp_path / "kwlib_xyz.py").write_text(KEYWORD_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = {"names": {}, "free": ["kwlib_xyz"], "setup": "", "mode": "evaluates"}
    state, reason = decide(proofs, "_prove_expression", expr="kwlib_xyz.Ignoring(name='a', unknown_field='x')", **data)
    assert state is None and "unknown_field" in reason
    assert decide(proofs, "_prove_expression", expr="kwlib_xyz.Ignoring(name='a')", **data)[0] is True
    assert decide(proofs, "_prove_expression", expr="kwlib_xyz.Forbidding(name='a', unknown_field='x')", **data)[0] is False
    assert decide(proofs, "_prove_expression", expr="kwlib_xyz.swallow(1, anything=2)", **data)[0] is None
    accepts = {"subject": "kwlib_xyz.swallow", "names": {}, "expect_accepted": True, "value_source": None, "named_only": False}
    state, reason = decide(proofs, "_prove_accepts", param="anything", **accepts)
    assert state is None and "**kwargs" in reason
    assert decide(proofs, "_prove_accepts", param="a", **accepts)[0] is True
