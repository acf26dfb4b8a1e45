"""The atom claim kinds: extraction from question and option wording only, on standard-library examples."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.claims.claim_kinds import question_command, role_bases, type_name
from retrieval_pipeline.core.verifier.claims.claims import ATOM_KINDS, CLAIM_KINDS, analyse_question
from retrieval_pipeline.core.verifier.claims.compound_claims import clean_name_option, prose_atoms
from retrieval_pipeline.core.verifier.decompose import decompose


def one(question: str, option: str):
    return decompose("c", question, {"A": option})[0]


def test_every_new_kind_is_a_claim_kind_and_keeps_the_question():
    assert ATOM_KINDS <= set(CLAIM_KINDS)
    claim = one("What does `int('x')` do?", "`int('x')` raises `ValueError`")
    assert claim.question == "What does `int('x')` do?"


@pytest.mark.parametrize(
    ("option", "kind", "check", "key", "value"),
    [
        ("`int('x')` raises `ValueError`", "raises", "raises", "exception", "ValueError"),
        ("Calling `json.loads('{')` raises json.JSONDecodeError.", "raises", "raises", "exception", "json.JSONDecodeError"),
        ("`len('abc')` returns 3", "returns", "returns", "expected", "3"),
        ("`json.loads('[1]')` returns a `list`", "returns", "returns", "type", "list"),
    ],
)
def test_an_option_that_states_what_a_call_does(option, kind, check, key, value):
    claim = one("What happens?", option)
    assert claim.kind == kind and claim.decides == "truth"
    (atom,) = claim.details["atoms"]
    assert atom["check"] == check and atom[key] == value


def test_a_type_answers_what_a_call_returns_and_a_literal_stays_a_value():
    typed = decompose("c", "What does `json.loads('[1]')` return?", {"A": "a `list`", "B": "An instance of `dict`", "C": "[1]"})
    assert [c.kind for c in typed] == ["returns", "returns", "expression"]
    assert typed[0].details["atoms"][0]["type"] == "list" and typed[1].details["atoms"][0]["type"] == "dict"
    assert typed[0].details["free_names"] == ["json"]
    assert type_name("a `pathlib.Path` object") == "pathlib.Path"
    assert type_name("An empty list") is None and type_name("a thing") is None  # not a type name


def test_the_default_of_a_member():
    claim = one("What is the default of the `indent` parameter of `json.dumps`?", "None")
    assert claim.kind == "attribute" and claim.decides == "truth"
    assert claim.details["atoms"] == [{"check": "default", "owner": "json.dumps", "name": "indent", "expected": "None"}]
    dotted = one("What is the default value of `socketserver.TCPServer.allow_reuse_address`?", "False")
    assert dotted.details["atoms"][0] | {} == {"check": "default", "owner": "socketserver.TCPServer", "name": "allow_reuse_address",
                                               "expected": "False"}  # fmt: skip
    stated = one("Which is right?", "`socketserver.TCPServer.allow_reuse_address` defaults to `False`.")
    assert stated.kind == "attribute" and stated.details["atoms"][0]["owner"] == "socketserver.TCPServer"
    assert one("What is the default of `x`?", "3").kind != "attribute"  # no owner named: nothing to check


def test_required_and_optional_parameters():
    question = "Besides the file object, which argument is required when constructing a `csv.DictWriter`?"
    claims = decompose("c", question, {"A": "fieldnames", "B": "dialect", "C": "None of the above"})
    assert [c.kind for c in claims] == ["param_required", "param_required", "none_of_the_above"]
    assert claims[0].details["atoms"] == [{"check": "required", "owner": "csv.DictWriter", "name": "fieldnames", "required": True}]
    optional = one("Which parameter of `subprocess.run` is optional?", "check")
    assert optional.details["atoms"][0]["required"] is False
    stated = one("What is true of `json.dumps`?", "`indent` is optional.")
    assert stated.kind == "param_required" and stated.details["atoms"][0]["name"] == "indent"


def test_enum_members():
    claims = decompose("c", "Which member of the `http.HTTPStatus` enum means 404?", {"A": "NOT_FOUND", "B": "HTTPStatus.GONE"})
    assert [c.kind for c in claims] == ["enum_member", "enum_member"]
    assert [c.details["atoms"][0]["member"] for c in claims] == ["NOT_FOUND", "GONE"]
    assert claims[0].decides == "necessary"  # the member existing does not show it means 404
    asked = one("Which of these is a valid member of `signal.Signals`?", "SIGTERM")
    assert asked.kind == "enum_member" and asked.decides == "truth"


def test_subclasses():
    claims = decompose("c", "Which class does `json.JSONDecodeError` inherit from?", {"A": "ValueError", "B": "KeyError"})
    assert [c.details["atoms"][0] for c in claims] == [
        {"check": "subclass", "path": "json.JSONDecodeError", "base": "ValueError"},
        {"check": "subclass", "path": "json.JSONDecodeError", "base": "KeyError"},
    ]
    builtin = one("Which class does `collections.OrderedDict` inherit from?", "dict")
    assert builtin.kind == "subclass"  # a builtin base, not an attribute `OrderedDict.dict`
    stated = one("Which is right?", "`bool` is a subclass of `int`")
    assert stated.kind == "subclass" and stated.details["atoms"][0] == {"check": "subclass", "path": "bool", "base": "int"}


def test_command_line_flags_of_the_questions_command():
    assert question_command("When deploying with `adk deploy cloud_run`, which flag?") == ["adk", "deploy", "cloud_run"]
    assert question_command("What does `json.dumps(x)` return?") is None  # Python, not a command
    assert question_command("Which `--flag`?") is None  # one word
    claims = decompose("c", "Which flag of `pip install` upgrades?", {"A": "--upgrade", "B": "`-U`", "C": "upgrade"})
    assert [c.kind for c in claims[:2]] == ["cli_option", "cli_option"] and claims[2].kind != "cli_option"
    assert claims[1].details["atoms"] == [{"check": "cli_option", "command": ["pip", "install"], "option": "-U"}]
    assert claims[0].decides == "necessary"


def test_role_bases_from_the_noun_after_which():
    assert role_bases("Which plugin would you use to log?") == ["BasePlugin"]
    assert role_bases("Which handlers are there?") == ["BaseHandlers", "BaseHandler"]
    assert role_bases("Which agent class talks to a remote agent?") == ["BaseAgent"]
    assert role_bases("Which class should you inherit from?") == []  # generic nouns and verbs name no role
    assert role_bases("Which Google GenAI type represents content?") == []
    assert role_bases("How do you log?") == []
    claim = one("Which handler writes to a rotating file?", "RotatingFileHandler")
    assert claim.kind == "exists" and claim.details["role_bases"] == ["BaseHandler"]


def test_an_alternative_in_parentheses_makes_the_option_disjunctive():
    assert clean_name_option("LoggingPlugin (or a custom plugin inheriting BasePlugin).") == ("LoggingPlugin", True)
    assert clean_name_option("`StreamHandler` (e.g. for stderr)") == ("StreamHandler", True)
    assert clean_name_option("StreamHandler") == ("StreamHandler", False)
    claim = one("Which handler writes to stderr?", "StreamHandler (or a custom handler).")
    assert claim.kind == "exists" and claim.details["disjunctive"] is True


def frame(question: str):
    return analyse_question(question)


def test_prose_atoms_follow_the_shape_of_each_span():
    question = "How do you make `json.dumps` sort the keys of its output?"
    atoms, _ = prose_atoms("Pass `sort_keys=True` to `json.dumps`.", frame(question))
    assert atoms == [{"check": "member", "owner": "json.dumps", "name": "sort_keys"}, {"check": "exists", "path": "json.dumps"}]
    atoms, _ = prose_atoms("Set `row_factory` on the `sqlite3.Connection`.", frame("How do you get rows by name?"))
    assert atoms[0] == {"check": "member", "owner": "sqlite3.Connection", "name": "row_factory"}
    atoms, _ = prose_atoms("Call `Counter(items).most_common()` first.", frame("How?"))
    assert atoms == [{"check": "accepts", "callee": "Counter", "keywords": []}]  # the method of a call result is not guessed
    atoms, _ = prose_atoms("Set the environment variable `PYTHONHASHSEED=0`.", frame("How do you fix hashing?"))
    assert atoms == [{"check": "env_var", "name": "PYTHONHASHSEED"}]
    atoms, _ = prose_atoms("Use the `--upgrade` flag with `pip install`.", frame("How?"))
    assert atoms == [{"check": "cli_option", "command": ["pip", "install"], "option": "--upgrade"}]


def test_prose_atoms_bind_a_module_named_in_the_option():
    atoms, bindings = prose_atoms("Import `importlib.metadata` and call `metadata.version()`.", frame("How do you read a version?"))
    assert atoms == [{"check": "exists", "path": "importlib.metadata"}, {"check": "exists", "path": "metadata.version"}]
    assert bindings["metadata"] == {"path": "importlib.metadata"}


@pytest.mark.parametrize(
    "option",
    [
        "Do not pass `sort_keys` to `json.dumps`.",  # negated
        "`json.dump` is deprecated; use `json.dumps` instead.",  # retired
        "Access `self.sort_keys` in the encoder.",  # a placeholder object
        "Import it in `main.py`.",  # a file name
        "It keeps only the last `N` items.",  # a value, not a member: no owner says so
        "It is stored in a dictionary.",  # no code at all
    ],
)
def test_prose_that_negates_or_names_no_checkable_code_gets_no_atoms(option):
    atoms, _ = prose_atoms(option, frame("How does `json.dumps` order keys?"))
    assert atoms == []


def test_a_lower_case_name_is_a_member_only_when_the_option_or_question_says_so():
    question = frame("You want to write JSON with `json.dumps`. What do you do?")
    assert prose_atoms("Pass a number as the `indent` argument.", question)[0] == [
        {"check": "member", "owner": "json.dumps", "name": "indent"}
    ]
    assert prose_atoms("Add `indent` to the call.", question)[0] == []  # nothing says it is a member
    params = frame("Which `json.dumps` parameters control spacing?")
    assert prose_atoms("1) `indent`, 2) `separators`", params)[0] == [
        {"check": "member", "owner": "json.dumps", "name": "indent"},
        {"check": "member", "owner": "json.dumps", "name": "separators"},
    ]


def test_prose_claims_are_necessary_and_an_or_makes_them_disjunctive():
    claims = decompose(
        "c",
        "How do you get result rows as mappings from `sqlite3`?",
        {"A": "Set `row_factory` on the `sqlite3.Connection`.", "B": "Use `sqlite3.Row` or a custom factory."},
    )
    assert [c.kind for c in claims] == ["compound", "compound"]
    assert claims[0].decides == "necessary" and claims[0].details["disjunctive"] is False
    assert claims[1].details["disjunctive"] is True
    assert claims[0].details["free_names"] == ["sqlite3"]


def test_a_call_sketch_with_placeholders_checks_keywords_only():
    claim = one("How do you build it?", "argparse.ArgumentParser(prog=..., add_help=my_flag)")
    assert claim.kind == "compound"
    assert claim.details["atoms"] == [{"check": "accepts", "callee": "argparse.ArgumentParser", "keywords": ["prog", "add_help"]}]
    runnable = one("How do you build it?", "argparse.ArgumentParser(prog='x')")
    assert runnable.kind == "expression"  # no placeholder: it is run as before
