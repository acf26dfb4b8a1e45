"""Offline proofs really pass for true options and fail cleanly (recorded assertion) for false ones."""

from __future__ import annotations

import pytest

from retrieval_pipeline.core.services.sandbox.bubblewrap import run_pytest, run_pytest_batch
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.decompose import decompose
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver, parse_evidence
from retrieval_pipeline.core.verifier.verdicts.verdict import option_evidence

# (question, option text, expected state) over Python 3.11's stdlib
CASES = [
    ("Which is the correct import statement for `OrderedDict`?", "from collections import OrderedDict", "true"),
    ("Which is the correct import statement for `Mapping`?", "from collections import Mapping", "false"),
    ("Which is the correct import statement for `Mapping`?", "from nosuchmodule_xyz import Mapping", "false"),
    ("Which keyword argument makes `json.dumps` sort keys?", "sort_keys", "consistent"),
    ("Which keyword argument makes `json.dumps` sort keys?", "order_keys", "false"),
    ("Which keyword argument sets the padding value used by `itertools.zip_longest`?", "fillvalue", "consistent"),
    ("Which keyword argument sets the padding value used by `itertools.zip_longest`?", "fill", "false"),
    ("Which of these is NOT an accepted keyword argument of the `datetime.timedelta` constructor?", "months", "true"),
    ("Which of these is NOT an accepted keyword argument of the `datetime.timedelta` constructor?", "weeks", "false"),
    ("What does `bisect.bisect_left([1, 2, 2, 3], 2)` return?", "1", "true"),
    ("What does `bisect.bisect_left([1, 2, 2, 3], 2)` return?", "3", "false"),
    ("What does `statistics.median([1, 3, 2, 4])` return?", "It raises StatisticsError", "false"),
    ("On Linux, what does `os.path.join('/etc', '/tmp', 'x')` return?", "'/tmp/x'", "true"),
    ("What exception does `json.loads('{bad')` raise?", "json.JSONDecodeError", "true"),
    ("What exception does `json.loads('{bad')` raise?", "KeyError", "false"),
    ("Which `time` function returns the processor time?", "time.clock()", "false"),
    ("Which `time` function returns the processor time?", "time.process_time()", "consistent"),
    ("A function is decorated with `functools.lru_cache`. Which call reports hits?", "func.cache_info()", "consistent"),
    ("A function is decorated with `functools.lru_cache`. Which call reports hits?", "func.stats()", "false"),
    ("Which expression creates a `collections.deque` of at most 3 items?", "deque(size=3)", "false"),
    ("Which expression creates a `collections.deque` of at most 3 items?", "deque(maxlen=3)", "consistent"),
]


@pytest.fixture(scope="module")
def decided():
    """Every case's proof, run in one batch sandbox as the verifier runs a question's proofs (one option letter each).

    ``test_batch.py`` holds a batch's results equal to each proof's alone; one sandbox instead of 21 saves
    about 10 s of the suite.
    """
    from retrieval_pipeline_tests.core.conftest import require_sandbox  # noqa: PLC0415

    require_sandbox()
    proofs = [OfflineProver().prove(decompose("c", q, {f"L{i}": o})[0]) for i, (q, o, _) in enumerate(CASES)]
    assert all(p.status == "proof" and p.filename == f"test_option_L{i}.py" for i, p in enumerate(proofs))
    return list(zip(proofs, run_pytest_batch([(p.test_source, p.filename) for p in proofs], SandboxSettings(timeout_s=60))))


@pytest.mark.parametrize("number", range(len(CASES)), ids=[f"{c[1]}->{c[2]}" for c in CASES])
def test_offline_proof_decides_the_option(decided, number):
    proof, execution = decided[number]
    expected = CASES[number][2]
    assert execution is not None
    evidence = option_evidence(proof, execution)
    assert evidence.state == expected, (evidence.note, execution.stdout[-1500:])
    if expected == "false":
        # false is a deliberate assertion the test recorded, not a crash
        assert execution.outcome == "failed" and parse_evidence(execution.artifacts)["option_true"] is False
    else:
        assert execution.passed


def test_unknown_claims_get_no_proof():
    claim = decompose("c", "How is data persisted?", {"A": "It is kept in RAM."})[0]
    proof = OfflineProver().prove(claim)
    assert proof.status == "unverifiable_offline" and proof.test_source is None


def test_a_crashing_proof_leaves_the_option_undecided(sandbox):
    claim = decompose("c", "What does `bisect.bisect_left([1], 1)` return?", {"A": "0"})[0]
    proof = OfflineProver().prove(claim)
    broken = proof.test_source.replace("def test_option_A", "import nosuchmodule_xyz\n\n\ndef test_option_A")
    execution = run_pytest(broken, proof.filename, sandbox)
    assert execution.outcome == "error"
    assert option_evidence(proof, execution).state == "undecided"
