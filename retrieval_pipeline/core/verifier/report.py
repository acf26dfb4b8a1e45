"""The verifier's quality report: ``quality_report.json`` and a Markdown summary.

Every text that came out of a sandbox (notes, reasons, stdout/stderr, proposal notes) is redacted and
capped again here (:func:`~retrieval_pipeline.core.services.sandbox.redaction.safe_text`; idempotent), whatever
built the verdicts: a secret a proof printed never reaches the report, nor what is made from it.

The report also says how much of the library the verdicts rest on (``meta.probe``, :func:`probe_meta`):
the module probed and where its name came from, the distribution and version, and the probe's coverage
(modules found, imported, failed with their reasons, not reached, whether the time budget ran out).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from retrieval_pipeline.core.common.atomic import atomic_write_text
from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.verifier.fixes.remediation import Proposal
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OUTPUT_TAIL_CHARS, VERDICTS, OptionEvidence, Verdict
from retrieval_pipeline.core.verifier.verify import VerificationRun

#: Longest reason (or proposal note) kept; a reason quotes a note and names the option.
REASON_CHARS = EVIDENCE_CHARS + 200
#: How a report names the library when only Python's own is under test.
STANDARD_LIBRARY = "standard library"


def probe_meta(index: LibraryIndex) -> dict[str, Any]:
    """What the probe saw: the module probed (and where its name came from), the distribution, and the coverage.

    Args:
        index: The probed library index of the run.

    Returns:
        ``import_name``, ``import_name_source``, ``distribution``, ``version``, then the coverage
        (:meth:`~retrieval_pipeline.core.verifier.proofs.library_index.ProbeCoverage.to_report`): ``complete``, ``summary``,
        ``modules_found``/``_imported``/``_failed``/``_not_reached``, ``budget_hit``, ``budget``, ``seconds``,
        ``cpu_seconds``, ``failure_causes``, ``failed`` (module -> reason) and ``not_reached``.
    """
    return {
        "import_name": index.import_name,
        "import_name_source": index.import_name_source,
        "distribution": index.distribution,
        "version": index.version,
        **index.coverage.to_report(),
    }


def run_meta(run: VerificationRun, *, suite: str, settings: Any = None) -> dict[str, Any]:
    """What a report needs to know about a run: library, versions, prover, timings, probe coverage.

    Args:
        run: The verification run.
        suite: The suite or dataset the questions come from (the report's title).
        settings: The sandbox settings, recorded as text when given.

    Returns:
        ``suite``; ``library`` (the distribution, else the module probed, else :data:`STANDARD_LIBRARY`),
        ``import_name``, ``distribution``, ``library_version`` (the Python version for the standard
        library), ``python_version``, ``python``, ``prover``, ``total_seconds``, ``probe_seconds``,
        ``skipped_cases``, ``probe``; with ``settings``, ``sandbox``; with a verdict cache, ``verdict_cache``
        (:func:`cache_meta`).
    """
    index = run.index
    named = index.distribution or index.import_name
    meta: dict[str, Any] = {
        "suite": suite,
        "library": named or STANDARD_LIBRARY,
        "import_name": index.import_name,
        "distribution": index.distribution,
        "library_version": index.version if named else index.python_version,
        "python_version": index.python_version,
        "python": index.python,
        "prover": run.prover,
        "total_seconds": run.total_seconds,
        "probe_seconds": index.probe_seconds,
        "skipped_cases": run.skipped,
        "probe": probe_meta(index),
    }
    if run.cache_status is not None:
        meta["verdict_cache"] = cache_meta(run)
    if settings is not None:
        meta["sandbox"] = {k: str(v) for k, v in vars(settings).items()}
    return meta


def cache_meta(run: VerificationRun) -> dict[str, Any]:
    """The verdict cache's part of the report: ``status`` (``used`` or ``not used: <why>``), ``reused``, ``proven``, ``reused_cases``."""
    return {"status": run.cache_status, "reused": len(run.reused), "proven": run.proven, "reused_cases": list(run.reused)}


def library_label(meta: Mapping[str, Any]) -> str:
    """The library a report is about, in words: ``google-adk 1.24.1 (Python 3.11.7)``, ``standard library (Python 3.11.7)``.

    Args:
        meta: The report's ``meta`` (:func:`run_meta`, or any mapping with some of its keys).

    Returns:
        The distribution (else the module) and its version, or the standard library, with the Python
        version when known; never the text ``None``.
    """
    python = meta.get("python_version")
    library = meta.get("library")
    if not library or library in (STANDARD_LIBRARY, "python stdlib"):
        return f"{STANDARD_LIBRARY} (Python {python})" if python else STANDARD_LIBRARY
    version = meta.get("library_version")
    label = f"{library} {version}" if version else f"{library} (version unknown)"
    return f"{label} (Python {python})" if python else label


def _evidence(e: OptionEvidence) -> dict[str, Any]:
    return {
        "letter": e.letter,
        "option_text": e.claim.option_text,
        "claim": {
            "kind": e.claim.kind,
            "hypothesis": e.claim.hypothesis,
            "subject": e.claim.subject,
            "decides": e.claim.decides if e.claim.decidable else None,
        },
        "proof_status": e.proof_status,
        "prover": e.prover,
        "decided_by": e.decided_by,
        "state": e.state,
        "option_true": e.option_true,
        "note": safe_text(e.note, REASON_CHARS),
        "execution": None
        if e.outcome is None
        else {
            "outcome": e.outcome,
            "exit_code": e.exit_code,
            "limit": e.limit,
            "duration_s": e.duration_s,
            "test_source": e.test_source,
            "stdout": safe_text(e.stdout, OUTPUT_TAIL_CHARS, keep="tail"),
            "stderr": safe_text(e.stderr, OUTPUT_TAIL_CHARS, keep="tail"),
        },
    }


def quality_report(
    verdicts: Sequence[Verdict],
    meta: Mapping[str, Any],
    proposals: Sequence[Proposal] = (),
    *,
    index: LibraryIndex | None = None,
) -> dict[str, Any]:
    """Counts per verdict, every case with reasons and evidence, proposals, versions, timings and probe coverage.

    Args:
        verdicts: The run's verdicts.
        meta: What the run was (see :func:`run_meta`); kept as given.
        proposals: Proposed fixes, re-verified.
        index: The run's library index: its coverage goes to ``meta.probe`` (:func:`probe_meta`) when
            ``meta`` has none.
    """
    counts = {label: sum(1 for v in verdicts if v.verdict == label) for label in VERDICTS}
    durations = [v.duration_s for v in verdicts]
    meta = dict(meta)
    if index is not None and "probe" not in meta:
        meta["probe"] = probe_meta(index)
    return {
        "meta": meta,
        "counts": counts,
        "total_cases": len(verdicts),
        "seconds_per_question": {
            "mean": round(statistics.fmean(durations), 3) if durations else None,
            "median": round(statistics.median(durations), 3) if durations else None,
            "max": round(max(durations), 3) if durations else None,
        },
        "flagged": [v.case_id for v in verdicts if v.verdict in ("Ambiguous", "Incorrect")],
        "cases": [
            {
                "case_id": v.case_id,
                "verdict": v.verdict,
                "marked": v.marked,
                "proven_true": v.proven_true,
                "proven_false": v.proven_false,
                "consistent": v.consistent,
                "undecided": v.undecided,
                "reasons": [safe_text(r, REASON_CHARS) for r in v.reasons],
                "duration_s": v.duration_s,
                "evidence": [_evidence(e) for e in v.evidence],
            }
            for v in verdicts
        ],
        "proposals": [_proposal(p) for p in proposals],
    }


def _proposal(p: Proposal) -> dict[str, Any]:
    """A proposal as reported: its note and the reasons of its attempts redacted and capped."""
    data = asdict(p)
    data["note"] = safe_text(data.get("note", ""), REASON_CHARS)
    for attempt in data.get("attempts", []):
        attempt["reasons"] = [safe_text(r, REASON_CHARS) for r in attempt.get("reasons", [])]
    return data


def write_quality_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Write the report as indented UTF-8 JSON, atomically (a uniquely named temp file, then a rename).

    Args:
        report: Output of the report builder.
        path: Target file; its folder is created.

    Returns:
        The path written.
    """
    return atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False, default=str))


#: What an Incorrect verdict asks of the reader (docs/verifier.md, "Questions written after the rules": on questions
#: written after the rules, a disproof has now and then looked in the wrong place).
INCORRECT_IS_A_FINDING = (
    "Each of these is a finding to review, not a key to change blindly: a proof disproved the marked answer, and on "
    "questions written after the verifier's rules such a disproof has now and then been wrong. A proposed fix below is "
    "`verified` only when its new key is proven true."
)


def markdown_report(report: Mapping[str, Any]) -> str:
    """A one-page summary: what was checked (dataset, library and versions), counts, flagged cases with reasons, proposals.

    Free text (reasons, notes, import failures) is made safe for Markdown (:func:`markdown_text`): file
    names and paths such as ``__init__.py`` go in backticks, and nothing renders as ``None``.
    """
    meta = report["meta"]
    name = meta.get("dataset") or meta.get("suite")
    label = library_label(meta)
    title = f"# Question verifier: {markdown_text(name)} — {label}" if name else f"# Question verifier: {label}"
    library = f"- library: {label}"
    if meta.get("import_name") and meta.get("import_name") != meta.get("library"):
        library += f"; module probed: `{meta['import_name']}`"
    if meta.get("python"):
        library += f"; interpreter `{meta['python']}`"
    lines = [title, "", library, _timing_line(report), "", "| verdict | cases |", "| --- | ---: |"]
    lines += [f"| {label} | {n} |" for label, n in report["counts"].items()]
    lines += ["", *_probe_lines(meta.get("probe"))]
    for verdict in ("Incorrect", "Ambiguous", "Unverifiable"):
        cases = [c for c in report["cases"] if c["verdict"] == verdict]
        if not cases:
            continue
        lines += [f"## {verdict} ({len(cases)})", ""]
        if verdict == "Incorrect":
            lines += [INCORRECT_IS_A_FINDING, ""]
        for case in cases:
            lines.append(f"- `{case['case_id']}` (marked {markdown_text(case['marked'])}; proven true: "
                         f"{', '.join(case['proven_true']) or 'none'})")  # fmt: skip
            lines += [f"  - {_one_line(r)}" for r in case["reasons"][:4]]
        lines.append("")
    if report["proposals"]:
        lines += ["## Proposed fixes", ""]
        for p in report["proposals"]:
            lines.append(f"- `{p['case_id']}` ({p['original_verdict']}): **{p['status']}**: {_one_line(p['note'])}")
            lines += _version_lines(p)
        lines.append("")
    return "\n".join(lines)


def _version_lines(proposal: Mapping[str, Any]) -> list[str]:
    """The verdict per library version, as it stands and for the last fix tried (only when more than one version was checked)."""
    before = proposal.get("original_verdicts") or {}
    attempts = proposal.get("attempts") or []
    after = attempts[-1].get("verdicts", {}) if attempts else {}
    if len(before) < 2:
        return []
    lines = ["  - as it stands: " + ", ".join(f"{markdown_text(k)}: {v}" for k, v in before.items())]
    if after:
        lines.append("  - last fix tried: " + ", ".join(f"{markdown_text(k)}: {v}" for k, v in after.items()))
    return lines


def _timing_line(report: Mapping[str, Any]) -> str:
    """``- prover: offline; 32 cases in 12.4 s (mean 0.7 s, median 0.6 s per question)``, with no unknown value shown."""
    meta, per_q = report["meta"], report["seconds_per_question"]
    total = report["total_cases"]
    if not total:
        return "- no multiple-choice case: nothing was proven"
    seconds = meta.get("total_seconds", meta.get("seconds"))
    line = f"- prover: {meta.get('prover') or 'offline'}; {total} cases"
    if seconds is not None:
        line += f" in {seconds} s"
    if per_q.get("mean") is not None:
        line += f" (mean {per_q['mean']} s, median {per_q['median']} s per question)"
    line += _cache_text(meta.get("verdict_cache"))
    if report.get("proposals") and meta.get("remediation_seconds"):
        line += f"; {len(report['proposals'])} fixes proposed and re-verified in {meta['remediation_seconds']} s"
    return line


def _cache_text(cache: Mapping[str, Any] | None) -> str:
    """``; 30 reused from the verdict cache, 2 proven now`` (or why the cache was not used); empty without a cache."""
    if not cache:
        return ""
    if cache.get("status") != "used":
        return f"; verdict cache {markdown_text(cache.get('status'))}"
    return f"; {cache.get('reused', 0)} reused from the verdict cache, {cache.get('proven', 0)} proven now"


def _probe_lines(probe: Mapping[str, Any] | None, causes: int = 8) -> list[str]:
    """The report's "Library probe" section: what was probed, its coverage, the commonest import failures."""
    if not probe or not probe.get("import_name"):
        return []
    source = f" (from {markdown_text(probe['import_name_source'])})" if probe.get("import_name_source") else ""
    if probe.get("distribution"):
        distribution = f"distribution {probe['distribution']} {probe.get('version') or '(version unknown)'}"
    else:
        distribution = "no installed distribution found for it"
    lines = [
        "## Library probe",
        "",
        f"- module probed: `{probe['import_name']}`{source}; {distribution}",
        f"- coverage: {markdown_text(probe.get('summary') or 'unknown')} "
        f"({probe.get('cpu_seconds', 0)} CPU s, {probe.get('seconds', 0)} s)",
    ]
    if not probe.get("complete"):
        lines.append("- a name defined or mentioned only in a module the probe did not import is undecided, never false")
    lines += [f"  - {n} × {_one_line(cause, 200)}" for cause, n in list((probe.get("failure_causes") or {}).items())[:causes]]
    return [*lines, ""]


#: Existing code spans, kept as they are.
_CODE_SPAN = re.compile(r"(`+).*?\1")
#: A word that Markdown would mangle: a file name or path (``__init__.py``, ``/usr/lib/x.py``), a dunder
#: name (``__init__``), ``*args``/``**kwargs``; with the punctuation around it left outside.
_FILE_LIKE = re.compile(
    r"(?<![\w`])("
    r"(?:[\w.~+-]*/)*[\w.+-]*\.(?:py|pyi|pyc|pyd|so|json|jsonl|ya?ml|toml|txt|cfg|ini|md|csv)\b"
    r"|/[\w.~+-]+(?:/[\w.~+-]+)*/?"
    r"|\w*__\w+__\w*"
    r"|\*{1,2}[A-Za-z_]\w*"
    r")"
)


def markdown_text(text: object) -> str:
    """``text`` safe to put in Markdown: file names, paths, dunder names and ``*args`` in backticks, ``<`` escaped.

    Code spans already in the text are kept; ``__init__.py`` would otherwise render as a bold "init".
    """
    out, last = [], 0
    raw = str(text)
    for span in _CODE_SPAN.finditer(raw):
        out.append(_escape_plain(raw[last : span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(_escape_plain(raw[last:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    return _FILE_LIKE.sub(lambda m: f"`{m.group(1)}`", text).replace("<", "\\<")


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).replace("|", "\\|")
    return markdown_text(flat if len(flat) <= limit else flat[: limit - 1] + "…")
