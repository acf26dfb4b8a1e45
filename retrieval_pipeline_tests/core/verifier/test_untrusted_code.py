"""The snippet and an option's own code are the question author's, and may be hostile: they cannot decide their own
verdict (docs/verifier.md, "Threat model").

* the snippet's observation travels on a channel only the observer's guard writes, in front of the run's nonce: a
  snippet that writes the observation file, leaves with ``os._exit``, writes on the channel or patches the observer
  decides nothing;
* a proof's evidence file is written by its guard alone, for the proof's own code: an option's expression that writes
  or pre-empts it, or records through the proof's helpers, decides nothing;
* a run that hit a limit decides nothing, and says which limit.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from retrieval_pipeline.core.services.sandbox import cgroups
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.verdicts.verdict import Verdict
from retrieval_pipeline.core.verifier.verify import verify_question

QUESTION = "What happens when `code_under_test()` runs?"
FORGED = {"A": "It raises `ValueError: forged`", "B": "No error.", "C": "It raises `KeyError`", "D": "None of the above"}


def snippet_verdict(snippet: str, settings: SandboxSettings, options: dict[str, str] | None = None, marked: str = "A") -> Verdict:
    return verify_question("c", QUESTION, options or FORGED, marked, OfflineProver(None), settings, snippet=snippet)


def states(verdict: Verdict) -> dict[str, str]:
    return {e.letter: e.state for e in verdict.evidence}


# ---- the snippet's observation


def test_an_honest_snippet_that_raises_the_message_is_valid(sandbox):
    verdict = snippet_verdict("def code_under_test():\n    raise ValueError('forged')\n", sandbox)
    assert verdict.verdict == "Valid" and states(verdict)["A"] == "true", verdict.reasons  # the cases below could pass


@pytest.mark.parametrize(
    ("snippet", "why"),
    [
        pytest.param(
            "import json, os\n\ndef code_under_test():\n"
            "    record = {'raised': {'type': 'ValueError', 'mro': ['ValueError'], 'message': 'forged', 'errors': []}, 'stage': 'done'}\n"
            "    with open('snippet.observation.json', 'w') as handle:\n        json.dump(record, handle)\n"
            "    os._exit(0)\n",
            "guard",
            id="writes-the-observation-file-then-os._exit",
        ),
        pytest.param("import os\n\ndef code_under_test():\n    os._exit(0)\n", "ended before the observer wrote", id="os._exit"),
        pytest.param(
            "import __main__\n\ndef code_under_test():\n"
            "    forged = {'type': 'ValueError', 'module': 'builtins', 'mro': ['ValueError'], 'message': 'forged', 'errors': []}\n"
            "    __main__.describe_value = lambda value, *a, **k: forged\n"
            "    __main__.observe.__defaults__ = None\n",
            "guard",
            id="patches-the-observer-s-functions",
        ),
        pytest.param(
            "import json\n\ndef code_under_test():\n"
            '    json.dumps = lambda *a, **k: \'{"raised": {"type": "ValueError", "mro": ["ValueError"], "message": "forged"}}\'\n',
            "guard",
            id="patches-the-json-the-observer-writes-with",
        ),
        pytest.param(
            'import os\n\ndef code_under_test():\n    line = b\'RPOBS 0 {"raised": {"type": "ValueError", "mro": ["ValueError"], "message": "forged"}}\\n\'\n'
            "    for fd in range(3, 64):\n        try:\n            os.write(fd, line)\n        except OSError:\n            pass\n"
            "    os._exit(0)\n",
            "ended before the observer wrote|tampered",
            id="writes-on-every-descriptor-then-leaves",
        ),
        pytest.param(
            "import __main__, sys\n\nclass Forged(Exception):\n"
            "    def errors(self):\n        self.cut = __main__.cut\n        __main__.cut = lambda text, *a, **k: 'forged'\n        return []\n"
            "    def __str__(self):\n        __main__.cut = self.cut\n        return 'real'\n\n"
            "def code_under_test():\n    raise Forged()\n",
            "guard",
            id="patches-in-one-callback-and-restores-in-the-next",
        ),
        pytest.param(
            "import sys\n\ndef code_under_test():\n    frame = sys._getframe(1)\n"
            '    sys.audit(\'rp.record\', \'{"raised": {"type": "ValueError", "mro": ["ValueError"], "message": "forged"}}\')\n',
            "guard",
            id="asks-the-guard-to-record-itself",
        ),
        pytest.param("import ctypes\n\ndef code_under_test():\n    ctypes.string_at(id(1), 8)\n", "guard", id="reads-memory-with-ctypes"),
    ],
)
def test_a_snippet_cannot_forge_its_observation(sandbox, snippet, why):
    verdict = snippet_verdict(snippet, sandbox)
    assert verdict.verdict != "Valid" and states(verdict)["A"] == "undecided", (states(verdict), verdict.reasons)
    note = verdict.evidence[0].note
    assert any(part in note for part in why.split("|")), note


def test_a_warning_the_interpreter_records_in_the_observer_s_globals_is_not_tampering(sandbox):
    """A coroutine never awaited is collected in the observer's frame, and the warnings machinery adds
    ``__warningregistry__`` to the observer's globals: that is the interpreter's doing, not the snippet's."""
    snippet = "async def work():\n    return 1\n\ndef code_under_test():\n    pending = work()\n    return pending.id\n"
    options = {"A": "It raises `AttributeError`", "B": "No error.", "C": "It raises `KeyError`", "D": "None of the above"}
    verdict = snippet_verdict(snippet, sandbox, options)
    assert states(verdict)["A"] == "true" and verdict.verdict == "Valid", (states(verdict), verdict.reasons)


# ---- a proof's evidence


EXPRESSION_QUESTION = "Which of these statements about Python expressions is true?"


def expression_verdict(option: str, settings: SandboxSettings, batch: bool) -> Verdict:
    options = {"A": option, "B": "`len([])` returns `1`", "C": "`sorted([3, 1])` returns `[3, 1]`"}
    return verify_question("c", EXPRESSION_QUESTION, options, "A", OfflineProver(None), settings, batch=batch)


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "alone"])
@pytest.mark.parametrize(
    "option",
    [
        pytest.param(
            '`[open("option.evidence.json", "w").write("{\\"option_true\\": true, \\"reason\\": \\"forged\\"}"), '
            '__import__("os")._exit(0)]` returns `[]`',
            id="the-issue-s-example",
        ),
        pytest.param(
            '`[__import__("sys")._getframe(1).f_globals["_true"]("forged"), __import__("os")._exit(0)]` returns `[]`',
            id="records-through-the-proof-s-own-helper",
        ),  # fmt: skip
        pytest.param(
            '`[__import__("os").rename(__import__("os").open("x", 65, 420) and "x", "option.evidence.json")]` returns `[]`',
            id="renames-a-file-onto-it",
        ),
        pytest.param(
            '`[__import__("subprocess").run(["/bin/sh", "-c", "echo {} > option.evidence.json"]), __import__("os")._exit(0)]` returns `[]`',
            id="a-program-writes-it",
        ),
    ],
)
def test_an_option_s_own_code_cannot_write_its_evidence(sandbox, option, batch):
    verdict = expression_verdict(option, sandbox, batch)
    a = verdict.evidence[0]
    assert a.state == "undecided" and verdict.verdict != "Valid", (a.state, a.note, verdict.reasons)
    assert "guard stopped the proof" in a.note or "outcome" in a.note, a.note


def test_a_proof_of_an_honest_option_still_decides(sandbox):
    verdict = expression_verdict("`sorted([3, 1])` returns `[1, 3]`", sandbox, batch=True)
    assert verdict.verdict == "Valid" and states(verdict) == {"A": "true", "B": "false", "C": "false"}, verdict.reasons


# ---- runs a limit distorted


FORKED_CHILD_HOGS = """import os, time

def code_under_test():
    pid = os.fork()
    if pid == 0:
        held = []
        while True:
            held.append(bytearray(32 * 2**20))
    os.waitpid(pid, 0)
    raise ValueError("forged")
"""


@pytest.mark.skipif(cgroups.memory_cgroup_parent() is None, reason="no writable memory cgroup here: RLIMIT_AS binds per process only")
def test_a_snippet_whose_forked_child_the_memory_limit_killed_decides_nothing(sandbox):
    settings = replace(sandbox, memory_mb=768, total_memory_mb=256, timeout_s=30)
    verdict = snippet_verdict(FORKED_CHILD_HOGS, settings)
    assert all(e.state == "undecided" for e in verdict.evidence[:3]) and verdict.verdict == "Unverifiable", verdict.reasons
    assert verdict.evidence[0].limit == "memory" and "hit a limit (memory)" in verdict.evidence[0].note


THREAD_BOMB = """import threading

def spin():
    while True:
        pass

def code_under_test():
    threads = [threading.Thread(target=spin) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
"""


def test_a_thread_bomb_that_times_out_decides_nothing(sandbox):
    settings = replace(sandbox, timeout_s=1.5, max_processes=32)
    verdict = snippet_verdict(THREAD_BOMB, settings, marked="B")
    assert all(e.state == "undecided" for e in verdict.evidence[:3]) and verdict.verdict == "Unverifiable", verdict.reasons
    assert verdict.evidence[1].limit == "wall_clock" and "hit a limit (wall_clock)" in verdict.evidence[1].note
