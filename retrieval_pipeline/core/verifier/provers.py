"""Turn claims into pytest proofs that run in the sandbox.

A proof is one pytest file, ``test_option_<L>.py``, that PASSES when the option is TRUE. The verdict
does not read pytest's exit code alone: the test writes ``option.evidence.json`` with
``option_true`` = ``true`` just before passing, ``false`` just before failing with an assertion, or
``null`` when it could not decide (the subject of the question is missing, the setup failed). So
"false" is always a deliberate, recorded assertion, never a crash: a collection error, a timeout, a
resource limit or an unexpected exception leaves the option undecided.

Every text of a claim (option text, case id, names, expressions) enters a proof's source as a Python
literal (:func:`_literal`, :func:`_docstring`): pure ASCII, whatever quotes, backslashes, newlines or
non-ASCII characters the option holds, so a proof always compiles.

:class:`OfflineProver` is deterministic and offline. Names that are not importable as written (bare
``LlmAgent``, ``types.Part``, ``runner.run_async``) are resolved through a :class:`LibraryIndex`, built
once per suite by :func:`probe_environment`, which itself runs in the sandbox (the host never imports
the library under test). :class:`Prover` is the seam for a prover whose proofs an LLM writes.

**The library under test** has two names (issue 12): its *distribution* (``google-adk``, what pip
installs; its version is reported) and its *import name* (``google.adk``, the module probed). Given
only the distribution, the probe derives the import name from the distribution's own file list
(``RECORD``, else ``top_level.txt``) inside the target environment. A distribution that is not
installed, or an import name that cannot be imported, stops the verifier with a
:class:`LibrarySettingError` naming the setting: an empty index would turn every option that names a
library class into a confident "false".

**An incomplete probe decides nothing.** The probe records its coverage (:class:`ProbeCoverage`:
modules found, imported, failed with their reasons, not reached because the time budget ran out). A
name the index does not hold is proven absent only when no module the probe could not import defines
or mentions it; otherwise the option is undecided, with the module and the reason in the evidence.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from retrieval_pipeline.core.errors import InputError
from retrieval_pipeline.core.sandbox.bubblewrap import SandboxSettings, run_python, safe_text
from retrieval_pipeline.core.verifier import snippet_claims
from retrieval_pipeline.core.verifier.atom_proofs import ATOM_SOURCE, atoms_body
from retrieval_pipeline.core.verifier.claims import ATOM_KINDS, Claim

ProofStatus = Literal["proof", "unverifiable_offline"]
EVIDENCE_FILE = "option.evidence.json"
#: Failed or unreached modules listed by name in a coverage report (the counts are always complete).
COVERAGE_LISTED = 200


@dataclass
class Proof:
    """A test for one claim, or the reason there is none.

    Attributes:
        claim: The claim proven.
        test_source: The pytest file, or None when there is no proof.
        status: ``proof`` or ``unverifiable_offline``.
        filename: The file's name in the sandbox.
        reason: Why there is no proof.
        prover: Who wrote it: ``offline``, or ``llm:<model>`` (recorded for every option).
    """

    claim: Claim
    test_source: str | None
    status: ProofStatus
    filename: str | None = None
    reason: str = ""
    prover: str = "offline"


class Prover(Protocol):
    """Writes a proof for a claim. Must not see the ground truth: it gets the claim only."""

    name: str

    def prove(self, claim: Claim) -> Proof: ...


class LibrarySettingError(InputError):
    """The verifier's library setting does not name something the target environment can probe.

    Attributes:
        setting: The setting at fault: ``verifier.library`` or ``verifier.import_name``.
        value: Its value.
        python: The interpreter of the target environment.
    """

    def __init__(self, message: str, *, setting: str, value: str | None, python: str) -> None:
        super().__init__(message)
        self.setting = setting
        self.value = value
        self.python = python


# --------------------------------------------------------------------------------------------------
# The environment probe and the library index


@dataclass
class ProbeCoverage:
    """How much of the library the probe saw.

    Attributes:
        modules_found: Modules found in the library's folders (files, not imported to be found).
        modules_imported: Modules the probe imported and indexed.
        failed: Module -> why its import failed (``ModuleNotFoundError: No module named 'a2a'``).
        not_reached: Modules not tried because the time budget ran out.
        budget_hit: ``cpu`` or ``wall_clock`` when the time budget ran out, else None.
        cpu_budget_s: The probe's CPU-time budget (what normally binds: it does not grow on a busy machine).
        wall_budget_s: The probe's wall-clock budget (a backstop, well above the CPU budget).
        seconds: Wall-clock seconds the probe took.
        cpu_seconds: CPU seconds the probe took.
    """

    modules_found: int = 0
    modules_imported: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    not_reached: list[str] = field(default_factory=list)
    budget_hit: str | None = None
    cpu_budget_s: float = 0.0
    wall_budget_s: float = 0.0
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Every module of the library was imported: an absent name is absent."""
        return not self.failed and not self.not_reached

    def why_not_imported(self, module: str) -> str | None:
        """Why the probe did not import ``module`` (None when it did, or when it is not the library's)."""
        if module in self.failed:
            return f"its import failed: {self.failed[module]}"
        if module in self.not_reached:
            return f"the probe's time budget ran out ({self.budget_hit}) before it"
        return None

    def summary(self) -> str:
        """One line: ``665 of 759 modules imported, 94 failed, 0 not reached; time budget not hit``."""
        budget = f"time budget hit ({self.budget_hit})" if self.budget_hit else "time budget not hit"
        return (f"{self.modules_imported} of {self.modules_found} modules imported, {len(self.failed)} failed, "
                f"{len(self.not_reached)} not reached; {budget}")  # fmt: skip

    def failure_causes(self) -> dict[str, int]:
        """Import failures grouped by their message, most frequent first."""
        counts: dict[str, int] = {}
        for reason in self.failed.values():
            key = reason.splitlines()[0] if reason else "?"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_report(self, listed: int = COVERAGE_LISTED) -> dict[str, Any]:
        """The coverage as the quality report shows it (module lists capped at ``listed``, texts redacted)."""
        failed = sorted(self.failed.items())
        return {
            "complete": self.complete,
            "summary": self.summary(),
            "modules_found": self.modules_found,
            "modules_imported": self.modules_imported,
            "modules_failed": len(self.failed),
            "modules_not_reached": len(self.not_reached),
            "budget_hit": self.budget_hit,
            "budget": {"cpu_s": self.cpu_budget_s, "wall_clock_s": self.wall_budget_s},
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "failure_causes": {safe_text(k, 300): n for k, n in self.failure_causes().items()},
            "failed": {m: safe_text(r, 300) for m, r in failed[:listed]},
            "not_reached": sorted(self.not_reached)[:listed],
            "listed_up_to": listed,
        }


@dataclass
class LibraryIndex:
    """What the environment under test holds, as seen from inside the sandbox.

    Attributes:
        import_name: The module probed (``google.adk``); None for the standard library alone.
        import_name_source: Where it came from: ``verifier.import_name``, or ``RECORD of google-adk`` when derived.
        distribution: The distribution whose version is reported (``google-adk``).
        version: Its installed version.
        python_version: The target interpreter's Python version.
        python: The target interpreter.
        names: Short name -> fully qualified names where a class/function of that name is defined.
        module_aliases: Name a module is commonly imported under (``types`` -> ``google.genai.types``).
        source_defs: Name -> a module whose source defines it at module level (imported or not), so
            "not found" is not confused with "failed to import".
        unprobed_mentions: Capitalised word -> a module the probe did not import whose source mentions it.
        coverage: What the probe imported, what failed and why, whether the time budget ran out.
    """

    import_name: str | None
    distribution: str | None
    version: str | None
    python_version: str
    python: str
    names: dict[str, list[str]] = field(default_factory=dict)
    module_aliases: dict[str, str] = field(default_factory=dict)
    source_defs: dict[str, str] = field(default_factory=dict)
    unprobed_mentions: dict[str, str] = field(default_factory=dict)
    coverage: ProbeCoverage = field(default_factory=ProbeCoverage)
    import_name_source: str | None = None

    @property
    def library(self) -> str | None:
        """The module probed (kept for callers that knew it as ``library``)."""
        return self.import_name

    @property
    def source_names(self) -> set[str]:
        """Names defined at module level anywhere in the library's source."""
        return set(self.source_defs)

    @property
    def modules_imported(self) -> int:
        return self.coverage.modules_imported

    @property
    def failed_modules(self) -> dict[str, str]:
        return self.coverage.failed

    @property
    def probe_seconds(self) -> float:
        return self.coverage.seconds

    def resolve(self, name: str) -> tuple[str, str] | None:
        """Binding for a bare name: ``("path", fqn)`` or None when the index does not hold it."""
        if name in self.module_aliases:
            return ("path", self.module_aliases[name])
        if name in self.names:
            return ("path", self._best(self.names[name]))
        if name[:1].islower():  # an instance variable named after its class: runner -> Runner
            for short, fqns in self.names.items():
                if short[:1].isupper() and short.lower() == name.lower().replace("_", ""):
                    return ("path", self._best(fqns))
        return None

    def absent(self, name: str) -> tuple[str, str] | None:
        """Why the index does not hold ``name`` (call after :meth:`resolve` returned None).

        Returns:
            ``("unprobed", reason)`` when a module the probe did not import defines or mentions it, or the
            library's source defines it where no imported module exposes it (the option stays undecided);
            ``("missing", reason)`` when nothing in the library defines or mentions it (a proof may call the
            option false); None for a lower-case name with no class of its name anywhere (left to the proof).
        """
        candidates = self._candidates(name)
        for candidate in candidates:
            module = self.source_defs.get(candidate)
            why = self.coverage.why_not_imported(module) if module else None
            if module and why:
                return ("unprobed", f"{candidate} is defined in {module}, which the probe did not import: {why}")
        for candidate in candidates:
            module = self.unprobed_mentions.get(candidate)
            why = self.coverage.why_not_imported(module) if module else None
            if module and why:
                return ("unprobed", f"{candidate} is not exposed by any module the probe imported, but {module} "
                                    f"mentions it and the probe did not import it: {why}")  # fmt: skip
        for candidate in candidates:
            if candidate in self.source_defs:
                return ("unprobed", f"{candidate} is defined in {self.import_name}'s source "
                                    f"({self.source_defs[candidate]}) but no importable module exposes it here")  # fmt: skip
        if name[:1].islower():
            return None
        coverage = "every module imported" if self.coverage.complete else self.coverage.summary()
        return ("missing", f"{name} is not defined anywhere in {self.import_name} ({coverage}, "
                           "and no module the probe did not import mentions it)")  # fmt: skip

    def _candidates(self, name: str) -> list[str]:
        """``name`` itself; for a lower-case name, the classes it may be an instance of (runner -> Runner)."""
        if not name[:1].islower():
            return [name]
        key = name.lower().replace("_", "")
        pool = set(self.source_defs) | set(self.unprobed_mentions)
        return sorted(w for w in pool if w[:1].isupper() and w.lower() == key)

    def _best(self, fqns: list[str]) -> str:
        inside = [f for f in fqns if self.import_name and f.startswith(self.import_name + ".")]
        return sorted(inside or fqns, key=lambda f: (f.count("."), f))[0]


#: The probe script; ``CONFIG`` is prepended as a JSON literal. It writes ``environment.json``.
_PROBE = r'''
import ast, importlib, importlib.machinery, importlib.metadata, importlib.util, json, os, platform, re, sys, time, types, warnings
from collections import Counter, defaultdict

DISTRIBUTION, IMPORT_NAME = CONFIG["distribution"], CONFIG["import_name"]
CPU_BUDGET, WALL_BUDGET = CONFIG["cpu_budget_s"], CONFIG["wall_budget_s"]
started, started_cpu = time.monotonic(), time.process_time()
out = {"python_version": platform.python_version(), "python": sys.executable, "error": None,
       "import_name": IMPORT_NAME, "import_name_source": "verifier.import_name" if IMPORT_NAME else None,
       "distribution": None, "version": None, "names": {}, "module_aliases": {}, "source_defs": {},
       "unprobed_mentions": {}, "modules_found": 0, "modules_imported": 0, "failed": {}, "not_reached": [],
       "budget_hit": None}


def finish():
    out["seconds"] = round(time.monotonic() - started, 2)
    out["cpu_seconds"] = round(time.process_time() - started_cpu, 2)
    with open("environment.json", "w") as handle:
        json.dump(out, handle)
    sys.exit(0)


def fail(setting, value, message):
    out["error"] = {"setting": setting, "value": value, "message": message}
    finish()


def describe(exc):
    return (type(exc).__name__ + ": " + str(exc))[:300]


def normal(name):
    return re.sub(r"[-_.]+", "_", name).lower()


EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def module_name(parts):
    """Dotted module name of a file path inside site-packages, or None (not Python, not an identifier)."""
    *folders, filename = parts
    if filename.endswith(".py"):
        stem = filename[:-3]
    else:
        stem = next((filename[: -len(s)] for s in EXTENSIONS if filename.endswith(s)), None)
    if stem is None:
        return None
    names = folders if stem == "__init__" else folders + [stem]
    return ".".join(names) if names and all(n.isidentifier() for n in names) else None


def installed_roots(dist):
    """The import names a distribution installs, from RECORD (else top_level.txt): the shallowest regular packages."""
    files = [str(f).replace(os.sep, "/") for f in (dist.files or [])]
    files = [f for f in files if not f.startswith(("..", "/")) and "__pycache__" not in f
             and ".dist-info/" not in f and ".egg-info/" not in f]
    packages = {f.rsplit("/", 1)[0] for f in files if f.endswith("/__init__.py")}
    roots = set()
    for f in files:
        parts = f.split("/")
        if module_name(parts) is None:
            continue
        if len(parts) == 1:
            roots.add(module_name(parts))
            continue
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in packages:  # folders above it without __init__.py are namespace packages
                roots.add(".".join(parts[:i]))
                break
    if roots:
        return sorted(roots), "RECORD"
    top = [line.strip() for line in (dist.read_text("top_level.txt") or "").splitlines() if line.strip()]
    return sorted(t for t in top if all(p.isidentifier() for p in t.split("."))), "top_level.txt"


def choose_root(roots, dist_name):
    public = [r for r in roots if not r.split(".")[-1].startswith("_") and r.split(".")[0] not in ("test", "tests")]
    if len(public) == 1:
        return public[0]
    matching = [r for r in public if normal(r) == normal(dist_name)]
    return matching[0] if len(matching) == 1 else None


def distribution_of(import_name):
    """The installed distribution whose files hold ``import_name`` (for the version report), or None."""
    top = import_name.split(".")[0]
    for name in importlib.metadata.packages_distributions().get(top, []):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        roots, _ = installed_roots(dist)
        if any(import_name == r or import_name.startswith(r + ".") for r in roots):
            return dist
    return None


# ---- which module is the library
dist = None
if DISTRIBUTION:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        hint = ""
        try:
            if not IMPORT_NAME and importlib.util.find_spec(DISTRIBUTION) is not None:
                hint = (f"; {DISTRIBUTION!r} is an importable module: set it as verifier.import_name, "
                        "and verifier.library to the distribution that installs it")
        except Exception:
            pass
        fail("verifier.library", DISTRIBUTION,
             f"verifier.library {DISTRIBUTION!r} is not an installed distribution in {sys.executable} "
             f"(verifier.library is the name pip installs, e.g. google-adk){hint}")
if dist is not None:
    out["distribution"], out["version"] = dist.metadata["Name"], dist.version
    roots, source = installed_roots(dist)
    if IMPORT_NAME:
        related = [r for r in roots if IMPORT_NAME == r or IMPORT_NAME.startswith(r + ".") or r.startswith(IMPORT_NAME + ".")]
        if roots and not related:
            fail("verifier.import_name", IMPORT_NAME,
                 f"verifier.import_name {IMPORT_NAME!r} is not installed by verifier.library {DISTRIBUTION!r} "
                 f"in {sys.executable}; that distribution installs: {', '.join(roots)}")
    else:
        IMPORT_NAME = choose_root(roots, out["distribution"])
        if IMPORT_NAME is None:
            fail("verifier.import_name", None,
                 f"cannot tell which module verifier.library {DISTRIBUTION!r} installs from its {source} in "
                 f"{sys.executable} (found: {', '.join(roots) or 'none'}): set verifier.import_name")
        out["import_name"], out["import_name_source"] = IMPORT_NAME, f"{source} of {out['distribution']}"

if IMPORT_NAME:
    warnings.simplefilter("ignore")
    try:
        root = importlib.import_module(IMPORT_NAME)
    except BaseException as exc:
        given = out["import_name_source"] == "verifier.import_name"
        setting = "verifier.import_name" if given else "verifier.library"
        what = (f"verifier.import_name {IMPORT_NAME!r}" if given else
                f"verifier.library {DISTRIBUTION!r} (import name {IMPORT_NAME!r}, from its {out['import_name_source']})")
        fail(setting, IMPORT_NAME if given else DISTRIBUTION,
             f"{what} cannot be imported in {sys.executable}: {describe(exc)}")
    if dist is None:
        found = distribution_of(IMPORT_NAME)
        if found is not None:
            out["distribution"], out["version"] = found.metadata["Name"], found.version

    # ---- every module of the library, found on disk (nothing imported to find them)
    files = {IMPORT_NAME: getattr(root, "__file__", None)}
    for base in list(getattr(root, "__path__", None) or []):
        for folder, dirs, filenames in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d.isidentifier())
            rel = os.path.relpath(folder, base)
            prefix = [] if rel == "." else rel.split(os.sep)
            for filename in sorted(filenames):
                name = module_name(prefix + [filename])
                if name is not None and name.split(".")[-1] == "__main__":
                    continue  # importing it would run the program
                if name is not None:
                    full = IMPORT_NAME + ("." + name if name else "")
                    files.setdefault(full, os.path.join(folder, filename))
                elif filename == "__init__.py" and not prefix:
                    files[IMPORT_NAME] = os.path.join(folder, filename)
    out["modules_found"] = len(files)

    # ---- import them, within the time budget (CPU time binds; wall clock is a backstop)
    names, aliases = defaultdict(set), defaultdict(Counter)
    imported = set()
    for name in sorted(files):
        if out["budget_hit"] is None and name != IMPORT_NAME:  # the root is imported already: always indexed
            if time.process_time() - started_cpu > CPU_BUDGET:
                out["budget_hit"] = "cpu"
            elif time.monotonic() - started > WALL_BUDGET:
                out["budget_hit"] = "wall_clock"
        if out["budget_hit"] is not None:
            out["not_reached"].append(name)
            continue
        try:
            module = importlib.import_module(name)
        except BaseException as exc:
            out["failed"][name] = describe(exc)
            continue
        imported.add(name)
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, types.ModuleType):
                aliases[attr][value.__name__] += 1
            elif isinstance(value, type) or callable(value):
                owner, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
                if isinstance(owner, str) and isinstance(qual, str) and "<" not in qual:
                    names[attr].add(owner + "." + qual)
    out["modules_imported"] = len(imported)
    out["names"] = {k: sorted(v) for k, v in names.items()}
    out["module_aliases"] = {k: c.most_common(1)[0][0] for k, c in aliases.items()}

    # ---- the source of every module: what it defines; and what the modules not imported mention
    def module_level_defs(tree):
        found, todo = [], list(tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(node.name)
            elif isinstance(node, ast.Assign):
                found += [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.append(node.target.id)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(node).__name__ == "TryStar":
                for part in ("body", "orelse", "finalbody"):
                    todo += getattr(node, part, [])
                for handler in getattr(node, "handlers", []):
                    todo += handler.body
        return found

    defs, mentions = {}, {}
    for name in sorted(files):
        path = files[name]
        if not path or not path.endswith(".py"):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        try:
            for defined in module_level_defs(ast.parse(text)):
                defs.setdefault(defined, name)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            for a, b in re.findall(r"^(?:class|(?:async\s+)?def)\s+(\w+)|^(\w+)\s*[:=]", text, re.M):
                defs.setdefault(a or b, name)
        if name not in imported:
            for word in set(re.findall(r"\b_?[A-Z]\w*", text)):
                mentions.setdefault(word, name)
    out["source_defs"] = defs
    out["unprobed_mentions"] = mentions
finish()
'''


def probe_environment(
    settings: SandboxSettings,
    library: str | None = None,
    *,
    import_name: str | None = None,
    timeout_s: float = 600.0,
    cpu_budget_s: float = 150.0,
    memory_mb: int = 4096,
) -> LibraryIndex:
    """Run the probe in the sandbox: Python version, library version, and (for a library) its index.

    Args:
        settings: The sandbox of the target environment (its ``python``).
        library: The distribution (``google-adk``): its version is reported, and without ``import_name``
            the module to probe is derived from its RECORD (else top_level.txt).
        import_name: The module to probe (``google.adk``). With ``library`` too, it must be installed by it.
        timeout_s: Wall-clock limit of the whole probe; the import loop stops 30 s before it.
        cpu_budget_s: CPU seconds the import loop may use. CPU time, not wall clock, is what normally
            binds, so a busy machine does not make the probe see less of the library.
        memory_mb: Address-space limit of the probe (at least the sandbox's).

    Returns:
        The index; its ``coverage`` says what was imported, what failed and why, and whether the budget ran out.

    Raises:
        LibrarySettingError: ``library`` is not installed, ``import_name`` is not installed by it, the module
            to probe cannot be derived, or it cannot be imported (the message names the setting).
        RuntimeError: The probe did not produce its report (its stderr is in the message).
    """
    wall_budget = max(10.0, timeout_s - 30.0)
    probe_settings = SandboxSettings(
        python=settings.python,
        timeout_s=timeout_s,
        memory_mb=max(memory_mb, settings.memory_mb),
        max_processes=settings.max_processes,
        cpu_s=int(cpu_budget_s + 60),
        file_mb=settings.file_mb,
        max_output_chars=settings.max_output_chars,
        sandbox_uid=settings.sandbox_uid,
        extra_ro_binds=settings.extra_ro_binds,
    )
    config = {"distribution": library or None, "import_name": import_name or None,
              "cpu_budget_s": cpu_budget_s, "wall_budget_s": wall_budget}  # fmt: skip
    source = f"CONFIG = json.loads({_literal(json.dumps(config))})\n"
    execution = run_python("import json\n" + source + _PROBE, "probe_environment.py", probe_settings)
    raw = execution.artifacts.get("environment.json")
    if raw is None:
        stderr = safe_text(execution.stderr, 2000, keep="tail")
        raise RuntimeError(f"environment probe failed ({execution.outcome}): {stderr}")
    data = json.loads(raw)
    if data.get("error"):
        error = data["error"]
        raise LibrarySettingError(safe_text(error["message"], 2000), setting=error["setting"], value=error["value"],
                                  python=str(settings.python))  # fmt: skip
    coverage = ProbeCoverage(
        modules_found=data["modules_found"],
        modules_imported=data["modules_imported"],
        failed=data["failed"],
        not_reached=data["not_reached"],
        budget_hit=data["budget_hit"],
        cpu_budget_s=cpu_budget_s,
        wall_budget_s=wall_budget,
        seconds=data["seconds"],
        cpu_seconds=data["cpu_seconds"],
    )
    return LibraryIndex(
        import_name=data["import_name"],
        import_name_source=data["import_name_source"],
        distribution=data["distribution"],
        version=data["version"],
        python_version=data["python_version"],
        python=data["python"],
        names=data["names"],
        module_aliases=data["module_aliases"],
        source_defs=data["source_defs"],
        unprobed_mentions=data["unprobed_mentions"],
        coverage=coverage,
    )


# --------------------------------------------------------------------------------------------------
# The offline prover

_PRELUDE = r'''{doc}
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
    if kind == "unprobed":
        name, reason = value
        try:
            return _walk(name, {{}})
        except (_Missing, ImportError):
            raise _Unimportable(reason) from None
    raise _Missing(value, head=True)


def _submodule(obj, part):
    """``obj.part`` when ``obj`` is a package whose submodule ``part`` was not imported yet; None if there is none."""
    if not isinstance(obj, type(builtins)) or not isinstance(getattr(obj, "__name__", None), str):
        return None
    name = obj.__name__ + "." + part
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def _walk(path, names, last_exists_only=False):
    head, _, rest = path.partition(".")
    if head in names:
        obj, parts = _bind(names[head]), (rest.split(".") if rest else [])
    else:
        obj, parts = _import_path(path)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        present = _has(obj, part) if (last and last_exists_only and isinstance(obj, type)) else hasattr(obj, part)
        child = None if present else _submodule(obj, part)
        if not present and child is None:
            raise _Missing(path + ": no attribute " + repr(part) + " on " + repr(obj))
        if last and last_exists_only:
            return True
        obj = getattr(obj, part) if present else child
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
        atoms = self._atoms(claim)
        if atoms is not None:
            body: str | None = self._atoms_body(claim, atoms) if atoms else None
        else:
            body = {
                "import": self._import_body,
                "exists": self._exists_body,
                "signature_param": self._signature_body,
                "constructor_kwarg": self._signature_body,
                "expression": self._expression_body,
                "snippet": self._snippet_body,
            }[claim.kind](claim)
        if body is None:
            return Proof(claim, None, "unverifiable_offline", None, "the claim's names cannot be resolved offline")
        doc = _docstring(f"Proof for case {claim.case_id!r}, option {claim.letter!r}: {claim.hypothesis}")
        source = _PRELUDE.format(doc=doc, evidence=EVIDENCE_FILE) + "\n\n" + (ATOM_SOURCE + "\n\n" if atoms else "") + body
        return Proof(claim, source, "proof", f"test_option_{_safe(claim.letter)}.py")

    # ---- atoms (issue 13)

    def _atoms(self, claim: Claim) -> list[dict[str, Any]] | None:
        """The atoms a claim's proof runs; None for the kinds proven by their own bodies.

        A name question about a role (``which plugin``) adds a ``role`` atom when the library defines the
        role's base class (``BasePlugin``): a named class that does not derive from it is not the answer.
        """
        if claim.kind in ATOM_KINDS:
            return [dict(a) for a in claim.details.get("atoms") or []]
        roles = self._role_paths(claim) if claim.kind == "exists" else []
        if not roles:
            return None
        path = claim.details["path"]
        return [{"check": "exists", "path": path}, {"check": "role", "path": path, "bases": roles}]

    def _role_paths(self, claim: Claim) -> list[str]:
        """The role bases (``BasePlugin``) the library index holds, fully qualified."""
        if self.index is None or not self.index.import_name:
            return []
        found: list[str] = []
        for base in claim.details.get("role_bases") or []:
            resolved = self.index.resolve(base) if base in self.index.names else None
            if resolved is not None and resolved[1] not in found:
                found.append(resolved[1])
        return found

    def _atoms_body(self, claim: Claim, atoms: list[dict[str, Any]]) -> str:
        names: dict[str, Any] = dict(self._names(claim, list(claim.details.get("free_names") or [])))
        for name, spec in list(names.items()):
            other = self._instance_class(name) if spec[0] == "path" and self.index and name in self.index.module_aliases else None
            if other and other != spec[1]:  # ``app``: the module the library imports as ``app``, or an ``App``
                names[name] = ("either", [spec, ("path", other)])
        return atoms_body(_safe(claim.letter), names, atoms)

    def _instance_class(self, name: str) -> str | None:
        """The class a lower-case name is an instance of (``runner`` -> ``Runner``), by the index's own rule."""
        if self.index is None or not name[:1].islower():
            return None
        key = name.lower().replace("_", "")
        for short, fqns in self.index.names.items():
            if short[:1].isupper() and short.lower() == key:
                return self.index._best(fqns)
        return None

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
            if self.index is not None and self.index.import_name and name not in _STDLIB_HINTS:
                resolved = self.index.resolve(name)
                weak = self._weak_name(claim, name, resolved) if resolved is not None else None
                if weak is not None:
                    names[name] = ("unprobed", (name, weak))  # undecided: the name is not evidence here
                    continue
                if resolved is not None:
                    names[name] = resolved
                    continue
                absent = self.index.absent(name)  # undecided when the probe may have missed it, never false
                if absent is None:
                    continue
                kind, reason = absent
                if kind == "unprobed":
                    names[name] = ("unprobed", (name, reason))
                elif claim.details.get("library_symbol") or name[:1].isupper():
                    names[name] = ("missing", reason)
        return names

    def _weak_name(self, claim: Claim, name: str, resolved: tuple[str, str]) -> str | None:
        """Why a lower-case name the index resolved is no evidence about the question's object; None when it is.

        A lower-case name counts when the question names it (``runner`` for a question about ``Runner``), when the
        question's snippet or its file imports it, or when it is the library's alias of a module and nothing else
        (``types``). A snippet's own variable is the snippet's, not the library's; and a word that is both a module
        somewhere in the library and an instance of a class (``agent``: ``google.adk.cli.built_in_agents.agent``
        or an ``Agent``) is not evidence unless the question names it.
        """
        if not name[:1].islower() or self.index is None:
            return None
        snippet = claim.details.get("snippet_names") or {}
        if name in (snippet.get("imported") or []):
            return None
        if name in (snippet.get("defined") or []):
            return f"`{name}` is the snippet's own name, which this proof does not run"
        if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", claim.question, re.I):
            return None
        if name in self.index.module_aliases and self._instance_class(name) is None:
            return None
        return (f"`{name}` is neither named in the question nor the snippet's: reading it as {resolved[1]} "
                "(a word that happens to name something in the library) is no evidence")  # fmt: skip

    # ---- bodies

    def _import_body(self, claim: Claim) -> str:
        statement = claim.details["statement"]
        return f"""STATEMENT = {_literal(statement)}


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
        head_from_question = (
            "." in path
            and not claim.details.get("library_symbol")
            and (claim.subject is not None and claim.option_text.strip().rstrip(".").strip("`()") != path)
        )
        return f"""NAMES = {_literal(names)}
PATH = {_literal(path)}
HEAD_FROM_QUESTION = {_literal(head_from_question)}


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
        load = f"""NAMES = {_literal(names)}
SUBJECT = {_literal(subject)}


def _subject():
    try:
        return _load(SUBJECT, NAMES)
    except (_Missing, _Unimportable, ImportError) as exc:
        _undecided("cannot load " + SUBJECT + ": " + type(exc).__name__ + ": " + str(exc))
"""
        letter = _safe(claim.letter)
        if claim.details.get("exact"):
            return (
                load
                + f"""EXPECTED = {_literal(claim.details["params"])}
EXPECT_ASYNC = {_literal(claim.details["is_async"])}


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
            )
        value = claim.details.get("value")  # the option's literal text (``delete=False``): evaluated in the proof
        named_only = claim.decides == "necessary"
        return (
            load
            + f"""PARAM = {_literal(claim.details["param"])}
EXPECT_ACCEPTED = {_literal(claim.details["expect_accepted"])}
VALUE_SOURCE = {_literal(value)}


def test_option_{letter}():
    target = _subject()
    value = None if VALUE_SOURCE is None else ast.literal_eval(VALUE_SOURCE)
    accepted, how = _accepts(target, PARAM, value, named_only={_literal(named_only)})
    if accepted != EXPECT_ACCEPTED:
        _false(SUBJECT + (" accepts " if accepted else " does not accept ") + PARAM + ": " + how)
    _true(SUBJECT + (" accepts " if accepted else " does not accept ") + PARAM + ": " + how)
"""
        )

    def _snippet_body(self, claim: Claim) -> str:
        """Run the question's snippet and check the outcome the option names (:mod:`.snippet_claims`)."""
        return snippet_claims.proof_body(_safe(claim.letter), claim.details, _literal)

    def _expression_body(self, claim: Claim) -> str:
        d = claim.details
        free = list(d.get("free_names") or [])
        names = self._names(claim, free)
        mode = d["mode"]
        letter = _safe(claim.letter)
        head = f"""NAMES = {_literal(names)}
FREE = {_literal(free)}
SETUP = {_literal(d.get("setup", ""))}
EXPR = {_literal(d["expr"])}


def test_option_{letter}():
    try:
        ns = _namespace(NAMES, FREE)
        if SETUP:
            exec(SETUP, ns)
    except (_Missing, ImportError, AttributeError) as exc:
        {"_false" if mode == "evaluates" else "_undecided"}("cannot set up: " + type(exc).__name__ + ": " + str(exc))
    except _Unimportable as exc:
        _undecided(str(exc))
    try:
        code = compile(EXPR, "<option>", "eval")
    except (SyntaxError, ValueError) as exc:
        _undecided("the expression does not compile: " + type(exc).__name__ + ": " + str(exc))
    raised = None
    try:
        result = eval(code, ns)
    except Exception as exc:
        raised = exc
"""
        if mode == "evaluates":
            return (
                head
                + """    if raised is not None:
        _false(EXPR + " raises " + type(raised).__name__ + ": " + str(raised))
    _true(EXPR + " evaluates", fingerprint=_fingerprint(result))
"""
            )
        if mode == "raises":
            return (
                head
                + f"""    EXPECTED = {_literal(d["exception"])}
    if raised is None:
        _false(EXPR + " returns " + repr(result) + " without raising")
    if not _exception_matches(raised, EXPECTED, NAMES):
        _false(EXPR + " raises " + type(raised).__name__ + ", not " + EXPECTED)
    _true(EXPR + " raises " + type(raised).__name__ + ": " + str(raised))
"""
            )
        if mode == "match":
            return (
                head
                + f"""    EXPECTED = ast.literal_eval({_literal(d["expected"])})
    if raised is not None:
        _false(EXPR + " raises " + type(raised).__name__ + ": " + str(raised))
    if not isinstance(result, re.Match) or result.group(0) != EXPECTED:
        _false(EXPR + " returns " + repr(result))
    _true(EXPR + " returns " + repr(result))
"""
            )
        return (
            head
            + f"""    EXPECTED = ast.literal_eval({_literal(d["expected"])})
    if raised is not None:
        _false(EXPR + " raises " + type(raised).__name__ + ": " + str(raised) + "; expected " + repr(EXPECTED))
    if not _same(result, EXPECTED):
        _false(EXPR + " returns " + repr(result) + ", not " + repr(EXPECTED), actual=repr(result))
    _true(EXPR + " returns " + repr(result), fingerprint=_fingerprint(result))
"""
        )


#: Heads that are Python's own modules even when a library re-exports something of the same name.
_STDLIB_HINTS = frozenset(
    "os sys re json math time datetime collections functools itertools shutil subprocess pathlib typing "
    "inspect asyncio logging enum dataclasses abc io uuid base64 hashlib random statistics textwrap "
    "urllib csv sqlite3 tempfile heapq bisect argparse threading multiprocessing concurrent copy string".split()
)


def _safe(letter: str) -> str:
    """An ASCII identifier part for an option letter (file and test names); a digest keeps altered letters apart."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", letter)[:40]
    if cleaned != letter or not cleaned:
        cleaned += "_" + hashlib.sha256(letter.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return cleaned


def _literal(value: Any) -> str:
    """A pure-ASCII Python literal for ``value`` (str, number, bool, None, and lists/tuples/dicts of them).

    ``ascii()`` escapes quotes, backslashes, newlines, NULs, surrogates and every non-ASCII character, so the
    literal compiles and evaluates back to ``value`` whatever an option's text holds.
    """
    return ascii(value)


def _docstring(text: str) -> str:
    """A triple-quoted, pure-ASCII docstring literal that evaluates to ``text`` exactly.

    Backslashes and double quotes are escaped (so an ending ``"`` or an inner ``\"\"\"`` cannot close it),
    line breaks stay line breaks, and other control or non-ASCII characters become escapes.
    """
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n" or " " <= char <= "~":
            out.append(char)
        else:
            out.append(ascii(char)[1:-1])
    return '"""' + "".join(out) + '"""'


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
