"""The atom proofs: each atom claim kind decided in the sandbox against Python's own library.

Every expected state below comes from Python's documentation, not from a run of the verifier: ``int('x')``
raises ``ValueError``; ``json.dumps``'s ``indent`` defaults to ``None``; ``csv.DictWriter(f, fieldnames, ...)``
needs ``fieldnames``; ``http.HTTPStatus.NOT_FOUND`` exists; ``json.JSONDecodeError`` subclasses ``ValueError``;
``logging.Handler.__init__`` assigns ``self.formatter``; ``python-dotenv``'s ``dotenv list`` has ``--format``.
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass, field

import pydantic
import pytest

from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest, run_pytest_batch
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver, parse_evidence
from retrieval_pipeline.core.verifier.verdicts.verdict import option_evidence

# (question, option, expected state)
CASES = [
    ("What happens?", "`int('x')` raises `ValueError`", "true"),
    ("What happens?", "`int('x')` raises `KeyError`", "false"),
    ("What happens?", "`int('3')` raises `ValueError`", "false"),  # it returns 3
    ("What happens?", "`len('abc')` returns 3", "true"),
    ("What does `json.loads('[1]')` return?", "a `list`", "true"),
    ("What does `json.loads('[1]')` return?", "a `dict`", "false"),
    ("What does `json.loads('[1')` return?", "a `list`", "false"),  # it raises
    ("What is the default of the `indent` parameter of `json.dumps`?", "None", "true"),
    ("What is the default of the `indent` parameter of `json.dumps`?", "4", "false"),
    ("What is the default value of `socketserver.TCPServer.allow_reuse_address`?", "False", "true"),
    ("What is the default value of `socketserver.TCPServer.allow_reuse_address`?", "True", "false"),
    ("Besides the file object, which argument is required when constructing a `csv.DictWriter`?", "fieldnames", "true"),
    ("Besides the file object, which argument is required when constructing a `csv.DictWriter`?", "dialect", "false"),
    ("Besides the file object, which argument is required when constructing a `csv.DictWriter`?", "columns", "false"),
    ("Which parameter of `subprocess.run` is optional?", "check", "true"),
    ("Which member of the `http.HTTPStatus` enum means 404?", "NOT_FOUND", "consistent"),
    ("Which member of the `http.HTTPStatus` enum means 404?", "MISSING", "false"),
    ("Which of these is a valid member of `signal.Signals`?", "SIGTERM", "true"),
    ("Which class does `json.JSONDecodeError` inherit from?", "ValueError", "true"),
    ("Which class does `json.JSONDecodeError` inherit from?", "KeyError", "false"),
    ("Which class does `collections.OrderedDict` inherit from?", "dict", "true"),
    ("Which is right?", "`bool` is a subclass of `int`", "true"),
    ("How do you get rows by name?", "Set `row_factory` on the `sqlite3.Connection`.", "consistent"),
    ("How do you get rows by name?", "Set `row_type` on the `sqlite3.Connection`.", "false"),
    ("How do you format records?", "Set `formatter` on the `logging.Handler`.", "consistent"),  # assigned in __init__
    ("How do you format records?", "Set `colour` on the `logging.Handler`.", "false"),
    ("How do you sort keys?", "Pass `sort_keys=True` to `json.dumps`.", "consistent"),
    ("How do you sort keys?", "Pass `order_keys=True` to `json.dumps`.", "undecided"),  # json.dumps takes **kw
    ("How do you read a version?", "Import `importlib.metadata` and call `metadata.version()`.", "consistent"),
    ("How do you read a version?", "Import `importlib.metadata` and call `metadata.release()`.", "false"),
    ("How do you build a parser?", "argparse.ArgumentParser(prog=..., add_help=my_flag)", "consistent"),
    ("How do you build a parser?", "argparse.ArgumentParser(program=..., add_help=my_flag)", "false"),
    ("How do you fix hashing?", "Set the environment variable `PYTHONHASHSEED=0`.", "consistent"),
    ("How do you fix hashing?", "Set the environment variable `RP_NO_SUCH_VARIABLE_XYZ=1`.", "false"),
    ("Which flag of `dotenv list` chooses the output format?", "--format", "consistent"),
    ("Which flag of `dotenv list` chooses the output format?", "--output", "false"),
    ("Which flag of `dotenv nosuch` chooses the output format?", "--format", "undecided"),  # no such subcommand
    ("Which handler writes to stderr?", "`logging.StreamHandler` (or a custom handler).", "consistent"),
]


@pytest.fixture(scope="module")
def decided():
    from retrieval_pipeline_tests.core.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    claims = [decompose("c", q, {f"L{i}": o})[0] for i, (q, o, _) in enumerate(CASES)]
    proofs = [OfflineProver().prove(c) for c in claims]
    assert all(p.status == "proof" for p in proofs), [(p.claim.option_text, p.reason) for p in proofs if p.status != "proof"]
    executions = run_pytest_batch([(p.test_source, p.filename) for p in proofs], SandboxSettings(timeout_s=60))
    return [(p, e, option_evidence(p, e)) for p, e in zip(proofs, executions)]


@pytest.mark.parametrize("number", range(len(CASES)), ids=[f"{c[1][:40]}->{c[2]}" for c in CASES])
def test_the_atom_proof_decides_the_option(decided, number):
    proof, execution, evidence = decided[number]
    expected = CASES[number][2]
    assert execution is not None
    assert evidence.state == expected, (evidence.note, execution.stdout[-1500:])
    assert evidence.prover == "offline" and evidence.decided_by == (None if expected == "undecided" else "offline")
    if expected == "false":  # a deliberate, recorded assertion with the failing atom, never a crash
        record = parse_evidence(execution.artifacts)
        assert execution.outcome == "failed" and record["option_true"] is False
        assert any(a["state"] == "false" for a in record["atoms"])


def test_a_disjunctive_option_is_never_false(sandbox):
    details = {"atoms": [{"check": "exists", "path": "logging.NoSuchHandler"}], "free_names": ["logging"], "bindings": {},
               "decides": "necessary", "disjunctive": True}  # fmt: skip
    claim = Claim("c", "A", "`logging.NoSuchHandler` (or a custom handler).", "compound", "h", None, details)
    proof = OfflineProver().prove(claim)
    execution = run_pytest(proof.test_source, proof.filename, sandbox)
    assert parse_evidence(execution.artifacts)["option_true"] is False  # the check itself failed ...
    evidence = option_evidence(proof, execution)
    assert evidence.state == "undecided" and "alternative" in evidence.note  # ... but the alternative was not checked
    plain = Claim("c", "A", "`logging.NoSuchHandler`", "compound", "h", None, {**details, "disjunctive": False})
    assert option_evidence(OfflineProver().prove(plain), execution).state == "false"


# --------------------------------------------------------------------------------------------------
# The proof-side helpers in this process: pydantic models, dataclasses, "either" readings


class Forbid(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", alias_generator=lambda name: name.upper(), populate_by_name=True)
    size: int
    tags: list[str] = pydantic.Field(default_factory=lambda: ["x"])
    name: str = "n"


class Ignore(pydantic.BaseModel):
    size: int = 1


@dataclass
class Point:
    x: int
    ys: list[int] = field(default_factory=list)


class Colour(enum.Enum):
    RED = 1


def test_named_reads_pydantic_fields_and_its_extra_setting(helpers):
    names, var_kw = helpers["_named"](Forbid)
    assert {"size", "tags", "name", "SIZE", "TAGS", "NAME"} <= set(names) and var_kw is False  # forbid: nothing else
    assert helpers["_named"](Ignore)[1] is True  # ignore: other keywords are dropped silently, so not "rejected"
    assert helpers["_named"](Point) == (["x", "ys"], False)


def test_defaults_of_fields_and_parameters(helpers):
    default_of = helpers["_default_of"]
    assert default_of(Forbid, "size") == ("required", None)
    assert default_of(Forbid, "tags") == ("value", ["x"]) and default_of(Forbid, "name") == ("value", "n")
    assert default_of(Point, "x") == ("required", None) and default_of(Point, "ys") == ("value", [])
    assert default_of(__import__("json").dumps, "indent") == ("value", None)
    assert default_of(Colour, "nothing") is None


def test_members_and_accepts_on_models(helpers):
    check = helpers["_check"]
    names = {"Forbid": ("path", f"{__name__}.Forbid")}
    assert helpers["_member"](Forbid, "size") == "an attribute"
    assert check({"check": "accepts", "callee": "Forbid", "keywords": ["size", "TAGS"]}, names)[0] == "true"
    state, reason = check({"check": "accepts", "callee": "Forbid", "keywords": ["colour"]}, names)
    assert state == "false" and "does not accept colour" in reason
    ignore = {"Ignore": ("path", f"{__name__}.Ignore")}
    assert check({"check": "accepts", "callee": "Ignore", "keywords": ["colour"]}, ignore)[0] == "undecided"


def test_an_either_name_is_true_if_one_reading_holds_and_false_only_if_all_fail(helpers):
    check = helpers["_check"]
    either = {"point": ("either", [("path", "json"), ("path", f"{__name__}.Point")])}
    assert check({"check": "exists", "path": "point.dumps"}, either)[0] == "true"  # the module reading has it
    assert check({"check": "member", "owner": "point", "name": "ys"}, either)[0] == "true"  # the class reading has it
    state, reason = check({"check": "exists", "path": "point.nothing_here"}, either)
    assert state == "false" and " / " in reason  # both readings said why


def test_a_head_the_index_proved_absent_is_false_and_an_unresolvable_one_undecided(helpers):
    check = helpers["_check"]
    missing = {"NoSuch": ("missing", "NoSuch is not defined anywhere in lib")}
    assert check({"check": "exists", "path": "NoSuch"}, missing)[0] == "false"
    assert check({"check": "exists", "path": "no_such_variable.attr"}, {})[0] == "undecided"
    assert check({"check": "member", "owner": "json", "name": "decoder"}, {})[0] == "true"  # a submodule, imported on demand


def test_the_source_scan_has_a_cpu_budget_not_a_wall_clock_one(helpers, monkeypatch):
    """A search that burns CPU is stopped (undecided); one that waits (a cold disk) is not, however long it waits."""
    monkeypatch.setitem(helpers, "ENV_SCAN_CPU_S", 1)
    with pytest.raises(helpers["_Open"], match="used up its 1 s of CPU time"):
        helpers["_grep"]([sys.executable, "-c", "while True: pass"], [])
    waited = helpers["_grep"]([sys.executable, "-c", "import time; time.sleep(1.5); print('done')"], [])
    assert waited.returncode == 0 and waited.stdout.strip() == "done"


def test_the_standard_library_is_searched_first(helpers):
    import sysconfig  # noqa: PLC0415

    groups = helpers["_scan_roots"]()
    assert os.path.realpath(sysconfig.get_path("stdlib")) in groups[0]
    assert not any(os.path.realpath(p) in groups[0] for p in sys.path if "site-packages" in p)
