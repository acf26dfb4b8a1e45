"""Re-establish the truth of the fresh multiple-choice questions by running google-adk.

``truth.yaml`` holds, per question id, the options that are true on each library version and the evidence:
a Python snippet and what it printed on each version. This script runs every snippet again, in each
version's virtual environment, each in its own subprocess with a timeout, and checks that the output is
the recorded one. It also checks that every question of the three suites has an entry and that the
suite's key is among the options true on 2.13.

    .venv/bin/python benchmarks/fresh_mc/check_truth.py                              # check (exit 1 on any difference)
    .venv/bin/python benchmarks/fresh_mc/check_truth.py --root benchmarks/fresh_mc3  # another set
    .venv/bin/python benchmarks/fresh_mc/check_truth.py --only ID                    # one question
    .venv/bin/python benchmarks/fresh_mc/check_truth.py --record                     # write what the snippets print now

Every set is laid out the same way (``<root>/benchmark_definitions/<suite>/benchmark.yaml``, the snippets under
``<root>/benchmarks/benchmark_definitions/<suite>/``, ``truth.yaml`` in the root), so its suites and import path
follow from its root (:class:`FreshSet`); the helpers its evidence imports are this folder's ``evidence_helpers.py``.

``--record`` only refreshes the ``printed`` texts; the true letters are a reader's judgment of that output
and are never written by this script.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[1]
#: Library version -> the interpreter of its virtual environment (relative to the project root).
VERSIONS = {"2.13": ".venvs/adk/bin/python", "1.20": ".venvs/adk120/bin/python"}
TIMEOUT_S = 120


@dataclass(frozen=True)
class FreshSet:
    """One set of fresh questions, by its files root (``benchmarks/fresh_mc``, ``benchmarks/fresh_mc3``)."""

    root: Path

    @property
    def truth(self) -> Path:
        return self.root / "truth.yaml"

    @property
    def suites(self) -> tuple[str, ...]:
        """Its suites, in name order: configure, diagnose, predict."""
        return tuple(sorted(p.parent.name for p in (self.root / "benchmark_definitions").glob("*/benchmark.yaml")))

    @property
    def import_dirs(self) -> tuple[Path, ...]:
        """Folders an evidence snippet imports from: the helpers (``evidence_helpers.py`` of this folder, one module for
        every set), then per suite with code its ``cases`` folder (predict: a file per question) or else its own
        (diagnose: one module of sections)."""
        code = self.root / "benchmarks" / "benchmark_definitions"
        found = [code / s / "cases" if (code / s / "cases").is_dir() else code / s for s in self.suites if (code / s).is_dir()]
        return (HERE, *found)


def suite_keys(fresh: FreshSet = FreshSet(HERE)) -> dict[str, str]:
    """Question id -> the suite's key (``correct_answer``), over the set's suites."""
    keys = {}
    for suite in fresh.suites:
        data = yaml.safe_load((fresh.root / "benchmark_definitions" / suite / "benchmark.yaml").read_text(encoding="utf-8"))
        for row in data["benchmarks"]:
            keys[row["id"]] = row["correct_answer"]
    return keys


def run_snippet(code: str, version: str, workdir: Path, import_dirs: tuple[Path, ...]) -> str:
    """What ``code`` prints on stdout under ``version``'s interpreter (a crash or timeout is reported, not raised)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(d) for d in import_dirs), PYTHONWARNINGS="ignore")
    try:
        done = subprocess.run(
            [str(PROJECT / VERSIONS[version]), "-c", code],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"<timeout after {TIMEOUT_S} s>"
    out = done.stdout.strip()
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-3:])
        out += f"\n<exit {done.returncode}: {tail}>"
    return out


class _Literal(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, so that code and output stay readable."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _list(dumper: yaml.SafeDumper, value: list) -> yaml.SequenceNode:
    letters = all(isinstance(item, str) and len(item) == 1 for item in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=letters)


def _dict(dumper: yaml.SafeDumper, value: dict) -> yaml.MappingNode:
    letters = bool(value) and all(isinstance(item, list) for item in value.values())
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=letters)


_Literal.add_representer(str, _str)
_Literal.add_representer(list, _list)
_Literal.add_representer(dict, _dict)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write the printed texts instead of checking them")
    parser.add_argument("--only", action="append", default=[], help="question id (repeatable)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--root", type=Path, default=HERE, help="the set's files root (default: this folder's set)")
    args = parser.parse_args(argv)

    fresh = FreshSet(args.root.resolve())
    truth = yaml.safe_load(fresh.truth.read_text(encoding="utf-8"))
    problems = []
    keys = suite_keys(fresh)
    for qid, key in keys.items():
        entry = truth.get(qid)
        if entry is None:
            problems.append(f"{qid}: no truth entry")
            continue
        if set(entry["truth"]) != set(VERSIONS):
            problems.append(f"{qid}: truth must name {sorted(VERSIONS)}")
        elif key not in entry["truth"]["2.13"]:
            problems.append(f"{qid}: key {key} is not among the 2.13 truth {entry['truth']['2.13']}")
    problems += [f"{qid}: truth entry for no question" for qid in truth if qid not in keys]

    ids = [qid for qid in truth if not args.only or qid in args.only]
    jobs = [(qid, version) for qid in ids for version in VERSIONS]
    workdir = Path(os.environ.get("TMPDIR", "/tmp"))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outputs = list(pool.map(lambda job: run_snippet(truth[job[0]]["evidence"]["code"], job[1], workdir, fresh.import_dirs), jobs))
    differing = 0
    for (qid, version), out in zip(jobs, outputs):
        printed = truth[qid]["evidence"].setdefault("printed", {})
        if args.record:
            printed[version] = out + "\n"
            continue
        expected = (printed.get(version) or "").strip()
        if out != expected:
            differing += 1
            problems.append(f"{qid} [{version}]: printed differs\n--- recorded\n{expected}\n--- now\n{out}")
    if args.record:
        header = TRUTH_HEADER.format(root=fresh.root.relative_to(PROJECT).as_posix())
        fresh.truth.write_text(header + yaml.dump(truth, Dumper=_Literal, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
        print(f"recorded {len(jobs)} runs of {len(ids)} questions into {fresh.truth}")
    for problem in problems:
        print(problem)
    drift = [qid for qid in ids if set(truth[qid]["truth"].get("2.13", [])) != set(truth[qid]["truth"].get("1.20", []))]
    print(
        f"{len(ids)} questions, {len(jobs)} evidence runs ({', '.join(VERSIONS)}): "
        f"{len(jobs) - differing} as recorded, {differing} differing; "
        f"{len(problems) - differing} other problems; truth differs between versions on {len(drift)}: {', '.join(drift) or '-'}"
    )
    return 1 if problems and not args.record else 0


TRUTH_HEADER = """\
# Truth of the fresh multiple-choice questions, per google-adk version, established by running the library.
# Per question id: `truth` = the options that are true on each version ("None of the above" is true iff no other
# option is); `evidence` = why (`reasoning`), the code that was run (`code`, with {root}/,
# the diagnose snippets and the predict cases on the import path) and what it printed on each version (`printed`).
# Re-run: .venv/bin/python benchmarks/fresh_mc/check_truth.py --root {root}
"""


if __name__ == "__main__":
    sys.exit(main())
