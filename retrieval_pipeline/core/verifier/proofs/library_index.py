"""The library under test as the sandbox sees it: the environment probe and the index it builds.

:func:`probe_environment` runs :mod:`..sandbox_side.probe_library` in the sandbox, once per suite (the host
never imports the library under test), and returns a :class:`LibraryIndex`: where each class and function
the library exposes is defined, the modules it imports under other names, and what its source defines.
The offline prover resolves names that are not importable as written (bare ``LlmAgent``, ``types.Part``,
``runner.run_async``) through it.

**The library under test** has two names: its *distribution* (``google-adk``, what pip installs; its version
is reported) and its *import name* (``google.adk``, the module probed). Given only the distribution, the probe
derives the import name from the distribution's own file list (``RECORD``, else ``top_level.txt``) inside the
target environment. A distribution that is not installed, or an import name that cannot be imported, stops the
verifier with a :class:`LibrarySettingError` naming the setting: an empty index would turn every option that
names a library class into a confident "false".

**An incomplete probe decides nothing.** The probe records its coverage (:class:`ProbeCoverage`: modules
found, imported, failed with their reasons, not reached because the time budget ran out). A name the index
does not hold is proven absent only when no module the probe could not import defines or mentions it;
otherwise the option is undecided, with the module and the reason in the evidence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_in_sandbox
from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.sandbox_side import probe_library, source

#: The probe's file in the sandbox's working directory.
PROBE_FILE = "probe_library.py"
#: Bytes of the probe's report read back (the index of a large library).
MAX_REPORT_BYTES = 16 * 2**20
#: Failed or unreached modules listed by name in a coverage report (the counts are always complete).
COVERAGE_LISTED = 200
#: What the probe's report gives the coverage and the index, field by field.
_COVERAGE_FIELDS = ("modules_found", "modules_imported", "failed", "not_reached", "budget_hit", "seconds", "cpu_seconds")
_INDEX_FIELDS = (
    "import_name",
    "import_name_source",
    "distribution",
    "version",
    "python_version",
    "python",
    "names",
    "module_aliases",
    "source_defs",
    "unprobed_mentions",
)


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
        return (
            f"{self.modules_imported} of {self.modules_found} modules imported, {len(self.failed)} failed, "
            f"{len(self.not_reached)} not reached; {budget}"
        )

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
        instance_of = self.instance_class(name)  # an instance variable named after its class: runner -> Runner
        return ("path", instance_of) if instance_of else None

    def resolved_as_instance(self, name: str) -> bool:
        """Whether :meth:`resolve` binds ``name`` only as an instance of the class of its name, not as a module,
        alias or object of that very name."""
        return name not in self.module_aliases and name not in self.names and self.instance_class(name) is not None

    def instance_class(self, name: str) -> str | None:
        """The class a lower-case name may stand for an instance of (``runner`` -> ``Runner``, ``tool_context`` ->
        ``ToolContext``), else None."""
        if not name[:1].islower():
            return None
        key = name.lower().replace("_", "")
        for short, fqns in self.names.items():
            if short[:1].isupper() and short.lower() == key:
                return self._best(fqns)
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
                return (
                    "unprobed",
                    f"{candidate} is not exposed by any module the probe imported, but {module} "
                    f"mentions it and the probe did not import it: {why}",
                )
        for candidate in candidates:
            if candidate in self.source_defs:
                return (
                    "unprobed",
                    f"{candidate} is defined in {self.import_name}'s source "
                    f"({self.source_defs[candidate]}) but no importable module exposes it here",
                )
        if name[:1].islower():
            return None
        coverage = "every module imported" if self.coverage.complete else self.coverage.summary()
        return (
            "missing",
            f"{name} is not defined anywhere in {self.import_name} ({coverage}, and no module the probe did not import mentions it)",
        )

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
    request = {
        "distribution": library or None,
        "import_name": import_name or None,
        "cpu_budget_s": cpu_budget_s,
        "wall_budget_s": wall_budget,
    }
    files = {PROBE_FILE: source(PROBE_FILE), probe_library.REQUEST: json.dumps(request)}
    argv = [str(settings.python), PROBE_FILE]
    execution = run_in_sandbox(files, argv, probe_settings, collect_suffix=probe_library.REPORT, max_artifact_bytes=MAX_REPORT_BYTES)
    raw = execution.artifacts.get(probe_library.REPORT)
    if raw is None:
        stderr = safe_text(execution.stderr, 2000, keep="tail")
        raise RuntimeError(f"environment probe failed ({execution.outcome}): {stderr}")
    data = json.loads(raw)
    if data.get("error"):
        error = data["error"]
        raise LibrarySettingError(
            safe_text(error["message"], 2000), setting=error["setting"], value=error["value"], python=str(settings.python)
        )
    coverage = ProbeCoverage(**{k: data[k] for k in _COVERAGE_FIELDS}, cpu_budget_s=cpu_budget_s, wall_budget_s=wall_budget)
    return LibraryIndex(**{k: data[k] for k in _INDEX_FIELDS}, coverage=coverage)
