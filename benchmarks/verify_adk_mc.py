"""Verify the ADK multiple-choice questions through the dataset registry's own verifier setting.

Loads ``data/config/datasets.yaml``, takes the dataset (``adk_v1_24_1``), reads its cases the way
``raw_cases`` does, keeps the multiple-choice ones and runs the question check the ``verify_questions``
asset runs (:func:`retrieval_pipeline.core.verifier.questions.check_questions`: probe, prove every
option in the sandbox, decide, propose fixes for Ambiguous/Incorrect). Prints the verdict counts, the
questions per verdict (with a one-line reason for Incorrect and Ambiguous), the probe's coverage and the
wall time. The reports go to ``--out`` (a temporary folder by default), never into the project.

    .venv/bin/python benchmarks/verify_adk_mc.py                                   # the registry's interpreter
    .venv/bin/python benchmarks/verify_adk_mc.py --python .venvs/adk120/bin/python # another google-adk
    .venv/bin/python benchmarks/verify_adk_mc.py --json after.json --baseline before.json  # what is newly decided

``--json`` also records, per question, every option's claim kind, state and the prover that decided it;
``--baseline`` (an earlier ``--json``) lists the questions that were Unverifiable there and are decided now, with
the claims that decided them, and any new Incorrect. ``--prover llm`` with ``--llm-base-url``/``--llm-model``
(or ``RETRIEVAL_LLM_BASE_URL``/``RETRIEVAL_LLM_MODEL``; the key only from ``RETRIEVAL_LLM_API_KEY``) asks an LLM
about what the offline proofs left open.

Run one at a time: every option is a pytest run in bubblewrap.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_pipeline.core.datasets.inputs import load_cases
from retrieval_pipeline.core.llm.cache import LLMCache
from retrieval_pipeline.core.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.verifier.questions import check_questions
from retrieval_pipeline.core.verifier.verdict import VERDICTS


def one_line(text: str, width: int = 220) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def option_table(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """Case id -> letter -> the option's claim kind, state, decided_by and hypothesis (from the report evidence)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for _, row in frame.iterrows():
        entry = json.loads(row["evidence"]) if row["evidence"] else {}
        table[row["case_id"]] = {
            e["letter"]: {"kind": e["claim"]["kind"], "state": e["state"], "decided_by": e.get("decided_by"),
                          "hypothesis": e["claim"]["hypothesis"]}
            for e in entry.get("evidence", [])
        }  # fmt: skip
    return table


def deciding_claims(options: dict[str, dict[str, Any]]) -> str:
    """``A=consistent[compound], B=false[cli_option], E=true[derived]``: what settled each option."""
    return ", ".join(
        f"{letter}={o['state']}[{o['kind'] if o['kind'] != 'none_of_the_above' else 'derived'}]"
        for letter, o in options.items()
        if o["state"] != "undecided"
    )


def compare(summary: dict[str, Any], baseline_path: Path) -> dict[str, Any]:
    """What changed against an earlier ``--json``: questions newly decided (with their claims) and new Incorrect."""
    before = json.loads(baseline_path.read_text(encoding="utf-8"))
    was = {case: verdict for verdict, cases in before["by_verdict"].items() for case in cases}
    now = {case: verdict for verdict, cases in summary["by_verdict"].items() for case in cases}
    newly = [
        {"case_id": case, "verdict": verdict, "claims": deciding_claims(summary["options"].get(case, {}))}
        for case, verdict in now.items()
        if verdict != "Unverifiable" and was.get(case) == "Unverifiable"
    ]
    lost = [case for case, verdict in now.items() if verdict == "Unverifiable" and was.get(case) not in (None, "Unverifiable")]
    new_incorrect = [case for case, verdict in now.items() if verdict == "Incorrect" and was.get(case) != "Incorrect"]
    return {"baseline": str(baseline_path), "before": before["counts"], "after": summary["counts"], "newly_decided": newly,
            "no_longer_decided": lost, "new_incorrect": new_incorrect}  # fmt: skip


@contextlib.contextmanager
def llm_client(args: argparse.Namespace) -> Iterator[LLMClient | None]:
    """An LLM client when an endpoint is given (flags, else RETRIEVAL_LLM_*), else None."""
    base_url = args.llm_base_url or os.environ.get("RETRIEVAL_LLM_BASE_URL")
    model = args.llm_model or os.environ.get("RETRIEVAL_LLM_MODEL")
    if not (base_url and model):
        yield None
        return
    settings = LLMSettings(base_url=base_url, model=model, api_key=os.environ.get("RETRIEVAL_LLM_API_KEY"), max_tokens=2048,
                           timeout_s=120.0)  # fmt: skip
    with LLMClient(settings, LLMCache(args.llm_cache)) as client:
        yield client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY_PATH)
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--python", type=Path, default=None, help="override verifier.python (kept as given, not resolved)")
    parser.add_argument("--out", type=Path, default=None, help="folder for quality_report.json/.md and proposed_fixes.yaml")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary as JSON here")
    parser.add_argument("--baseline", type=Path, default=None, help="an earlier --json: list what is newly decided")
    parser.add_argument("--prover", choices=("offline", "llm"), default=None, help="override verifier.prover")
    parser.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint for --prover llm")
    parser.add_argument("--llm-model", default=None, help="model name for --prover llm")
    parser.add_argument("--llm-cache", type=Path, default=Path(tempfile.gettempdir()) / "verify_adk_mc_llm.sqlite")
    args = parser.parse_args(argv)

    started = time.monotonic()
    registry = load_registry(args.registry)
    config = registry.get(args.dataset)
    settings = config.verifier
    if args.python is not None:
        settings = settings.model_copy(update={"python": args.python.absolute()})
    if args.prover is not None:
        settings = settings.model_copy(update={"prover": args.prover})
    loaded = load_cases(config)
    questions = [c for c in loaded.cases if c.benchmark_type == "multiple_choice"]
    out = args.out or Path(tempfile.mkdtemp(prefix="verify_adk_mc_"))
    print(f"registry {args.registry}  dataset {args.dataset}")
    print(f"verifier: python={settings.python} library={settings.library} import_name={settings.import_name} "
          f"timeout_s={settings.timeout_s} memory_mb={settings.memory_mb}")  # fmt: skip
    print(f"cases {len(loaded.cases)} (rejects {len(loaded.rejects)}), multiple choice {len(questions)}", flush=True)

    with llm_client(args) as client:
        checked = check_questions(
            loaded.cases,
            settings,
            dataset=args.dataset,
            report_path=out / "quality_report.json",
            proposals_path=out / "proposed_fixes.yaml",
            inputs=config.input_paths(),
            registry_path=str(registry.path),
            llm=client,
        )
    wall = time.monotonic() - started
    report = json.loads((out / "quality_report.json").read_text(encoding="utf-8"))
    meta = report.get("meta", {})
    frame = checked.verdicts

    print(f"\nlibrary {meta.get('library')} {meta.get('library_version')}  python {meta.get('python')} "
          f"({meta.get('python_version')})  prover {meta.get('prover')}")  # fmt: skip
    if meta.get("prover_warning"):
        print(f"warning: {meta['prover_warning']}")
    counts = {v: int((frame["verdict"] == v).sum()) for v in VERDICTS}
    print("verdicts: " + "  ".join(f"{v} {n}" for v, n in counts.items()) + f"  (of {len(frame)})")
    for v in VERDICTS:
        rows = frame[frame["verdict"] == v]
        print(f"\n{v} ({len(rows)}):")
        for _, row in rows.iterrows():
            if v in ("Incorrect", "Ambiguous"):
                reason = one_line("; ".join(row["reasons"])) if len(row["reasons"]) else ""
                print(f"  {row['case_id']}  marked {row['marked']}, true {list(row['proven_true'])}: {reason}")
            else:
                print(f"  {row['case_id']}")
    probe = meta.get("probe") or {}
    print("\nprobe:", probe.get("summary"), f"({probe.get('cpu_seconds')} CPU s, {probe.get('seconds')} s);",
          f"import_name {probe.get('import_name')} from {probe.get('import_name_source')}")  # fmt: skip
    for cause, n in list((probe.get("failure_causes") or {}).items())[:5]:
        print(f"  {n} x {one_line(cause, 160)}")
    print(f"\nproposals {len(checked.flagged)}; verification {meta.get('seconds')} s; wall {wall:.1f} s; reports in {out}")
    summary = {
        "library_version": meta.get("library_version"),
        "python": meta.get("python"),
        "prover": meta.get("prover"),
        "counts": counts,
        "unverifiable_share": round(counts["Unverifiable"] / len(frame), 3) if len(frame) else None,
        "by_verdict": {v: frame[frame["verdict"] == v]["case_id"].tolist() for v in VERDICTS},
        "reasons": {r["case_id"]: list(r["reasons"]) for _, r in frame.iterrows() if r["verdict"] in ("Incorrect", "Ambiguous")},
        "options": option_table(frame),
        "probe": probe.get("summary"),
        "verification_s": meta.get("seconds"),
        "wall_s": round(wall, 1),
    }
    if args.baseline:
        summary["comparison"] = change = compare(summary, args.baseline)
        print(f"\nagainst {args.baseline}: {change['before']} -> {change['after']}")
        print(f"newly decided ({len(change['newly_decided'])}):")
        for row in change["newly_decided"]:
            print(f"  {row['case_id']}  {row['verdict']}: {row['claims']}")
        print(f"no longer decided: {change['no_longer_decided'] or 'none'}; new Incorrect: {change['new_incorrect'] or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
