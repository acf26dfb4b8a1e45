"""Generated proofs are valid Python whatever the option text, letter or case id holds.

Every text of a claim enters a proof as an ASCII literal; the docstring evaluates back to its text.
"""

from __future__ import annotations

import ast

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex, ProbeCoverage
from retrieval_pipeline.core.verifier.proofs.proof_source import docstring, literal, safe_letter
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.verify import verify_question

#: Option texts that broke, or could break, a proof's source.
NASTY_OPTIONS = [
    "it's\"",  # ends in a double quote: closed the old docstring early
    '"it\'s"',  # a literal whose repr ends in a double quote
    'A match object for "it\'s"',
    '"',
    "'",
    '"""',
    "'''",
    'say """hi""" twice',
    "a'''b",
    "'''\"\"\"",
    "\\",
    "ends with a backslash\\",
    "\\N{BULLET}",
    "\\x41\\u0042\\",
    "C:\\new\\table",
    "naïve café — 日本語 🚀",
    "\u00e9\u0301 combining",
    "lone surrogate \ud800",
    "sep\u2028para\u2029graph",
    "line1\nline2",
    "\r\n",
    "tab\tcr\rff\x0cvt\x0b",
    "nul\x00byte",
    "bell\x07 esc\x1b del\x7f",
    "{braces} {0} {{x}} {doc}",
    "%s %(x)s",
    "",
    "   ",
    "sort_keys='a' #",  # a kwarg value with a comment: was pasted into code as-is
    'sort_keys="it\'s" # "',
    "delete=False  # '''",
    'from os import path  # "',
    "from collections import OrderedDict\\",
    "import json\n",
    '`json.dumps`"',
    'None of the above"',
    'deque(maxlen=3)"',
    "deque(maxlen='\\'')",
    'deque([1, 2], 3)  # """',
    "1e999",
    "-0.0",
    "b'\\xff\"'",
    "{'k': \"v'\"}",
    'run_async()"',
    'LlmAgent"',
    'types.Part"',
    "async def run(self, *, a: str = \"\\\"\", b='\\'') -> None:",
    'It raises KeyError"',
    "It raises `json.JSONDecodeError`\\",
    # plain names: their letters, case ids and the index's reasons (quotes, backslash, non-ASCII) are the nasty part
    "Broken",
    "Mentioned",
    "LlmAgent",
    "types.Part",
    "func.cache_info()",
    "runner.run_async()",
]

#: Questions that route options to every claim kind.
QUESTIONS = [
    "Which is the correct import statement for the `OrderedDict` class?",
    "Which keyword argument makes `json.dumps` sort keys?",
    "Which of these is NOT an accepted keyword argument of the `datetime.timedelta` constructor?",
    "What does `'it' + chr(39) + 's'` return?",
    "What exception does `json.loads('{bad')` raise?",
    "What does `re.search(r'\\w+', \"it's\")` return?",
    "Which class should you inherit from?",
    "A function is decorated with `functools.lru_cache`. Which call reports hits and misses?",
    "Which expression creates a `collections.deque` of at most 3 items?",
    "In a `PluginManager`, what is the correct signature for `run`?",
    'How many characters long is `uuid.uuid4().hex  # "`?',
]

NASTY_LETTERS = ["A", 'B"', "é", "", "1", "a b", "\n", "../x", "\\"]
NASTY_CASE_IDS = ["suite:case", 'suite:"""case', "suite:it's\"", "suite:\\", "suite:日本\n"]


def index() -> LibraryIndex:
    return LibraryIndex(
        "lib.pkg", "lib-pkg", "1.0", "3.11", "python",
        names={"LlmAgent": ["lib.pkg.agents.LlmAgent"], "PluginManager": ["lib.pkg.plugins.PluginManager"]},
        module_aliases={"types": "lib.pkg.types"},
        source_defs={"Nasty\"Name": "lib.pkg.x", "Broken": "lib.pkg.broken"},
        unprobed_mentions={"Mentioned": "lib.pkg.broken"},
        coverage=ProbeCoverage(3, 2, failed={"lib.pkg.broken": "ImportError: it's \"broken\" \\ — ünïcode"}),
    )  # fmt: skip


def proofs():
    provers = [OfflineProver(), OfflineProver(index())]
    for qi, question in enumerate(QUESTIONS):
        for oi, option in enumerate(NASTY_OPTIONS):
            letter = NASTY_LETTERS[(qi + oi) % len(NASTY_LETTERS)]
            case_id = NASTY_CASE_IDS[(qi * 7 + oi) % len(NASTY_CASE_IDS)]
            for claim in decompose(case_id, question, {letter: option, "E": "None of the above"}):
                for prover in provers:
                    yield claim, prover.prove(claim)


def test_every_generated_proof_compiles_and_its_docstring_is_the_claim():
    kinds, compiled = set(), 0
    for claim, proof in proofs():
        if proof.test_source is None:
            continue
        source = proof.test_source
        assert source.isascii(), (claim.option_text, claim.kind)
        try:
            tree = ast.parse(source)
            compile(tree, proof.filename, "exec")
        except SyntaxError as exc:  # pragma: no cover - the failure message is the point
            pytest.fail(f"{claim.kind} proof for option {claim.option_text!r} does not compile: {exc}")
        doc = f"Proof for case {claim.case_id!r}, option {claim.letter!r}: {claim.hypothesis}"
        assert ast.get_docstring(tree, clean=False) == doc
        assert proof.filename.isascii() and "/" not in proof.filename and proof.filename.endswith(".py")
        compiled += 1
        kinds.add(claim.kind)
    assert compiled > 100
    # the atom proofs (prose that names code, a type as the answer) compile from the same nasty texts too
    assert kinds == {"import", "exists", "signature_param", "constructor_kwarg", "expression", "compound", "returns"}


@pytest.mark.parametrize("value", [*NASTY_OPTIONS, ["a'\"", {"k": ("v\\", None, True)}], ("unprobed", ('N"', "r\u2028"))])
def test_literals_and_docstrings_round_trip(value):
    assert ast.literal_eval(literal(value)) == value and literal(value).isascii()
    if isinstance(value, str):
        assert ast.literal_eval(docstring(value)) == value and docstring(value).isascii()


def test_option_letters_give_distinct_ascii_names():
    names = [safe_letter(letter) for letter in [*NASTY_LETTERS, "é", "è", "A_", "A"]]
    assert all(n.isascii() and n.replace("_", "a").isalnum() for n in names)
    assert safe_letter("A") == "A" and safe_letter("é") != safe_letter("è")


def test_nasty_options_run_in_the_sandbox(sandbox):
    """Options the old proofs could not even compile now decide: A is true, the others false."""
    verdict = verify_question(
        'mc:"""it\'s"', "What does `'it' + chr(39) + 's'` return?",
        {'A"': '"it\'s"', "é": "'it\"s'", "\\": "'it\\x27s '", "E": "None of the above"}, 'A"',
        OfflineProver(), sandbox,
    )  # fmt: skip
    states = {e.letter: e.state for e in verdict.evidence}
    assert states == {'A"': "true", "é": "false", "\\": "false", "E": "false"}, [e.note for e in verdict.evidence]
    assert verdict.verdict == "Valid"
    kwarg = verify_question("c", "Which keyword argument makes `json.dumps` sort keys?",
                            {"A": "sort_keys=True  # \"", "B": "order_keys='a' #"}, "A", OfflineProver(), sandbox)  # fmt: skip
    assert {e.letter: e.state for e in kwarg.evidence} == {"A": "consistent", "B": "false"}
