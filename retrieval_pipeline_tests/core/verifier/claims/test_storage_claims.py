"""Claims about where a class keeps its data ("How is session data persisted with `X`?").

Extraction from question and option wording only; the ``mentions`` and ``holds`` atoms on Python's own classes,
whose sources say what they use: ``shelve`` pickles into a ``dbm`` file, ``sqlite3`` is SQLite,
``collections.OrderedDict`` touches no storage, ``http.cookiejar.CookieJar()`` keeps its cookies in a dict
(``self._cookies = {}``), and ``collections.Counter()`` *is* a dict but holds none in its attributes.
"""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.verifier.claims.compound_claims import STORAGE_TECHNOLOGIES
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.atom_proofs import ATOM_SOURCE
from retrieval_pipeline.core.verifier.proofs.proof_source import PRELUDE_SOURCE

QUESTION = "When using `shelve.Shelf`, how is the data persisted?"


def one(question: str, option: str):
    return decompose("c", question, {"A": option})[0]


def checks(claim) -> list[tuple[str, str | None]]:
    return [(a["check"], a.get("what")) for a in claim.details.get("atoms") or []]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("It is stored in a SQLite database.", [("mentions", "SQLite")]),
        ("It is saved to a local JSON file.", [("mentions", "a file")]),
        ("It is uploaded to Google Cloud Storage.", [("mentions", "Google Cloud Storage")]),
        ("It is kept in a Python dictionary in RAM and lost when the process exits.", [("holds", None)]),
        ("It is written to a SQLite file.", [("mentions", "SQLite"), ("mentions", "a file")]),  # both must hold
    ],
)
def test_each_named_storage_becomes_an_atom(option, expected):
    claim = one(QUESTION, option)
    assert claim.kind == "compound" and claim.decides == "necessary"  # using SQLite does not show the data goes there
    assert checks(claim) == expected
    assert claim.details["free_names"] == ["shelve"]


@pytest.mark.parametrize(
    ("question", "option"),
    [
        (QUESTION, "It is not stored in a SQLite database."),  # negated
        (QUESTION, "It is stored in SQLite or Redis."),  # an alternative
        (QUESTION, "It is compressed before it is stored."),  # no storage named
        ("What does `shelve.Shelf` return for a missing key?", "It is stored in a SQLite database."),  # no storage question
        ("How is the data persisted?", "It is stored in a SQLite database."),  # no class named
    ],
)
def test_no_storage_claim(question, option):
    claim = one(question, option)
    assert not any(check in ("mentions", "holds") for check, _ in checks(claim))


def test_every_technology_has_code_patterns():
    assert all(patterns for _, _, patterns in STORAGE_TECHNOLOGIES)
    assert len({what for what, _, _ in STORAGE_TECHNOLOGIES}) == len(STORAGE_TECHNOLOGIES)


@pytest.fixture(scope="module")
def helpers():
    namespace: dict[str, object] = {"__name__": "storage_atoms_under_test"}
    exec(compile(PRELUDE_SOURCE + "\n" + ATOM_SOURCE, "<atoms>", "exec"), namespace)
    return namespace


def technology(what: str) -> list[str]:
    return next(list(patterns) for name, _, patterns in STORAGE_TECHNOLOGIES if name == what)


@pytest.mark.parametrize(
    ("path", "what", "state"),
    [
        ("shelve.DbfilenameShelf", "a file", "true"),
        ("sqlite3.Connection", "SQLite", "true"),
        ("collections.OrderedDict", "SQLite", "false"),
        ("collections.OrderedDict", "Google Cloud Storage", "false"),
    ],
)
def test_mentions_reads_the_modules_behind_a_class(helpers, path, what, state):
    module = path.rsplit(".", 1)[0]
    names = {path.split(".")[0]: ("path", module.split(".")[0])}
    found, reason = helpers["_check"]({"check": "mentions", "path": path, "patterns": technology(what), "what": what}, names)
    assert found == state, reason


def test_holds_finds_a_dict_in_an_instance_and_is_never_false(helpers):
    check = helpers["_check"]
    jar = check({"check": "holds", "path": "http.cookiejar.CookieJar", "type": "dict"}, {"http": ("path", "http")})
    assert jar[0] == "true" and "_cookies" in jar[1]
    assert check({"check": "holds", "path": "collections.Counter", "type": "dict"}, {"collections": ("path", "collections")})[0] == (
        "undecided"
    )  # fmt: skip
    assert check({"check": "holds", "path": "shelve.Shelf", "type": "dict"}, {"shelve": ("path", "shelve")})[0] == "undecided"  # needs args
