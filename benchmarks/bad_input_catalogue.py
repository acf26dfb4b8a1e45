"""Print the bad-input catalogue (issue 12) as a markdown table: every probe, its message and its counts.

Runs every probe of ``retrieval_pipeline_tests/core/test_bad_input_catalogue.py`` (registry, suite, nq,
context_qa, beir, fix_file), then, imported from the older tests, the hostile suite paths
(``test_hostile_paths.REFUSED``), the refused dataset names (``test_dataset_names``) and the hostile YAML
(``test_yaml_limits``), each in a fresh temporary folder. Prints::

    | kind | input | message | read / accepted / rejected |

with the probe's folder shown as ``<dir>``, then one line per probe whose outcome is not the expected
one (on stderr), and exits 1 if there is any.

    .venv/bin/python benchmarks/bad_input_catalogue.py            # the whole table
    .venv/bin/python benchmarks/bad_input_catalogue.py --kind beir --max-message 600
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))  # the tests' modules hold the probes

from retrieval_pipeline.core.common.errors import InputError  # noqa: E402
from retrieval_pipeline.core.common.yaml_file import read_yaml  # noqa: E402
from retrieval_pipeline.core.datasets.suite.reader import load_suite  # noqa: E402
from retrieval_pipeline.core.registry import load_registry  # noqa: E402
from retrieval_pipeline_tests.core import test_hostile_paths  # noqa: E402
from retrieval_pipeline_tests.core.common import test_yaml_limits  # noqa: E402
from retrieval_pipeline_tests.core.datasets import test_dataset_names  # noqa: E402
from retrieval_pipeline_tests.core.test_bad_input_catalogue import PROBES, Outcome, Probe, check_probe, run_probe  # noqa: E402


def _refused(call: Callable[[], object]) -> Outcome:
    """The outcome of a call that must raise :class:`InputError` (a call that returns is recorded as accepted)."""
    try:
        call()
    except InputError as exc:
        return Outcome(str(exc), refused=True)
    return Outcome("")


def _hostile_path_probes() -> list[Probe]:
    """``test_hostile_paths.REFUSED``: a fix_error path leaving the suite folder rejects that case only."""
    make_tree = test_hostile_paths.tree.__wrapped__  # the fixture's function: builds the folders under a given root

    def build(given: Callable[[dict[str, Path]], str]) -> Callable[[Path], Outcome]:
        def run(root: Path) -> Outcome:
            tree = make_tree(root)
            loaded = load_suite(test_hostile_paths.write_suite(tree["suite"], given(tree)))
            return Outcome("\n".join(r.reason for r in loaded.rejects), {"cases": (loaded.total, len(loaded.cases), len(loaded.rejects))})

        return run

    expect = ("'fix:hostile'", "outside the allowed root")
    return [
        Probe("suite (paths)", f"fixed_file: {name}", build(given), (*expect, how), {"cases": (2, 1, 1)})
        for name, (given, how) in sorted(test_hostile_paths.REFUSED.items())
    ]


def _dataset_name_probes() -> list[Probe]:
    """``test_dataset_names``: a bad dataset name refuses the registry, naming the file and the name."""

    def build(key: str) -> Callable[[Path], Outcome]:
        return lambda root: _refused(lambda: load_registry(test_dataset_names.registry_with(root, key), root=root))

    names = [(json.dumps(name), f"dataset name {json.dumps(name)[:40]}") for name in test_dataset_names.BAD_NAMES]
    not_strings = _parametrised(test_dataset_names.test_a_dataset_name_that_is_not_a_string_is_refused)
    typed = [(key, f"dataset name {key} ({kind})") for key, kind in not_strings]
    expect = ("{root}/datasets.yaml", "dataset name")
    return [Probe("registry (names)", label, build(key), expect, {}, refused=True) for key, label in names + typed]


def _yaml_probes() -> list[Probe]:
    """``test_yaml_limits``: alias bombs and hostile structures fail fast, naming the file."""

    def write(name: str, text: str) -> Callable[[Path], Path]:
        def to(root: Path) -> Path:
            path = root / name
            path.write_text(text)
            return path

        return to

    suite_bomb, registry_bomb = write("benchmark.yaml", test_yaml_limits.SUITE_BOMB), write("datasets.yaml", test_yaml_limits.REGISTRY_BOMB)
    probes = [
        Probe(
            "yaml",
            f"alias bomb in a suite ({len(test_yaml_limits.SUITE_BOMB)} bytes)",
            lambda root: _refused(lambda: load_suite(suite_bomb(root))),
            ("{root}/benchmark.yaml", "alias"),
            {},
            refused=True,
        ),
        Probe(
            "yaml",
            f"alias bomb in the registry ({len(test_yaml_limits.REGISTRY_BOMB)} bytes)",
            lambda root: _refused(lambda: load_registry(registry_bomb(root), root=root)),
            ("{root}/datasets.yaml", "alias"),
            {},
            refused=True,
        ),
    ]
    for text, words in _parametrised(test_yaml_limits.test_hostile_structures_are_refused):
        label = f"{text[:24]!r}{'...' if len(text) > 24 else ''} ({len(text):,} characters)"
        to = write("suite.yaml", text)
        probes.append(
            Probe(
                "yaml",
                label,
                lambda root, to=to: _refused(lambda: read_yaml(to(root), "suite file")),
                ("{root}/suite.yaml", words),
                {},
                refused=True,
            )
        )
    return probes


def _parametrised(test: Callable[..., object]) -> list[tuple[str, str]]:
    """The argument tuples of a test's ``pytest.mark.parametrize``."""
    (mark,) = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    return [tuple(values) for values in mark.args[1]]


def all_probes() -> list[Probe]:
    """The catalogue's probes, then the older tests' hostile-path, dataset-name and YAML probes."""
    return [*PROBES, *_hostile_path_probes(), *_dataset_name_probes(), *_yaml_probes()]


def _cell(text: str, root: Path, limit: int) -> str:
    """One markdown table cell: the probe folder as ``<dir>``, lines as ``<br>``, pipes escaped, cut to ``limit``."""
    text = text.replace(str(root), "<dir>")
    text = text if len(text) <= limit else text[:limit] + "..."
    return text.replace("|", "\\|").replace("\n", "<br>") or "(accepted, no message)"


def _counts(outcome: Outcome) -> str:
    if outcome.refused:
        return "whole input refused"
    return "; ".join(f"{unit} {r} / {a} / {j}" for unit, (r, a, j) in outcome.counts.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", help="only the probes of this kind (registry, suite, nq, context_qa, beir, fix_file, yaml, ...)")
    parser.add_argument("--max-message", type=int, default=400, help="characters of each message shown")
    args = parser.parse_args(argv)
    probes = [p for p in all_probes() if args.kind in (None, p.kind)]
    print("| kind | input | message | read / accepted / rejected |")
    print("|---|---|---|---|")
    unexpected: list[str] = []
    for probe in probes:
        with tempfile.TemporaryDirectory(prefix="bad_input_") as folder:
            root = Path(folder).resolve() / "probe"
            outcome = run_probe(probe, root)
            try:
                check_probe(probe, outcome, root)
            except AssertionError as exc:
                unexpected.append(f"{probe.kind} / {probe.id}: {str(exc).replace(str(root), '<dir>')[:300]}")
            message = _cell(outcome.message, root, args.max_message)
            print(f"| {probe.kind} | {_cell(probe.id, root, 120)} | {message} | {_counts(outcome)} |")
    print(f"\n{len(probes)} probes, {len(probes) - len(unexpected)} as expected", file=sys.stderr)
    for line in unexpected:
        print(f"UNEXPECTED {line}", file=sys.stderr)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
