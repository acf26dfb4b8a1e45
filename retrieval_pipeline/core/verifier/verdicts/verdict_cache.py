"""A cache of question verdicts, so that an unchanged re-run does not prove an unchanged question again.

A verdict is a function of the question as the verifier sees it (case id, question, options in order, marked
answer, code snippet), of the library it is proven against, of the verifier's own code, of the sandbox limits
and of the prover. The cache key (:func:`question_key`) is the content hash of all of them, so a change of any
gives a miss and the question is proven again; nothing is ever looked up by name, path or time alone.

**The run's part of the key** (:func:`run_fingerprint`, computed once per run):

* the probed library index (:class:`~retrieval_pipeline.core.verifier.proofs.library_index.LibraryIndex`) as the offline
  prover sees it: distribution, version, module, interpreter path, Python version, every indexed name, the
  probe's coverage (its timings left out);
* the library's files (:func:`library_fingerprint`): the distribution's ``RECORD`` and the size and
  modification time of every file it lists; the interpreter's executable; every distribution installed beside
  it (``*.dist-info`` names: pytest's version shapes a proof too). A library that cannot be fingerprinted so
  (a module named without its distribution, a ``RECORD`` not found) is not cached at all;
* the verifier's source (:func:`source_digest`): every ``.py`` of this folder and the core modules it builds
  proofs with (:data:`EXTRA_SOURCES`), so any code change invalidates every entry;
* the sandbox settings and the prover (only the offline prover is cached: a question where an LLM prover
  ran is proven every time).

**What is stored.** Only a verdict that cannot be a passing accident (:func:`cacheable`): none of its proofs
was stopped by a limit (wall clock, CPU, memory, processes) or killed, and every option was decided by the
offline prover (or derived). The verdict is stored as JSON and read back as an equal
:class:`~retrieval_pipeline.core.verifier.verdicts.verdict.Verdict` (a verdict whose JSON does not read back equal is not
stored), including the seconds its proofs took when it was proven.

Storage and safety are those of :class:`~retrieval_pipeline.core.common.cache.result_cache.ResultCache` (namespace
:data:`NAMESPACE`): atomic entries, checksums, a corrupt entry deleted with a warning and proven again.

**The trust boundary.** The sha256 of a row catches corruption, not tampering: whoever can write the cache folder could
rewrite a verdict and its checksum. So each row also carries an HMAC-SHA256, under a key the cache folder does not hold
(:func:`key_path`: ``$RP_VERDICT_CACHE_KEY``, else ``$DAGSTER_HOME/verdict_cache.key``, else
``~/.config/retrieval_pipeline/verdict_cache.key``; made once, 0600), of the row's question key and its verdict. A row
whose HMAC does not match (rewritten, copied under another question's key, or written with another key) is refused
with a warning naming the HMAC, deleted, and the question proven again. Whoever can read the key can still forge rows:
the key is as private as the user's config folder (or ``DAGSTER_HOME``). The sandbox reaches neither the key nor the
cache folder. Without a key that can be read or made, the cache is not used (:meth:`VerdictCache.status`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.cache.result_cache import RESULTS_FILE, ResultCache, canonical_json, content_key
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline.core.verifier.proofs.provers import OfflineProver, Prover
from retrieval_pipeline.core.verifier.verdicts.verdict import OptionEvidence, Verdict

#: The result cache's namespace of verdicts.
NAMESPACE = "verifier_verdicts"
#: Bumped by hand when the key's layout changes (the source digest covers every other code change).
KEY_VERSION = "verdict-cache-2"
#: The verifier's own folder: every ``.py`` in it, sub-folders included, is part of the key.
VERIFIER_DIR = Path(__file__).resolve().parent.parent
#: The sandbox that runs the proofs (the runner, the limits): every ``.py`` in it is part of the key too.
SANDBOX_DIR = VERIFIER_DIR.parent / "services" / "sandbox"
#: Modules outside the verifier's folder that shape claims or proofs (``dotted_name``; the ``Case`` type;
#: the sandbox and the batch runner, which run the proofs).
EXTRA_SOURCES: tuple[Path, ...] = (
    VERIFIER_DIR.parent / "common" / "astutil.py",
    VERIFIER_DIR.parent / "common" / "types.py",
    *sorted(SANDBOX_DIR.rglob("*.py")),
)
#: Provers whose decisions are cached (the offline prover; ``derived`` is "None of the above").
CACHED_PROVERS = frozenset({"offline", "derived"})
#: Execution outcomes that may be an accident of a busy machine: such a verdict is proven again next time.
TRANSIENT_OUTCOMES = frozenset({"timeout", "killed"})
#: Probe coverage fields left out of the key: timings, which differ on every run.
_TIMING_FIELDS = ("seconds", "cpu_seconds")


def source_digest(folder: Path = VERIFIER_DIR, extra: tuple[Path, ...] = EXTRA_SOURCES) -> str:
    """SHA-256 over every ``.py`` file under ``folder`` and the ``extra`` files: names and contents, in sorted order.

    Args:
        folder: The verifier's package folder.
        extra: Further source files the verdicts depend on (a missing one is hashed as missing).
    """
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")) + sorted(extra):
        digest.update(str(path.relative_to(folder) if path.is_relative_to(folder) else path.name).encode() + b"\0")
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()


def _normalise(name: str) -> str:
    """A distribution name as dist-info folders spell it (PEP 503 normalisation, ``_`` for the separators)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def site_packages(python: str | Path) -> list[Path]:
    """The ``site-packages`` folders of the environment of ``python`` (``<prefix>/lib*/python*/site-packages``).

    The interpreter is not run (its environment is the one under test): the folders are found beside it.
    One folder reached twice counts once (``python -m venv`` makes ``lib64`` a link to ``lib``): the first
    path found, ``lib/...`` before ``lib64/...``.
    """
    prefix = Path(python).absolute().parent.parent
    found: dict[Path, Path] = {}
    for pattern in ("lib/python*/site-packages", "lib64/python*/site-packages"):
        for path in sorted(prefix.glob(pattern)):
            if path.is_dir():
                found.setdefault(path.resolve(), path)
    return sorted(found.values())


def _dist_info_name(folder: Path) -> tuple[str, str]:
    """``(normalised name, version)`` of a ``<name>-<version>.dist-info`` folder."""
    name, _, version = folder.name.removesuffix(".dist-info").rpartition("-")
    return _normalise(name), version


def _stat(path: Path) -> list[int] | None:
    """``[size, mtime_ns]`` of a file, None when it does not exist."""
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def _record_fingerprint(dist_info: Path) -> str:
    """SHA-256 of a distribution's RECORD and of the size and mtime of every file it lists (so an edit in place shows)."""
    record = (dist_info / "RECORD").read_text(encoding="utf-8")
    files = [line.split(",", 1)[0] for line in record.splitlines() if line.strip()]
    stats = [[name, _stat(dist_info.parent / name)] for name in files]
    return content_key(record, stats)


def library_fingerprint(index: LibraryIndex) -> dict[str, Any] | None:
    """What the library's files are, as far as a verdict depends on them; None when they cannot be pinned down.

    Args:
        index: The probed index (its distribution, version and interpreter).

    Returns:
        ``python`` and ``executable`` (resolved path, size and mtime), ``python_version``, ``installed`` (the
        dist-info folders beside the interpreter), and for a distribution ``distribution``, ``version`` and
        ``record`` (:func:`_record_fingerprint`). None for a module probed without its distribution, or a
        distribution whose dist-info folder (with its version) is not found.
    """
    executable = Path(index.python).resolve()
    folders = site_packages(index.python)
    installed = sorted(f"{folder}/{p.name}" for folder in folders for p in folder.glob("*.dist-info"))
    fingerprint: dict[str, Any] = {
        "python": str(index.python),
        "executable": [str(executable), _stat(executable)],
        "python_version": index.python_version,
        "installed": installed,
    }
    if index.distribution is None:
        return fingerprint if index.import_name is None else None
    wanted = (_normalise(index.distribution), index.version)
    matches = [p for folder in folders for p in folder.glob("*.dist-info") if _dist_info_name(p) == wanted]
    if len(matches) != 1 or not (matches[0] / "RECORD").is_file():
        return None
    return {**fingerprint, "distribution": index.distribution, "version": index.version, "record": _record_fingerprint(matches[0])}


def index_content(index: LibraryIndex) -> dict[str, Any]:
    """The probed index as the offline prover sees it: every field but the probe's timings."""
    data = dataclasses.asdict(index)
    for name in _TIMING_FIELDS:
        data["coverage"].pop(name, None)
    return data


def run_fingerprint(
    index: LibraryIndex,
    settings: SandboxSettings,
    *,
    prover: str = "offline",
    batch: bool = True,
    source: str | None = None,
) -> dict[str, Any] | None:
    """The part of every question's key that is the same for the whole run; None when the run is not cacheable.

    Args:
        index: The probed library index.
        settings: The sandbox the proofs run in.
        prover: The prover's name; only ``offline`` is cached.
        batch: Whether a question's proofs run in one sandbox.
        source: The verifier's source digest; default :func:`source_digest`.

    Returns:
        JSON-serialisable data, or None when the prover is not the offline one or the library cannot be fingerprinted.
    """
    library = library_fingerprint(index)
    if prover != "offline" or library is None:
        return None
    return {
        "version": KEY_VERSION,
        "source": source or source_digest(),
        "library": library,
        "index": index_content(index),
        "sandbox": {k: str(v) for k, v in vars(settings).items()},
        "prover": prover,
        "batch": batch,
    }


def question_key(run: Mapping[str, Any], case_id: str, question: str, options: Mapping[str, str], marked: str, snippet: str | None) -> str:
    """The content key of one question's verdict in a run (:func:`run_fingerprint`); options keep their order."""
    return content_key(
        dict(run), {"case_id": case_id, "question": question, "options": list(options.items()), "marked": marked, "snippet": snippet}
    )


def cacheable(verdict: Verdict) -> bool:
    """True when the verdict may be reused: no proof was stopped by a limit or killed, and only the offline prover decided."""
    return all(
        e.outcome not in TRANSIENT_OUTCOMES and e.limit is None and (e.prover in CACHED_PROVERS or e.prover is None)
        for e in verdict.evidence
    )


def encode_verdict(verdict: Verdict) -> dict[str, Any]:
    """A verdict as JSON-serialisable data (every field, the claims included)."""
    return dataclasses.asdict(verdict)


def decode_verdict(data: Mapping[str, Any]) -> Verdict:
    """The verdict back from :func:`encode_verdict`'s data.

    Raises:
        KeyError, TypeError, ValueError: The data is not a verdict (the cache treats the entry as corrupt).
    """
    fields = dict(data)
    evidence = []
    for item in fields.pop("evidence"):
        option = dict(item)
        option["claim"] = Claim(**option.pop("claim"))
        evidence.append(OptionEvidence(**option))
    return Verdict(**fields, evidence=evidence)


#: The environment variable that names the key file (else ``$DAGSTER_HOME/verdict_cache.key``, else the config folder's).
KEY_ENV = "RP_VERDICT_CACHE_KEY"
KEY_FILE = "verdict_cache.key"


def key_path() -> Path:
    """Where the verdict cache's HMAC key is kept: outside the cache folder (see the module docstring)."""
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named)
    home = os.environ.get("DAGSTER_HOME")
    if home:
        return Path(home) / KEY_FILE
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "retrieval_pipeline" / KEY_FILE


def load_key(path: Path | None = None) -> bytes:
    """The HMAC key at ``path`` (default :func:`key_path`), made there (32 random bytes, 0600) when it is missing.

    Raises:
        OSError: The key can be neither read nor made; ValueError: the file holds no usable key.
    """
    path = path or key_path()
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another process made it meanwhile
            key = path.read_bytes()
        else:
            key = secrets.token_bytes(32)
            with open(fd, "wb") as handle:
                handle.write(key)
    if len(key) < 16:
        raise ValueError(f"the verdict cache's key {path} holds {len(key)} bytes; remove it to make a new one")
    return key


def row_mac(secret: bytes, key: str, data: Any) -> str:
    """HMAC-SHA256 of a row: its question key and its verdict's canonical JSON."""
    return hmac.new(secret, key.encode() + b"\0" + canonical_json(data).encode(), hashlib.sha256).hexdigest()


class VerdictCache:
    """Verdicts stored under their question keys, in a :class:`ResultCache`.

    The run's part of a key (:func:`run_fingerprint`) is computed once per library index and sandbox and kept
    for the life of this object (one check of one dataset): the library's files are not expected to change
    while they are being verified.

    Args:
        cache: The result cache (the project's ``results.sqlite``); not closed by this object.
        source: The verifier's source digest; default :func:`source_digest`, computed once here.
        secret: The HMAC key of the rows; default :func:`load_key` (the cache is not used when it fails).
    """

    def __init__(self, cache: ResultCache, *, source: str | None = None, secret: bytes | None = None) -> None:
        self.cache = cache
        self.source = source or source_digest()
        self.secret, self.key_problem = secret, None
        if secret is None:
            try:
                self.secret = load_key()
            except (OSError, ValueError) as exc:
                self.key_problem = f"{type(exc).__name__}: {exc}"
        self._runs: dict[tuple[int, str, bool], tuple[LibraryIndex, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()

    @classmethod
    @contextlib.contextmanager
    def open(cls, cache_dir: str | Path) -> Iterator[VerdictCache]:
        """The verdict cache in ``<cache_dir>/results.sqlite`` for the block (the file is closed at its end)."""
        with ResultCache(Path(cache_dir) / RESULTS_FILE) as cache:
            yield cls(cache)

    def status(self, prover: Prover, settings: SandboxSettings, *, fallback: Prover | None = None, batch: bool = True) -> str:
        """``used``, or ``not used: <why>`` for questions proven by ``prover`` (and ``fallback``) in ``settings``."""
        if self.secret is None:
            return f"not used: the verdict cache's key ({key_path()}) can be neither read nor made: {self.key_problem}"
        if fallback is not None:
            return "not used: a second (LLM) prover runs"
        if type(prover) is not OfflineProver or prover.index is None:
            return "not used: the prover is not the offline prover over a probed index"
        if self.fingerprint(prover.index, settings, batch=batch) is None:
            return "not used: the library's installed files could not be fingerprinted (no dist-info RECORD found)"
        return "used"

    def fingerprint(self, index: LibraryIndex, settings: SandboxSettings, *, batch: bool = True) -> dict[str, Any] | None:
        """:func:`run_fingerprint` of the offline prover over ``index``, computed once per index, sandbox and batch setting."""
        memo = (id(index), repr(settings), batch)
        with self._lock:
            known = self._runs.get(memo)
        if known is not None and known[0] is index:
            return known[1]
        run = run_fingerprint(index, settings, batch=batch, source=self.source)
        with self._lock:
            self._runs[memo] = (index, run)  # the index is kept, so its id is not reused while memoised
        return run

    def key(
        self,
        prover: Prover,
        settings: SandboxSettings,
        *,
        fallback: Prover | None,
        batch: bool,
        case_id: str,
        question: str,
        options: Mapping[str, str],
        marked: str,
        snippet: str | None,
    ) -> str | None:
        """The question's key (:func:`question_key`), or None when its verdict is not to be cached (:meth:`status`)."""
        if self.status(prover, settings, fallback=fallback, batch=batch) != "used":
            return None
        run = self.fingerprint(prover.index, settings, batch=batch)  # type: ignore[attr-defined]
        return None if run is None else question_key(run, case_id, question, options, marked, snippet)

    def get(self, key: str) -> Verdict | None:
        """The stored verdict, or None (missing; or corrupt, or its HMAC does not match: deleted with a warning)."""
        return self.cache.get_many(NAMESPACE, [key], decode=lambda row: decode_verdict(self._verified(key, row))).get(key)

    def _verified(self, key: str, row: Any) -> Any:
        """The verdict data of a stored row whose HMAC matches; ValueError (the row is then refused) otherwise."""
        if self.secret is None or not isinstance(row, dict) or set(row) != {"verdict", "mac"}:
            raise ValueError("not a verdict row with an HMAC")
        if not hmac.compare_digest(str(row["mac"]), row_mac(self.secret, key, row["verdict"])):
            raise ValueError(
                f"the row's HMAC does not match under the key {key_path()}: it was rewritten (tampered with), copied from "
                "another question, or written with another key; it is not reused, and the question is proven again"
            )
        return row["verdict"]

    def put(self, key: str, verdict: Verdict) -> bool:
        """Store a verdict when :func:`cacheable` and its JSON reads back equal; returns whether it was stored."""
        if not cacheable(verdict):
            return False
        try:
            data = encode_verdict(verdict)
            if decode_verdict(_json_round_trip(data)) != verdict:
                return False
        except (TypeError, ValueError):
            return False
        if self.secret is None:
            return False
        self.cache.put(NAMESPACE, key, {"verdict": data, "mac": row_mac(self.secret, key, data)})
        return True


_ACTIVE: ContextVar[VerdictCache | None] = ContextVar("active_verdict_cache", default=None)


@contextlib.contextmanager
def using_verdict_cache(cache: VerdictCache | None) -> Iterator[VerdictCache | None]:
    """Make ``cache`` the one :func:`active_verdict_cache` returns for the block (this thread only; None: none).

    Code that verifies questions below an interface that cannot carry a cache (the re-verification of proposed
    fixes) finds it there.
    """
    token = _ACTIVE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE.reset(token)


def active_verdict_cache() -> VerdictCache | None:
    """The cache made active by the enclosing :func:`using_verdict_cache`, or None outside one."""
    return _ACTIVE.get()


def _json_round_trip(data: Any) -> Any:
    """``data`` as it reads back from the cache's JSON."""
    return json.loads(canonical_json(data))
