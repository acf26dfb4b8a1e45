"""Turn claims into pytest proofs that run in the sandbox.

A proof is one pytest file, ``test_option_<L>.py``, that PASSES when the option is TRUE. The verdict
does not read pytest's exit code alone: the test writes ``option.evidence.json`` with
``option_true`` = ``true`` just before passing, ``false`` just before failing with an assertion, or
``null`` when it could not decide (the subject of the question is missing, the setup failed). So
"false" is always a deliberate, recorded assertion, never a crash: a collection error, a timeout, a
resource limit or an unexpected exception leaves the option undecided.

:class:`OfflineProver` is deterministic and offline. Names that are not importable as written (bare
``LlmAgent``, ``types.Part``, ``runner.run_async``) are resolved through a :class:`LibraryIndex`, built
once per suite by :func:`probe_environment`, which itself runs in the sandbox (the host never imports
the library under test). :class:`Prover` is the seam for a prover whose proofs an LLM writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from retrieval_pipeline.core.verifier.claims import Claim
from retrieval_pipeline.core.verifier.sandbox import SandboxSettings, run_python, safe_text

ProofStatus = Literal["proof", "unverifiable_offline"]
EVIDENCE_FILE = "option.evidence.json"


@dataclass
class Proof:
    """A test for one claim, or the reason there is none."""

    claim: Claim
    test_source: str | None
    status: ProofStatus
    filename: str | None = None
    reason: str = ""


class Prover(Protocol):
    """Writes a proof for a claim. Must not see the ground truth: it gets the claim only."""

    name: str

    def prove(self, claim: Claim) -> Proof: ...


# --------------------------------------------------------------------------------------------------
# The environment probe and the library index


@dataclass
class LibraryIndex:
    """What the environment under test holds, as seen from inside the sandbox.

    ``names``: short name -> fully qualified names where a class/function of that name is defined;
    ``module_aliases``: name a module is commonly imported under (``types`` -> ``google.genai.types``);
    ``source_names``: names defined at top level in the library's source, including modules that could
    not be imported (so "not found" is not confused with "failed to import").
    """

    library: str | None
    distribution: str | None
    version: str | None
    python_version: str
    python: str
    names: dict[str, list[str]] = field(default_factory=dict)
    module_aliases: dict[str, str] = field(default_factory=dict)
    source_names: set[str] = field(default_factory=set)
    modules_imported: int = 0
    failed_modules: dict[str, str] = field(default_factory=dict)
    probe_seconds: float = 0.0

    def resolve(self, name: str) -> tuple[str, str] | None:
        """Binding for a bare name: ``("path", fqn)`` or None when the library does not define it."""
        if name in self.module_aliases:
            return ("path", self.module_aliases[name])
        if name in self.names:
            return ("path", self._best(self.names[name]))
        if name[:1].islower():  # an instance variable named after its class: runner -> Runner
            for short, fqns in self.names.items():
                if short[:1].isupper() and short.lower() == name.lower().replace("_", ""):
                    return ("path", self._best(fqns))
        return None

    def _best(self, fqns: list[str]) -> str:
        inside = [f for f in fqns if self.library and f.startswith(self.library + ".")]
        return sorted(inside or fqns, key=lambda f: (f.count("."), f))[0]


_PROBE = r'''
import importlib, importlib.metadata, json, os, pkgutil, platform, re, sys, time, types, warnings
from collections import Counter, defaultdict
LIBRARY = {library!r}
started = time.monotonic()
out = {{"python_version": platform.python_version(), "python": sys.executable, "library": LIBRARY,
        "distribution": None, "version": None, "names": {{}}, "module_aliases": {{}}, "source_names": [],
        "modules_imported": 0, "failed_modules": {{}}}}
if LIBRARY:
    top = LIBRARY.split(".")[0]
    for candidate in [LIBRARY.replace(".", "-"), LIBRARY.replace(".", "_"), LIBRARY]:
        try:
            out["version"] = importlib.metadata.version(candidate); out["distribution"] = candidate; break
        except importlib.metadata.PackageNotFoundError:
            pass
    names, aliases = defaultdict(set), defaultdict(Counter)
    source_names = set()
    try:
        root = importlib.import_module(LIBRARY)
    except BaseException as exc:
        out["failed_modules"][LIBRARY] = f"{{type(exc).__name__}}: {{exc}}"
        root = None
    modules = [LIBRARY]
    if root is not None and hasattr(root, "__path__"):
        modules += [m.name for m in pkgutil.walk_packages(root.__path__, LIBRARY + ".", onerror=lambda n: None)]
        for base in root.__path__:
            for folder, _, files in os.walk(base):
                for fname in files:
                    if fname.endswith(".py"):
                        try:
                            text = open(os.path.join(folder, fname), encoding="utf-8", errors="replace").read()
                        except OSError:
                            continue
                        source_names.update(re.findall(r"^(?:class|def|async def)\s+(\w+)|^(\w+)\s*[:=]", text, re.M) and
                            [a or b for a, b in re.findall(r"^(?:class|(?:async )?def)\s+(\w+)|^(\w+)\s*[:=]", text, re.M)])
    warnings.simplefilter("ignore")
    for name in modules:
        if time.monotonic() - started > {budget}:
            out["failed_modules"][name] = "probe time budget exhausted"; continue
        try:
            module = importlib.import_module(name)
        except BaseException as exc:
            out["failed_modules"][name] = f"{{type(exc).__name__}}: {{exc}}"[:300]; continue
        out["modules_imported"] += 1
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, types.ModuleType):
                aliases[attr][value.__name__] += 1
            elif isinstance(value, type) or callable(value):
                owner, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
                if isinstance(owner, str) and isinstance(qual, str) and "<" not in qual:
                    names[attr].add(f"{{owner}}.{{qual}}")
    out["names"] = {{k: sorted(v) for k, v in names.items()}}
    out["module_aliases"] = {{k: c.most_common(1)[0][0] for k, c in aliases.items()}}
    out["source_names"] = sorted(source_names)
out["probe_seconds"] = round(time.monotonic() - started, 2)
with open("environment.json", "w") as handle:
    json.dump(out, handle)
'''


def probe_environment(
    settings: SandboxSettings,
    library: str | None,
    *,
    timeout_s: float = 240.0,
    memory_mb: int = 4096,
) -> LibraryIndex:
    """Run the probe in the sandbox: Python version, library version, and (with ``library``) its index.

    Raises:
        RuntimeError: The probe did not produce its report (its stderr is in the message).
    """
    budget = max(10.0, timeout_s - 30.0)
    probe_settings = SandboxSettings(
        python=settings.python,
        timeout_s=timeout_s,
        memory_mb=max(memory_mb, settings.memory_mb),
        max_processes=settings.max_processes,
        cpu_s=int(timeout_s),
        file_mb=settings.file_mb,
        max_output_chars=settings.max_output_chars,
        sandbox_uid=settings.sandbox_uid,
        extra_ro_binds=settings.extra_ro_binds,
    )
    execution = run_python(_PROBE.format(library=library, budget=budget), "probe_environment.py", probe_settings)
    raw = execution.artifacts.get("environment.json")
    if raw is None:
        stderr = safe_text(execution.stderr, 2000, keep="tail")
        raise RuntimeError(f"environment probe failed ({execution.outcome}): {stderr}")
    data = json.loads(raw)
    return LibraryIndex(
        library=data["library"],
        distribution=data["distribution"],
        version=data["version"],
        python_version=data["python_version"],
        python=data["python"],
        names=data["names"],
        module_aliases=data["module_aliases"],
        source_names=set(data["source_names"]),
        modules_imported=data["modules_imported"],
        failed_modules=data["failed_modules"],
        probe_seconds=data["probe_seconds"],
    )


# --------------------------------------------------------------------------------------------------
# The offline prover

_PRELUDE = r'''"""{doc}"""
import ast
import builtins
import importlib
import inspect
import json
import re
import warnings

EVIDENCE = "{evidence}"


class _Missing(Exception):
    """A name the claim needs does not exist."""

    def __init__(self, message, head=False):
        super().__init__(message)
        self.head = head


class _Unimportable(Exception):
    """The name is defined in the library's source, but its module cannot be imported here."""


def _record(option_true, reason, **extra):
    data = {{"option_true": option_true, "reason": reason}}
    data.update(extra)
    with open(EVIDENCE, "w", encoding="utf-8") as handle:
        json.dump(data, handle, default=repr)


def _true(reason, **extra):
    _record(True, reason, **extra)


def _false(reason, **extra):
    _record(False, reason, **extra)
    raise AssertionError("option is false: " + reason)


def _undecided(reason):
    _record(None, reason)
    raise AssertionError("proof undecided: " + reason)


def _import_path(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            return importlib.import_module(name), parts[i:]
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise
    if hasattr(builtins, parts[0]):
        return getattr(builtins, parts[0]), parts[1:]
    raise _Missing("no module or builtin named " + repr(parts[0]), head=True)


def _has(obj, name):
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if klass is object:
                continue
            slots = getattr(klass, "__slots__", ()) or ()
            slots = (slots,) if isinstance(slots, str) else slots
            if name in vars(klass) or name in getattr(klass, "__annotations__", {{}}) or name in slots:
                return True
        fields = getattr(obj, "model_fields", None) or getattr(obj, "__dataclass_fields__", None) or {{}}
        return name in fields
    return hasattr(obj, name)


def _bind(spec):
    kind, value = spec
    if kind == "path":
        return _load(value, {{}})
    if kind == "decorated_with":
        return _load(value, {{}})(lambda *args, **kwargs: None)
    if kind == "unimportable":
        raise _Unimportable(value)
    raise _Missing(value, head=True)


def _walk(path, names, last_exists_only=False):
    head, _, rest = path.partition(".")
    if head in names:
        obj, parts = _bind(names[head]), (rest.split(".") if rest else [])
    else:
        obj, parts = _import_path(path)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if last and last_exists_only:
            if not (_has(obj, part) if isinstance(obj, type) else hasattr(obj, part)):
                raise _Missing(path + ": no attribute " + repr(part) + " on " + repr(obj))
            return True
        if not hasattr(obj, part):
            raise _Missing(path + ": no attribute " + repr(part) + " on " + repr(obj))
        obj = getattr(obj, part)
    return obj


def _load(path, names):
    return _walk(path, names)


def _namespace(names, free):
    return {{name: (_bind(names[name]) if name in names else _walk(name, {{}})) for name in free}}


def _parameters(target):
    try:
        return inspect.signature(target).parameters
    except (TypeError, ValueError):
        return None


def _accepts(target, name, value, named_only):
    params = _parameters(target)
    if params is not None:
        named = [p.name for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        for key, info in (getattr(target, "model_fields", None) or {{}}).items():
            named += [n for n in (key, getattr(info, "alias", None)) if n and n not in named]
        if name in named:
            return True, "a named parameter; parameters: " + ", ".join(named)
        var_keyword = any(p.kind == p.VAR_KEYWORD for p in params.values())
        if named_only or not var_keyword:
            return False, "not a named parameter; parameters: " + ", ".join(named)
    try:
        target(**{{name: value}})
    except TypeError as exc:
        message = str(exc)
        if re.search(r"unexpected keyword|invalid keyword|takes no keyword|no keyword arguments", message):
            return False, "rejected by a call: " + message
        return True, "the call got past keyword checking (TypeError: " + message + ")"
    except Exception as exc:
        return True, "the call accepted the keyword, then failed: " + type(exc).__name__ + ": " + str(exc)
    return True, "the call accepted the keyword"


def _same(actual, expected):
    if isinstance(actual, bool) != isinstance(expected, bool):
        return False
    numbers = (int, float, complex)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        return actual == expected
    return type(actual) is type(expected) and actual == expected


def _exception_matches(exc, expected, names):
    try:
        klass = _load(expected, names)
        if isinstance(klass, type) and issubclass(klass, BaseException):
            return isinstance(exc, klass)
    except Exception:
        pass
    short = expected.rsplit(".", 1)[-1]
    return any(k.__name__ == short for k in type(exc).__mro__)


def _fingerprint(value):
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))[:500]
    return type(value).__module__ + "." + type(value).__qualname__ + ":" + text
'''


class OfflineProver:
    """Deterministic proofs for every decidable claim kind; ``unknown`` stays unverifiable."""

    name = "offline"

    def __init__(self, index: LibraryIndex | None = None) -> None:
        self.index = index

    def prove(self, claim: Claim) -> Proof:
        if not claim.decidable:
            reason = "derived from the other options" if claim.kind == "none_of_the_above" else "no offline proof"
            return Proof(claim, None, "unverifiable_offline", None, reason)
        body = {
            "import": self._import_body,
            "exists": self._exists_body,
            "signature_param": self._signature_body,
            "constructor_kwarg": self._signature_body,
            "expression": self._expression_body,
        }[claim.kind](claim)
        if body is None:
            return Proof(claim, None, "unverifiable_offline", None, "the claim's names cannot be resolved offline")
        doc = f"Proof for case {claim.case_id!r}, option {claim.letter}: {claim.hypothesis}".replace('"""', "'''")
        doc = doc.replace("\\", "\\\\")
        source = _PRELUDE.format(doc=doc, evidence=EVIDENCE_FILE) + "\n\n" + body
        return Proof(claim, source, "proof", f"test_option_{_safe(claim.letter)}.py")

    # ---- names

    def _names(self, claim: Claim, free: list[str]) -> dict[str, tuple[str, str]]:
        """Bindings for the free names: from the question, then the library index, else importable."""
        bindings: Mapping[str, Mapping[str, str]] = claim.details.get("bindings") or {}
        names: dict[str, tuple[str, str]] = {}
        for name in free:
            if name in bindings:
                spec = bindings[name]
                if "decorated_with" in spec:
                    names[name] = ("decorated_with", spec["decorated_with"])
                    continue
                path = spec["path"]
                head = path.split(".")[0]
                resolved = self.index.resolve(head) if (self.index and head not in _STDLIB_HINTS) else None
                names[name] = ("path", resolved[1] + path[len(head) :] if resolved else path)
                continue
            if self.index is not None and self.index.library and name not in _STDLIB_HINTS:
                resolved = self.index.resolve(name)
                if resolved is not None:
                    names[name] = resolved
                elif claim.details.get("library_symbol") or name[:1].isupper():
                    if name in self.index.source_names:
                        names[name] = ("unimportable", f"{name} is defined in {self.index.library}'s source "
                                       "but no importable module exposes it here")  # fmt: skip
                    else:
                        names[name] = ("missing", f"{name} is not defined anywhere in {self.index.library}")
        return names

    # ---- bodies

    def _import_body(self, claim: Claim) -> str:
        statement = claim.details["statement"]
        return f"""STATEMENT = {statement!r}


def test_option_{_safe(claim.letter)}():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(STATEMENT, {{}})
        except ImportError as exc:
            _false(STATEMENT + " raises " + type(exc).__name__ + ": " + str(exc))
    notes = sorted({{type(w.message).__name__ + ": " + str(w.message) for w in caught}})
    _true(STATEMENT + " works", warnings=notes)
"""

    def _exists_body(self, claim: Claim) -> str | None:
        path = claim.details["path"]
        head = path.split(".")[0]
        if claim.details.get("library_symbol") and (self.index is None or not self.index.library):
            return None  # a bare name with no library to look it up in
        names = self._names(claim, [head])
        head_from_question = "." in path and not claim.details.get("library_symbol") and (
            claim.subject is not None and claim.option_text.strip().rstrip(".").strip("`()") != path
        )
        return f"""NAMES = {names!r}
PATH = {path!r}
HEAD_FROM_QUESTION = {head_from_question!r}


def test_option_{_safe(claim.letter)}():
    try:
        _walk(PATH, NAMES, last_exists_only=True)
    except _Unimportable as exc:
        _undecided(str(exc))
    except _Missing as exc:
        if exc.head and HEAD_FROM_QUESTION:
            _undecided("the question's subject is missing: " + str(exc))
        _false(str(exc))
    except ImportError as exc:
        _undecided("import failed: " + type(exc).__name__ + ": " + str(exc))
    _true(PATH + " exists")
"""

    def _signature_body(self, claim: Claim) -> str:
        subject = claim.subject or ""
        names = self._names(claim, [subject.split(".")[0]])
        load = f"""NAMES = {names!r}
SUBJECT = {subject!r}


def _subject():
    try:
        return _load(SUBJECT, NAMES)
    except (_Missing, _Unimportable, ImportError) as exc:
        _undecided("cannot load " + SUBJECT + ": " + type(exc).__name__ + ": " + str(exc))
"""
        letter = _safe(claim.letter)
        if claim.details.get("exact"):
            return load + f"""EXPECTED = {claim.details["params"]!r}
EXPECT_ASYNC = {claim.details["is_async"]!r}


def test_option_{letter}():
    target = _subject()
    params = _parameters(target)
    if params is None:
        _undecided("no introspectable signature for " + SUBJECT)
    actual = [[p.name, p.kind.name] for p in params.values()]
    is_async = inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)
    if actual != EXPECTED or is_async != EXPECT_ASYNC:
        _false("actual signature: " + ("async " if is_async else "") + str(inspect.signature(target)),
               actual=actual, is_async=is_async)
    _true("signature matches: " + str(inspect.signature(target)))
"""
        value = claim.details.get("value")
        value_src = value if value is not None else "None"
        named_only = claim.decides == "necessary"
        return load + f"""PARAM = {claim.details["param"]!r}
EXPECT_ACCEPTED = {claim.details["expect_accepted"]!r}


def test_option_{letter}():
    target = _subject()
    accepted, how = _accepts(target, PARAM, {value_src}, named_only={named_only!r})
    if accepted != EXPECT_ACCEPTED:
        _false(SUBJECT + (" accepts " if accepted else " does not accept ") + PARAM + ": " + how)
    _true(SUBJECT + (" accepts " if accepted else " does not accept ") + PARAM + ": " + how)
"""

    def _expression_body(self, claim: Claim) -> str:
        d = claim.details
        free = list(d.get("free_names") or [])
        names = self._names(claim, free)
        mode = d["mode"]
        letter = _safe(claim.letter)
        head = f"""NAMES = {names!r}
FREE = {free!r}
SETUP = {d.get("setup", "")!r}
EXPR = {d["expr"]!r}


def test_option_{letter}():
    try:
        ns = _namespace(NAMES, FREE)
        if SETUP:
            exec(SETUP, ns)
    except (_Missing, ImportError, AttributeError) as exc:
        {"_false" if mode == "evaluates" else "_undecided"}("cannot set up: " + type(exc).__name__ + ": " + str(exc))
    except _Unimportable as exc:
        _undecided(str(exc))
    raised = None
    try:
        result = eval(EXPR, ns)
    except Exception as exc:
        raised = exc
"""
        if mode == "evaluates":
            return head + """    if raised is not None:
        _false(EXPR + " raises " + type(raised).__name__ + ": " + str(raised))
    _true(EXPR + " evaluates", fingerprint=_fingerprint(result))
"""
        if mode == "raises":
            return head + f"""    EXPECTED = {d["exception"]!r}
    if raised is None:
        _false(EXPR + " returns " + repr(result) + " without raising")
    if not _exception_matches(raised, EXPECTED, NAMES):
        _false(EXPR + " raises " + type(raised).__name__ + ", not " + EXPECTED)
    _true(EXPR + " raises " + type(raised).__name__ + ": " + str(raised))
"""
        if mode == "match":
            return head + f"""    EXPECTED = ast.literal_eval({d["expected"]!r})
    if raised is not None:
        _false(EXPR + " raises " + type(raised).__name__ + ": " + str(raised))
    if not isinstance(result, re.Match) or result.group(0) != EXPECTED:
        _false(EXPR + " returns " + repr(result))
    _true(EXPR + " returns " + repr(result))
"""
        return head + f"""    EXPECTED = ast.literal_eval({d["expected"]!r})
    if raised is not None:
        _false(EXPR + " raises " + type(raised).__name__ + ": " + str(raised) + "; expected " + repr(EXPECTED))
    if not _same(result, EXPECTED):
        _false(EXPR + " returns " + repr(result) + ", not " + repr(EXPECTED), actual=repr(result))
    _true(EXPR + " returns " + repr(result), fingerprint=_fingerprint(result))
"""


#: Heads that are Python's own modules even when a library re-exports something of the same name.
_STDLIB_HINTS = frozenset(
    "os sys re json math time datetime collections functools itertools shutil subprocess pathlib typing "
    "inspect asyncio logging enum dataclasses abc io uuid base64 hashlib random statistics textwrap "
    "urllib csv sqlite3 tempfile heapq bisect argparse threading multiprocessing concurrent copy string".split()
)


def _safe(letter: str) -> str:
    return re.sub(r"\W", "_", letter)


def parse_evidence(artifacts: Mapping[str, str]) -> dict[str, Any] | None:
    """The test's own record (``option.evidence.json``), or None when it wrote none."""
    raw = artifacts.get(EVIDENCE_FILE)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
