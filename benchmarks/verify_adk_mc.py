"""Verify the ADK multiple-choice questions through the dataset registry's own verifier setting.

Loads ``data/config/datasets.yaml``, takes the dataset (``adk_v1_24_1``), reads its cases the way
``raw_cases`` does, keeps the multiple-choice ones and runs the question check the ``verify_questions``
asset runs (:func:`retrieval_pipeline.core.verifier.questions.check_questions`: probe, prove every
option in the sandbox, decide, propose fixes for Ambiguous/Incorrect). Prints the verdict counts, the
questions per verdict (with a one-line reason for Incorrect and Ambiguous), the probe's coverage and the
wall time. The reports go to ``--out`` (a temporary folder by default), never into the project.

    .venv/bin/python benchmarks/verify_adk_mc.py                                   # the registry's interpreter
    .venv/bin/python benchmarks/verify_adk_mc.py --python .venvs/adk120/bin/python # another google-adk

Run one at a time: every option is a pytest run in bubblewrap.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from retrieval_pipeline.core.dataset_inputs import load_cases
from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry
from retrieval_pipeline.core.verifier.questions import check_questions
from retrieval_pipeline.core.verifier.verdict import VERDICTS


def one_line(text: str, width: int = 220) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY_PATH)
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--python", type=Path, default=None, help="override verifier.python (kept as given, not resolved)")
    parser.add_argument("--out", type=Path, default=None, help="folder for quality_report.json/.md and proposed_fixes.yaml")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary as JSON here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    registry = load_registry(args.registry)
    config = registry.get(args.dataset)
    settings = config.verifier
    if args.python is not None:
        settings = settings.model_copy(update={"python": args.python.absolute()})
    loaded = load_cases(config)
    questions = [c for c in loaded.cases if c.benchmark_type == "multiple_choice"]
    out = args.out or Path(tempfile.mkdtemp(prefix="verify_adk_mc_"))
    print(f"registry {args.registry}  dataset {args.dataset}")
    print(f"verifier: python={settings.python} library={settings.library} import_name={settings.import_name} "
          f"timeout_s={settings.timeout_s} memory_mb={settings.memory_mb}")  # fmt: skip
    print(f"cases {len(loaded.cases)} (rejects {len(loaded.rejects)}), multiple choice {len(questions)}", flush=True)

    checked = check_questions(
        loaded.cases,
        settings,
        dataset=args.dataset,
        report_path=out / "quality_report.json",
        proposals_path=out / "proposed_fixes.yaml",
        inputs=config.input_paths(),
        registry_path=str(registry.path),
    )
    wall = time.monotonic() - started
    report = json.loads((out / "quality_report.json").read_text(encoding="utf-8"))
    meta = report.get("meta", {})
    frame = checked.verdicts

    print(f"\nlibrary {meta.get('library')} {meta.get('library_version')}  python {meta.get('python')} "
          f"({meta.get('python_version')})  prover {meta.get('prover')}")  # fmt: skip
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
    if args.json:
        summary = {
            "library_version": meta.get("library_version"),
            "python": meta.get("python"),
            "counts": counts,
            "by_verdict": {v: frame[frame["verdict"] == v]["case_id"].tolist() for v in VERDICTS},
            "reasons": {r["case_id"]: list(r["reasons"]) for _, r in frame.iterrows() if r["verdict"] in ("Incorrect", "Ambiguous")},
            "probe": probe.get("summary"),
            "verification_s": meta.get("seconds"),
            "wall_s": round(wall, 1),
        }
        args.json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
