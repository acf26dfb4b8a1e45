"""Resolve gold FQN strings by importing them in the library's own environment, never in the pipeline's.

Benchmarks name objects the way users import them (``google.adk.Agent``), and a re-export under another
name (``Agent = LlmAgent``) is invisible to id, alias and suffix matching. The library itself knows:
importing ``google.adk.Agent`` gives a class whose ``__module__`` + ``__qualname__`` is
``google.adk.agents.llm_agent.LlmAgent``, its canonical path, which the corpus lists.

:class:`ImportResolver` asks the dataset's library environment (``verifier.python``) about every gold the
index lacks, all of them in ONE run: a small standard-library script (:mod:`.sandbox_side.resolve_imports`)
reads the golds from ``request.json`` and writes, per gold, its canonical path, its kind, whether importing
that path gives the very same object, or the exception the import raised. The run is the verifier's
sandbox (:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_in_sandbox`: bubblewrap, an unprivileged
user, no network, a wall-clock timeout, CPU and memory limits, bounded output) with ``python -I``
(isolated mode: no ``PYTHON*`` variables, no user site, not the script's folder on ``sys.path``).

The canonical path is then resolved against the corpus like any gold (exact id, alias, suffix);
the resolution's method is ``import`` and its note says ``resolved by import: X is Y``. A gold whose
import raises is ``unresolved``, the exception in its note. A missing or broken environment stops the
stage with a :class:`LibraryEnvironmentError` naming the interpreter and the dataset.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.pairs.gold import CorpusLookup, GoldResolution, resolve_gold
from retrieval_pipeline.core.pairs.sandbox_side import resolve_imports, source
from retrieval_pipeline.core.services.sandbox.bubblewrap import run_in_sandbox
from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.services.sandbox.settings import SandboxError, SandboxSettings

#: The script's file, its request and its answer (the only artifact collected) in the sandbox's working directory.
SCRIPT_FILE = "resolve_imports.py"
REQUEST_FILE = resolve_imports.REQUEST
RESULT_FILE = resolve_imports.RESULT
#: The longest gold string sent (longer ones are refused unasked).
MAX_GOLD_CHARS = 300
#: Characters of an exception kept per gold, of stderr kept in an error, and bytes of the answer read back.
MAX_ERROR_CHARS = 500
MAX_STDERR_CHARS = 2_000
MAX_RESULT_BYTES = 4 * 2**20

#: How the note of a gold the library's environment was asked about begins (resolved, or its import failed).
ASKED_NOTE_PREFIXES = ("resolved by import: ", "import failed in ")

_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class LibraryEnvironmentError(InputError):
    """The library's environment (``verifier.python``) is missing or does not run the import script.

    Attributes:
        python: The interpreter named by the dataset's ``verifier.python``.
    """

    def __init__(self, message: str, *, python: str | Path, dataset: str) -> None:
        super().__init__(message, path=str(python), case_id=f"dataset {dataset}" if dataset else None)
        self.python = str(python)


@dataclass(frozen=True)
class ImportedObject:
    """What importing one gold string in the library's environment gave.

    Attributes:
        gold: The gold string, as asked.
        canonical: ``__module__`` + ``__qualname__`` of the object (a module's ``__name__``), or None.
        kind: ``module``, ``class``, ``function`` or ``object:<type>``; None when the import raised.
        identical: Importing ``canonical`` gives the very same object (``gold is canonical`` holds).
        error: The exception the import raised (``Type: message``), or why there is no canonical path.
    """

    gold: str
    canonical: str | None
    kind: str | None
    identical: bool
    error: str | None


@dataclass
class ImportResolver:
    """Resolve golds the corpus lacks by importing them in the library's environment (one sandboxed run).

    Attributes:
        python: The library environment's interpreter (a dataset's ``verifier.python``).
        dataset: The dataset's name, for errors.
        import_name: The library's module (``google.adk``): only golds under it are imported; None imports any.
        search_paths: Folders put first on the script's ``sys.path`` (and shown read-only in the sandbox);
            a real environment needs none: its packages are installed.
        timeout_s: Wall-clock limit of the run (importing a large library takes seconds).
        memory_mb: Address-space limit of the run.
    """

    python: Path
    dataset: str = ""
    import_name: str | None = None
    search_paths: tuple[Path, ...] = ()
    timeout_s: float = 180.0
    memory_mb: int = 4096

    def resolve(self, golds: Sequence[str], lookup: CorpusLookup) -> dict[str, GoldResolution]:
        """Import every gold in one run and map each canonical path to a corpus document.

        Args:
            golds: Gold strings the corpus indexes do not resolve (duplicates are asked once).
            lookup: The corpus indexes the canonical paths are resolved against.

        Returns:
            Per gold (stripped): method ``import`` with the document, or ``unresolved`` with the reason
            (outside the library, not a dotted name, the import's exception, or a canonical path the
            corpus does not hold).

        Raises:
            LibraryEnvironmentError: The interpreter is missing, or the run gave no usable answer.
        """
        unique = list(dict.fromkeys(g.strip() for g in golds))
        refused = {g: reason for g in unique if (reason := self._refusal(g)) is not None}
        asked = [g for g in unique if g not in refused]
        imported = self.import_golds(asked) if asked else {}
        resolutions = {g: GoldResolution(g, None, "unresolved", note=f"not imported: {reason}") for g, reason in refused.items()}
        resolutions |= {g: resolution_from_import(imported[g], lookup, self.python) for g in asked}
        return resolutions

    def import_golds(self, golds: Sequence[str]) -> dict[str, ImportedObject]:
        """Run :mod:`.sandbox_side.resolve_imports` once in the library's environment; what each gold turned out to be.

        Raises:
            LibraryEnvironmentError: The interpreter is missing, the sandbox cannot start it, or the
                script did not write a well-formed answer (its stderr is in the message).
        """
        self._check_python()
        request = {"golds": list(golds), "paths": [str(p) for p in self.search_paths], "max_error_chars": MAX_ERROR_CHARS}
        settings = SandboxSettings(
            python=self.python,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            cpu_s=int(self.timeout_s) + 1,
            max_output_chars=MAX_STDERR_CHARS,
            extra_ro_binds=tuple(self.search_paths),
        )
        files = {SCRIPT_FILE: source(SCRIPT_FILE), REQUEST_FILE: json.dumps(request)}
        argv = [str(self.python), "-I", SCRIPT_FILE]
        try:
            execution = run_in_sandbox(files, argv, settings, collect_suffix=".result.json", max_artifact_bytes=MAX_RESULT_BYTES)
        except (SandboxError, OSError) as exc:
            raise self._error(f"the library environment cannot be started in the sandbox: {exc}") from exc
        return self._parse(execution, list(golds))

    def _refusal(self, gold: str) -> str | None:
        """Why a gold is not sent to the library (None: it is asked)."""
        if len(gold) > MAX_GOLD_CHARS or not _DOTTED.match(gold):
            return f"not a dotted Python name of at most {MAX_GOLD_CHARS} characters"
        if self.import_name and gold != self.import_name and not gold.startswith(self.import_name + "."):
            return f"outside the library's import name {self.import_name!r}"
        return None

    def _check_python(self) -> None:
        """A clear error when the interpreter is missing or not a file."""
        if not Path(self.python).exists():
            raise self._error("the library environment's interpreter does not exist (create it with `make adk-env`)")
        if not Path(self.python).is_file():
            raise self._error("the library environment's interpreter is not a file")

    def _parse(self, execution: Execution, golds: list[str]) -> dict[str, ImportedObject]:
        """The answer of the run, checked: one well-formed record per gold asked."""
        raw = execution.artifacts.get(RESULT_FILE)
        if raw is None:
            stderr = safe_text(execution.stderr, MAX_STDERR_CHARS, keep="tail").strip() or "(no stderr)"
            what = f"{execution.outcome}, exit code {execution.exit_code}" + (f", {execution.limit} limit" if execution.limit else "")
            raise self._error(f"the library environment did not answer the import script ({what}): {stderr}")
        try:
            records = [_imported(r) for r in json.loads(raw)["results"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error(f"the import script's answer is malformed: {exc}") from exc
        by_gold = {r.gold: r for r in records}
        absent = [g for g in golds if g not in by_gold]
        if absent:
            raise self._error(f"the import script did not answer for {len(absent)} gold(s), e.g. {absent[0]!r}")
        return by_gold

    def _error(self, message: str) -> LibraryEnvironmentError:
        return LibraryEnvironmentError(f"verifier.python {self.python}: {message}", python=self.python, dataset=self.dataset)


def _imported(record: Any) -> ImportedObject:
    """One record of the script's answer, typed; its texts redacted and capped (they came from the library)."""
    if not isinstance(record, dict) or not isinstance(record["gold"], str):
        raise TypeError(f"a result record must be a mapping with a string 'gold', got {record!r:.200}")
    text = {k: (safe_text(record[k], MAX_ERROR_CHARS) if record.get(k) is not None else None) for k in ("canonical", "kind", "error")}
    return ImportedObject(record["gold"], text["canonical"], text["kind"], bool(record.get("identical")), text["error"])


def resolution_from_import(imported: ImportedObject, lookup: CorpusLookup, python: str | Path) -> GoldResolution:
    """Map what the import gave to a corpus document: its canonical path, resolved by id, alias or suffix.

    Args:
        imported: The script's answer for one gold.
        lookup: The corpus indexes.
        python: The interpreter that imported it (named in the note of a failed import).

    Returns:
        Method ``import`` when the canonical path resolves (the note says ``resolved by import: X is Y``,
        and how ``Y`` matched when it is not a corpus id itself); otherwise ``unresolved`` with the reason.
    """
    gold = imported.gold
    if imported.canonical is None:
        return GoldResolution(gold, None, "unresolved", note=f"{ASKED_NOTE_PREFIXES[1]}{python}: {imported.error}")
    relation = "is" if imported.identical else "resolves to"
    said = f"{ASKED_NOTE_PREFIXES[0]}{gold} {relation} {imported.canonical}"
    matched = resolve_gold(imported.canonical, lookup)
    if matched.doc_id is None:
        return GoldResolution(gold, None, "unresolved", matched.candidates, note=f"{said}, which the corpus does not hold ({matched.note})")
    how = "" if matched.method == "exact" else f" ({matched.method} of {matched.doc_id}: {matched.note})"
    return GoldResolution(gold, matched.doc_id, "import", matched.candidates, note=said + how)
