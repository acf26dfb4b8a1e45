"""The verdict cache: a hit is exactly the verdict a fresh run gives; any change that could change a proof misses.

Most tests replace the proving step (:func:`~retrieval_pipeline.core.verifier.verify.prove_question`) with a
counting fake, so they run no sandbox; one proves a tiny standard-library question for real, twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import sqlite3
import sys
import warnings
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.result_cache import RESULTS_FILE, ResultCache, canonical_json
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier import questions as questions_module
from retrieval_pipeline.core.verifier import verify as verify_module
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver
from retrieval_pipeline.core.verifier.questions import check_questions, verdict_frame
from retrieval_pipeline.core.verifier.report import markdown_report, quality_report, run_meta
from retrieval_pipeline.core.verifier.settings import VerifierSettings
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict
from retrieval_pipeline.core.verifier.verdicts.verdict_cache import (
    KEY_ENV,
    NAMESPACE,
    VerdictCache,
    cacheable,
    decode_verdict,
    encode_verdict,
    site_packages,
    source_digest,
    using_verdict_cache,
)
from retrieval_pipeline.core.verifier.verify import VerificationRun, run_verification, verify_question

QUESTION = "Which is the correct import statement for the `dumps` function?"
OPTIONS = {"A": "from json import dumps", "B": "from json import dumpz", "C": "from json import serialise"}


def stdlib_index(python: str = sys.executable) -> LibraryIndex:
    """The index a probe of the standard library gives (nothing indexed), without running the probe."""
    return LibraryIndex(import_name=None, distribution=None, version=None, python_version=platform.python_version(), python=python)


def mc(
    case_id: str = "q:1", question: str = QUESTION, options: dict[str, str] | None = None, answer: str = "A", snippet: str | None = None
):
    extra = {"code_snippet": snippet} if snippet is not None else {}
    return Case(
        case_id, "mc", "multiple_choice", "mc.yaml", 0, question, options=dict(options or OPTIONS), correct_answer=answer, extra=extra
    )


def fake_verdict(case_id: str, options, marked: str, *, outcome: str | None = "passed", prover: str = "offline") -> Verdict:
    """A verdict as the prover would build it: every option evidenced, the marked one true, the others false."""
    evidence = [
        OptionEvidence(
            letter,
            Claim(case_id, letter, text, "import", f"`{text}` works", subject=text, details={"decides": "truth", "parts": ["a", 1]}),
            "proof",
            letter == marked,
            "true" if letter == marked else "false",
            note=f"note {letter}",
            test_source=f"def test_{letter}(): pass\n",
            outcome=outcome,
            exit_code=0,
            duration_s=0.125,
            record={"option_true": letter == marked, "value": 1.5},
            prover=prover,
        )
        for letter, text in options.items()
    ]
    falses = [letter for letter in options if letter != marked]
    return Verdict(case_id, "Valid", marked, [marked], ["fake"], evidence, proven_false=falses, duration_s=0.5)


class CountingProve:
    """Stands in for :func:`prove_question`: records each call and returns :func:`fake_verdict`."""

    def __init__(self, **kwargs) -> None:
        self.calls: list[str] = []
        self.kwargs = kwargs

    def __call__(self, case_id, question, options, marked, prover, settings, **_):
        self.calls.append(case_id)
        return fake_verdict(case_id, options, marked, **self.kwargs)


@pytest.fixture
def prove(monkeypatch) -> CountingProve:
    fake = CountingProve()
    monkeypatch.setattr(verify_module, "prove_question", fake)
    return fake


@pytest.fixture
def cache(tmp_path):
    with VerdictCache.open(tmp_path / "cache") as opened:
        yield opened


def run(cases, cache, index=None, settings=None):
    index = index or stdlib_index()
    return run_verification(
        cases, index=index, sandbox_settings=settings or SandboxSettings(python=Path(index.python)), cache=cache, parallel=1
    )


# -- hits ------------------------------------------------------------------------------------------


def test_a_hit_returns_the_verdict_a_fresh_run_returns_and_proves_nothing(prove, cache):
    cases = [mc("q:1"), mc("q:2", answer="B")]
    first = run(cases, cache)
    assert prove.calls == ["q:1", "q:2"] and first.reused == [] and first.proven == 2 and first.cache_status == "used"
    second = run(cases, cache)
    assert prove.calls == ["q:1", "q:2"], "a hit must not prove again"
    assert second.reused == ["q:1", "q:2"] and second.proven == 0
    assert second.verdicts == first.verdicts
    report = quality_report(first.verdicts, {})
    assert verdict_frame(second.verdicts, report).equals(verdict_frame(first.verdicts, report))


def test_no_cache_proves_every_time(prove):
    run([mc()], None)
    assert run([mc()], None).reused == [] and prove.calls == ["q:1", "q:1"]


@pytest.mark.parametrize(
    "changed",
    [
        mc(question=QUESTION + " "),
        mc(options={**OPTIONS, "B": "from json import dump"}),
        mc(options=dict(reversed(OPTIONS.items()))),
        mc(answer="B"),
        mc(case_id="q:other"),
        mc(snippet="import json"),
    ],
    ids=["question", "option", "option-order", "marked", "case-id", "snippet"],
)
def test_any_change_of_the_question_misses(prove, cache, changed):
    run([mc()], cache)
    again = run([changed], cache)
    assert again.reused == [] and len(prove.calls) == 2


@pytest.mark.parametrize(
    "settings",
    [SandboxSettings(timeout_s=99.0), SandboxSettings(memory_mb=2048), SandboxSettings(max_processes=8), SandboxSettings(cpu_s=5)],
    ids=["timeout", "memory", "processes", "cpu"],
)
def test_a_change_of_sandbox_setting_misses(prove, cache, settings):
    run([mc()], cache, settings=SandboxSettings())
    assert run([mc()], cache, settings=settings).reused == [] and len(prove.calls) == 2


def test_a_change_of_the_verifier_source_misses(prove, tmp_path):
    with ResultCache(tmp_path / RESULTS_FILE) as results:
        run([mc()], VerdictCache(results, source="a" * 64))
        assert run([mc()], VerdictCache(results, source="a" * 64)).reused == ["q:1"]
        assert run([mc()], VerdictCache(results, source="b" * 64)).reused == []
    assert prove.calls == ["q:1", "q:1"]


def test_the_source_digest_covers_every_python_file_of_the_folder(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    before = source_digest(tmp_path, extra=())
    (tmp_path / "notes.txt").write_text("changed\n")
    assert source_digest(tmp_path, extra=()) == before, "only .py files count"
    (tmp_path / "a.py").write_text("x = 2\n")
    edited = source_digest(tmp_path, extra=())
    (tmp_path / "b.py").write_text("")
    assert len({before, edited, source_digest(tmp_path, extra=())}) == 3
    assert source_digest() == source_digest() and len(source_digest()) == 64


def test_the_source_digest_covers_the_whole_verifier_package_and_every_room_of_it():
    """The cache lives in ``verdicts/``, but the key hashes the whole package: an edit in any room is a miss."""
    import retrieval_pipeline.core.verifier as verifier_package
    from retrieval_pipeline.core.verifier.verdicts.verdict_cache import VERIFIER_DIR

    package = Path(verifier_package.__file__).resolve().parent
    assert VERIFIER_DIR == package
    hashed = set(VERIFIER_DIR.rglob("*.py"))
    for room in ("claims", "proofs", "observation", "verdicts", "fixes", "sandbox_side"):
        assert package / room / "__init__.py" in hashed
    assert {package / "verify.py", package / "decompose.py", package / "claims" / "claims.py"} <= hashed


def test_the_source_digest_covers_the_batch_runner_run_inside_the_sandbox():
    from retrieval_pipeline.core.verifier.verdicts.verdict_cache import EXTRA_SOURCES, SANDBOX_DIR

    assert SANDBOX_DIR / "sandbox_side" / "batch_runner.py" in EXTRA_SOURCES and SANDBOX_DIR / "bubblewrap.py" in EXTRA_SOURCES
    assert all(path.is_file() for path in EXTRA_SOURCES)


def test_a_change_of_python_version_misses(prove, cache):
    run([mc()], cache, index=stdlib_index())
    other = dataclasses.replace(stdlib_index(), python_version="3.99.0")
    assert run([mc()], cache, index=other).reused == []


# -- the library's files -----------------------------------------------------------------------------


def fake_env(root: Path, version: str = "1.0", record: str | None = None) -> Path:
    """A venv-like folder holding one installed distribution, ``acme-lib``; returns its interpreter path (never run)."""
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "acme_lib").mkdir(parents=True, exist_ok=True)
    (site / "acme_lib" / "__init__.py").write_text("X = 1\n")
    info = site / f"acme_lib-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "RECORD").write_text(
        record if record is not None else f"acme_lib/__init__.py,sha256=abc,6\nacme_lib-{version}.dist-info/RECORD,,\n"
    )
    (root / "bin").mkdir(exist_ok=True)
    (root / "bin" / "python").write_text("#!/bin/false\n")
    return root / "bin" / "python"


def acme_index(python: Path, version: str = "1.0") -> LibraryIndex:
    return LibraryIndex(import_name="acme_lib", distribution="acme-lib", version=version, python_version="3.11.7", python=str(python),
                        names={"X": ["acme_lib.X"]})  # fmt: skip


def test_an_unchanged_library_hits(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    run([mc()], cache, index=acme_index(python))
    assert run([mc()], cache, index=acme_index(python)).reused == ["q:1"]


def test_an_unchanged_library_hits_in_a_venv_whose_lib64_links_to_lib(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    (tmp_path / "env" / "lib64").symlink_to("lib")  # as python -m venv makes it
    first = run([mc()], cache, index=acme_index(python))
    assert first.cache_status == "used", first.cache_status
    assert run([mc()], cache, index=acme_index(python)).reused == ["q:1"]
    assert site_packages(python) == [tmp_path / "env" / "lib" / "python3.11" / "site-packages"]


def test_a_new_library_version_misses(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    run([mc()], cache, index=acme_index(python))
    fake_env(tmp_path / "env", version="1.1")
    assert run([mc()], cache, index=acme_index(python, version="1.1")).reused == []


def test_a_changed_record_misses(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    run([mc()], cache, index=acme_index(python))
    fake_env(tmp_path / "env", record="acme_lib/__init__.py,sha256=def,6\n")
    assert run([mc()], cache, index=acme_index(python)).reused == []


def test_a_library_file_edited_in_place_misses(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    run([mc()], cache, index=acme_index(python))
    (python.parent.parent / "lib" / "python3.11" / "site-packages" / "acme_lib" / "__init__.py").write_text("X = 22\n")
    assert run([mc()], cache, index=acme_index(python)).reused == []


def test_another_distribution_installed_beside_it_misses(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    run([mc()], cache, index=acme_index(python))
    (python.parent.parent / "lib" / "python3.11" / "site-packages" / "pytest-99.0.dist-info").mkdir()
    assert run([mc()], cache, index=acme_index(python)).reused == []


def test_a_changed_probe_index_misses(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    run([mc()], cache, index=acme_index(python))
    assert run([mc()], cache, index=dataclasses.replace(acme_index(python), names={"Y": ["acme_lib.Y"]})).reused == []


def test_a_library_that_cannot_be_fingerprinted_is_never_cached(prove, cache, tmp_path):
    python = fake_env(tmp_path / "env")
    (python.parent.parent / "lib" / "python3.11" / "site-packages" / "acme_lib-1.0.dist-info" / "RECORD").unlink()
    first = run([mc()], cache, index=acme_index(python))
    second = run([mc()], cache, index=acme_index(python))
    assert second.reused == [] and prove.calls == ["q:1", "q:1"]
    assert first.cache_status is not None and first.cache_status.startswith("not used") and "RECORD" in first.cache_status
    module_only = dataclasses.replace(acme_index(python), distribution=None, version=None)
    assert run([mc()], cache, index=module_only).cache_status.startswith("not used")
    assert cache.cache.count(NAMESPACE) == 0


# -- what is not stored ----------------------------------------------------------------------------


def test_a_second_prover_turns_the_cache_off(prove, cache):
    class Other:
        name = "llm:fake"

    for _ in range(2):
        checked = run_verification([mc()], index=stdlib_index(), cache=cache, fallback=Other(), parallel=1)
    assert checked.reused == [] and prove.calls == ["q:1", "q:1"] and "second" in str(checked.cache_status)


def test_a_prover_other_than_the_offline_one_turns_the_cache_off(prove, cache):
    class Other(OfflineProver):
        name = "other"

    for _ in range(2):
        checked = run_verification([mc()], Other(stdlib_index()), index=stdlib_index(), cache=cache, parallel=1)
    assert checked.reused == [] and prove.calls == ["q:1", "q:1"]


@pytest.mark.parametrize("fake", [CountingProve(outcome="timeout"), CountingProve(outcome="killed"), CountingProve(prover="llm:m")])
def test_a_verdict_a_limit_or_an_llm_shaped_is_proven_again(monkeypatch, cache, fake):
    monkeypatch.setattr(verify_module, "prove_question", fake)
    run([mc()], cache)
    assert run([mc()], cache).reused == [] and fake.calls == ["q:1", "q:1"]


def test_cacheable_rejects_a_bound_limit():
    verdict = fake_verdict("q", OPTIONS, "A")
    assert cacheable(verdict)
    verdict.evidence[1].limit = "memory"
    assert not cacheable(verdict)


def test_the_stored_form_reads_back_equal():
    verdict = fake_verdict("q", OPTIONS, "A")
    assert decode_verdict(encode_verdict(verdict)) == verdict
    with pytest.raises((KeyError, TypeError)):
        decode_verdict({"case_id": "q"})


# -- corrupt entries ---------------------------------------------------------------------------------


def _only_key(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        (key,) = conn.execute("SELECT key FROM results WHERE namespace = ?", (NAMESPACE,)).fetchone()
    return key


def test_a_corrupt_entry_is_recomputed(prove, tmp_path):
    with VerdictCache.open(tmp_path) as cache:
        first = run([mc()], cache)
    with sqlite3.connect(tmp_path / RESULTS_FILE) as conn:
        conn.execute("UPDATE results SET payload = substr(payload, 2) WHERE namespace = ?", (NAMESPACE,))
    with VerdictCache.open(tmp_path) as cache, pytest.warns(CorruptFileWarning, match="corrupt"):
        again = run([mc()], cache)
    assert again.reused == [] and prove.calls == ["q:1", "q:1"] and again.verdicts == first.verdicts
    with VerdictCache.open(tmp_path) as cache:
        assert run([mc()], cache).reused == ["q:1"], "the recomputed verdict is stored again"


def test_an_entry_that_is_not_a_verdict_is_recomputed(prove, tmp_path):
    with VerdictCache.open(tmp_path) as cache:
        run([mc()], cache)
        cache.cache.put(NAMESPACE, _only_key(tmp_path / RESULTS_FILE), {"case_id": "q:1", "verdict": "Valid"})
        with pytest.warns(CorruptFileWarning):
            assert run([mc()], cache).reused == []
    assert prove.calls == ["q:1", "q:1"]


# -- re-verification below other code, and the report --------------------------------------------------


def test_verify_question_uses_the_active_cache(prove, cache):
    prover = OfflineProver(stdlib_index())
    settings = SandboxSettings()
    with using_verdict_cache(cache):
        first = verify_question("q#fix1", QUESTION, OPTIONS, "A", prover, settings)
        second = verify_question("q#fix1", QUESTION, OPTIONS, "A", prover, settings)
    verify_question("q#fix1", QUESTION, OPTIONS, "A", prover, settings)  # outside the block: proven
    assert first == second and prove.calls == ["q#fix1", "q#fix1"]


def test_the_report_says_how_many_were_reused_and_proven():
    verdict = fake_verdict("q:1", OPTIONS, "A")
    verdicts = [verdict, dataclasses.replace(verdict, case_id="q:2")]
    cached = VerificationRun(verdicts, stdlib_index(), "offline", 1.0, [], reused=["q:2"], cache_status="used")
    meta = run_meta(cached, suite="stdlib")
    assert meta["verdict_cache"] == {"status": "used", "reused": 1, "proven": 1, "reused_cases": ["q:2"]}
    assert "1 reused from the verdict cache, 1 proven now" in markdown_report(quality_report(verdicts, meta))
    plain = run_meta(VerificationRun(verdicts, stdlib_index(), "offline", 1.0, []), suite="stdlib")
    assert "verdict_cache" not in plain and "verdict cache" not in markdown_report(quality_report(verdicts, plain))


def test_check_questions_reuses_verdicts_from_the_cache_dir(prove, monkeypatch, tmp_path):
    monkeypatch.setattr(verify_module, "probe_environment", lambda *a, **k: stdlib_index())
    where = {"report_path": tmp_path / "out" / "quality_report.json", "proposals_path": tmp_path / "out" / "fixes.yaml"}
    cases = [mc("q:1"), mc("q:2")]
    cold = check_questions(cases, VerifierSettings(), dataset="ds", cache_dir=tmp_path / "cache", **where)
    warm = check_questions(cases, VerifierSettings(), dataset="ds", cache_dir=tmp_path / "cache", **where)
    assert (cold.verdicts_metadata["verdicts_reused"], cold.verdicts_metadata["verdicts_proven"]) == (0, 2)
    assert (warm.report_metadata["verdicts_reused"], warm.report_metadata["verdicts_proven"]) == (2, 0)
    assert sorted(prove.calls) == ["q:1", "q:2"] and warm.verdicts.equals(cold.verdicts)
    assert "2 reused from the verdict cache, 0 proven now" in where["report_path"].with_suffix(".md").read_text()
    plain = check_questions(cases, VerifierSettings(), dataset="ds", **where)
    assert "verdicts_reused" not in plain.verdicts_metadata and len(prove.calls) == 4


def test_propose_fixes_reuses_re_verifications(monkeypatch, cache):
    seen: list[object] = []
    monkeypatch.setattr(questions_module, "remediate", lambda *a, **k: seen.append(verify_module.active_verdict_cache()) or [])
    flagged = dataclasses.replace(fake_verdict("q:1", OPTIONS, "A"), verdict="Incorrect")
    questions_module.propose_fixes([flagged], [mc()], OfflineProver(stdlib_index()), SandboxSettings(), cache=cache, parallel=2)
    assert seen == [cache], "the worker thread sees the cache"


# -- for real: one tiny standard-library question, proven in the sandbox ------------------------------


def test_a_real_hit_is_the_fresh_verdict_row(sandbox, tmp_path):
    case = mc("json:dumps")
    index = stdlib_index()
    with VerdictCache.open(tmp_path) as cache:
        cold = run_verification([case], index=index, sandbox_settings=sandbox, cache=cache)
        warm = run_verification([case], index=index, sandbox_settings=sandbox, cache=cache)
    fresh = run_verification([case], index=index, sandbox_settings=sandbox)
    assert cold.verdicts[0].verdict == "Valid", cold.verdicts[0].reasons
    assert warm.reused == ["json:dumps"] and warm.verdicts == cold.verdicts
    report = quality_report(cold.verdicts, {})
    assert verdict_frame(warm.verdicts, report).equals(verdict_frame(cold.verdicts, report))
    timing = {"seconds", "evidence"}  # the seconds a proof took differ between two real runs; nothing else may
    columns = [c for c in verdict_frame(fresh.verdicts, report).columns if c not in timing]
    assert verdict_frame(fresh.verdicts, report)[columns].equals(verdict_frame(warm.verdicts, report)[columns])
    states = lambda v: [(e.letter, e.state, e.outcome, e.note) for e in v.evidence]  # noqa: E731
    assert states(fresh.verdicts[0]) == states(warm.verdicts[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no corrupt-entry warning on a sound cache
        with VerdictCache.open(tmp_path) as cache:
            assert run_verification([case], index=index, sandbox_settings=sandbox, cache=cache).reused == ["json:dumps"]


# -- the trust boundary: rows bound to a key the cache folder does not hold -----------------------------------------


@pytest.fixture
def incorrect(monkeypatch) -> list[str]:
    """prove_question stands in: every question comes out Incorrect (what a tampered row would turn Valid)."""
    calls: list[str] = []

    def fake(case_id, question, options, marked, prover, settings, **_):
        calls.append(case_id)
        return dataclasses.replace(fake_verdict(case_id, options, marked), verdict="Incorrect", reasons=["proven false"])

    monkeypatch.setattr(verify_module, "prove_question", fake)
    return calls


def _rewrite(path: Path, change) -> None:
    """Rewrite every verdict row with ``change(row) -> row`` and recompute its sha256, as whoever writes the folder could."""
    with sqlite3.connect(path) as conn:
        for key, payload in conn.execute("SELECT key, payload FROM results WHERE namespace = ?", (NAMESPACE,)).fetchall():
            text = canonical_json(change(key, json.loads(payload)))
            conn.execute("UPDATE results SET payload = ?, sha256 = ? WHERE namespace = ? AND key = ?",
                         (text, hashlib.sha256(text.encode()).hexdigest(), NAMESPACE, key))  # fmt: skip


def test_a_row_rewritten_to_valid_with_its_sha256_recomputed_is_refused_and_proven_again(incorrect, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "config" / "verdict.key"))
    with VerdictCache.open(tmp_path / "cache") as cache:
        assert run([mc()], cache).verdicts[0].verdict == "Incorrect"

    def to_valid(key, row):
        row["verdict"]["verdict"], row["verdict"]["reasons"] = "Valid", ["tampered"]
        return row

    _rewrite(tmp_path / "cache" / RESULTS_FILE, to_valid)
    with VerdictCache.open(tmp_path / "cache") as cache, pytest.warns(CorruptFileWarning, match="HMAC does not match"):
        again = run([mc()], cache)
    assert again.reused == [] and again.verdicts[0].verdict == "Incorrect" and incorrect == ["q:1", "q:1"]
    assert not list((tmp_path / "cache").glob("*.key")), "the key is not kept in the cache folder"


def test_a_row_copied_under_another_question_or_made_with_another_key_is_refused(incorrect, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "verdict.key"))
    with VerdictCache.open(tmp_path / "cache") as cache:
        run([mc("q:1"), mc("q:2", answer="B")], cache)
    rows = {}
    _rewrite(tmp_path / "cache" / RESULTS_FILE, lambda key, row: rows.setdefault(key, row))
    # the rows' order in the file is the store's, not the questions': find q:1's by its content
    first, second = sorted(rows, key=lambda key: rows[key]["verdict"]["case_id"] != "q:1")
    _rewrite(tmp_path / "cache" / RESULTS_FILE, lambda key, row: rows[first] if key == second else row)  # q:1's row under q:2's key
    with VerdictCache.open(tmp_path / "cache") as cache, pytest.warns(CorruptFileWarning, match="HMAC"):
        assert sorted(run([mc("q:1"), mc("q:2", answer="B")], cache).reused) == ["q:1"]
    with ResultCache(tmp_path / "cache" / RESULTS_FILE) as results, pytest.warns(CorruptFileWarning, match="HMAC"):
        assert run([mc("q:1")], VerdictCache(results, secret=b"another key of 32 bytes, not it!")).reused == []


def test_without_a_key_the_cache_is_not_used(prove, tmp_path, monkeypatch):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "verdict.key").write_bytes(b"short")
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "ro" / "verdict.key"))
    with VerdictCache.open(tmp_path / "cache") as cache:
        assert run([mc()], cache).cache_status.startswith("not used: the verdict cache's key")
        assert run([mc()], cache).reused == []
