"""Mutation testing of the evaluation path with mutmut: the mutation score per module, survivors listed.

Why: coverage says a line ran, not that a test would notice it being wrong (issue 14). mutmut rewrites
one operator, constant or call at a time ("a mutant") and reruns the tests that reach the mutated
function; a mutant is *killed* when a test fails. The score is ``killed / total`` per target.

What is mutated (:data:`TARGETS`): metrics, TREC I/O, the qrels building of every dataset kind (BEIR,
NQ, context QA, suites, and the dataset records the qrels are read from), fusion, the regression gate,
the statistics, and the judges' decision logic. Each target names the files (all their functions, or
only the listed ones) and the few test files that exercise them, so one target runs in minutes.

How it runs, and why so:

* mutmut 3 writes ``mutants/`` (and its caches) into the folder it runs in. Each target therefore runs
  in a fresh copy of the project under ``--workdir`` (default ``/tmp/rp-mutation/<target>``), never in
  the project tree; the copy holds the package, the tests, ``examples/``, ``data/config``,
  ``data/samples`` and a ``pyproject.toml`` with the target's ``[tool.mutmut]`` section.
* One process at a time: targets run one after the other, mutmut with ``--max-children 1``, under
  ``nice`` and ``timeout`` (``--timeout`` seconds per target), since the machine is shared.
* Integration tests (real model, real data, LLM server) are deselected: a mutant run must be minutes.
* Status: ``killed`` and ``timeout`` (the mutant hung: a test noticed) count as killed; ``survived``,
  ``no tests`` (no selected test reaches the function) and anything else count against the score.
  Survivors listed in :data:`KNOWN_EQUIVALENT` are printed with the reason they cannot be killed; they
  still count against the score (the score is what mutmut measured).

Writing tests that mutmut credits: mutmut runs, for each mutant, only the tests that called the mutated
function *during that test* (it records calls in a first, clean run). A value computed in a module-scoped
fixture is credited to the first test that used it only, and a call made in a subprocess is not seen at
all; so a test meant to kill a mutant computes what it checks itself (function-scoped fixtures are fine).

    .venv/bin/python benchmarks/mutation.py                       # every target
    .venv/bin/python benchmarks/mutation.py metrics trec          # some targets
    .venv/bin/python benchmarks/mutation.py --list                # what each target mutates and runs
    .venv/bin/python benchmarks/mutation.py --json /tmp/mutation.json stats
    .venv/bin/python benchmarks/mutation.py --min-score 0.85        # exit 1 when a target scores below 85%
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a copy of the project needs for the targeted tests (paths relative to the project root).
COPIED = ("retrieval_pipeline", "retrieval_pipeline_tests", "examples", "pyproject.toml", "data/config", "data/samples")
#: mutmut statuses that count as killed.
KILLED_STATUSES = frozenset({"killed", "timeout", "caught by type check"})
#: Pytest options of every mutant run: unit tests only, no cache folder.
PYTEST_ARGS = ("-m", "not integration and not local_llm", "-p", "no:cacheprovider")
TESTS = "retrieval_pipeline_tests/core"

_HUNK = re.compile(r"^@@ -(\d+)")


@dataclass(frozen=True)
class Scope:
    """One mutated file: every function in it (``functions`` None), or only the named ones.

    Attributes:
        path: The file, relative to the project root.
        functions: ``"name"`` for a module-level function, ``"Class.method"`` for a method.
    """

    path: str
    functions: tuple[str, ...] | None = None

    @property
    def module(self) -> str:
        """The dotted module name (mutmut's prefix of every mutant name of the file)."""
        return self.path.removesuffix(".py").replace("/", ".")

    def globs(self) -> list[str]:
        """mutmut mutant-name patterns of the scope (``pkg.mod.x_func__mutmut_*``, ``pkg.mod.xǁClsǁmeth__mutmut_*``)."""
        if self.functions is None:
            return [f"{self.module}.*"]
        return [f"{self.module}.{_mangled(name)}__mutmut_*" for name in self.functions]


def _mangled(function: str) -> str:
    """mutmut's name of a function (``x_name``) or method (``xǁClassǁname``)."""
    owner, _, name = function.rpartition(".")
    return f"xǁ{owner}ǁ{name}" if owner else f"x_{name}"


@dataclass(frozen=True)
class Target:
    """What one mutation run mutates and which tests it runs against the mutants.

    Attributes:
        name: The target's name on the command line and in the report.
        scopes: The mutated files and functions.
        tests: Test files (relative to the project root): only those that exercise the scopes.
        why: One line: what part of the evaluation path this is.
    """

    name: str
    scopes: tuple[Scope, ...]
    tests: tuple[str, ...]
    why: str

    def globs(self) -> list[str]:
        return [g for s in self.scopes for g in s.globs()]


def _tests(*names: str) -> tuple[str, ...]:
    return tuple(f"{TESTS}/{n}" for n in names)


#: The modules of ``core/evaluation/metrics/`` that compute: the judging of a run, the kernels and every formula.
_METRIC_FORMULAS = (
    "judging",
    "kernels",
    "frame",
    *sorted(
        f"families/{p.parent.name}/{p.stem}" for p in (ROOT / "retrieval_pipeline/core/evaluation/metrics/families").glob("*/[!_]*.py")
    ),
)

#: The evaluation path, one target per module (qrels building: one per dataset kind).
TARGETS: tuple[Target, ...] = (
    Target(
        "metrics",
        tuple(Scope(f"retrieval_pipeline/core/evaluation/metrics/{m}.py") for m in _METRIC_FORMULAS),
        _tests("evaluation/metrics/test_metrics.py", "evaluation/metrics/test_metrics_mutants.py"),
        "per-query retrieval metrics and their means",
    ),
    Target(
        "trec",
        (Scope("retrieval_pipeline/core/evaluation/exports/trec_writer.py"), Scope("retrieval_pipeline/core/evaluation/exports/trec.py")),
        _tests("evaluation/exports/test_trec.py", "evaluation/exports/test_trec_mutants.py"),
        "TREC run/qrels write and read",
    ),
    Target(
        "qrels_records",
        (Scope("retrieval_pipeline/core/filtering/retrieval_dataset.py"),),
        _tests("pairs/test_build_dataset.py", "filtering/test_negatives_and_records.py", "filtering/test_retrieval_dataset_mutants.py"),
        "dataset records (positives with rank_relevance) and the qrels read from them: every kind",
    ),
    Target(
        "qrels_beir",
        (
            Scope("retrieval_pipeline/core/datasets/beir/adapter.py", ("beir_pair", "BeirAdapter.pair_builder")),
            Scope(
                "retrieval_pipeline/core/datasets/beir/reader.py",
                ("_fields", "_is_int", "_is_number", "_read_qrels", "_safe_query_id", "_qrels_entry", "_check_judgement", "_judged_cases"),
            ),
        ),
        _tests("datasets/beir/test_beir.py", "datasets/beir/test_beir_mutants.py"),
        "BEIR qrels TSV read, graded pairs",
    ),
    Target(
        "qrels_nq",
        (
            Scope("retrieval_pipeline/core/datasets/nq/adapter.py", ("nq_pair", "NQAdapter.load_cases", "NQAdapter.pair_builder")),
            Scope(
                "retrieval_pipeline/core/datasets/nq/reader.py",
                ("chunk_id", "normalise_whitespace", "dedupe_chunks", "_new_chunk", "nq_qrels"),
            ),
        ),
        _tests("datasets/nq/test_nq.py", "datasets/test_adapters.py", "datasets/nq/test_nq_mutants.py"),
        "NQ gold chunk per question (de-duplicated long answers)",
    ),
    Target(
        "qrels_context_qa",
        (
            Scope(
                "retrieval_pipeline/core/datasets/context_qa/pairs.py",
                (
                    "ContextMatch.to_json",
                    "ContextMatch.from_json",
                    "_doc_id",
                    "_ratio",
                    "ContextMatcher.compute",
                    "ContextMatcher.match",
                    "ContextMatcher.pair",
                ),
            ),
            Scope(
                "retrieval_pipeline/core/datasets/context_qa/adapter.py",
                ("SimilaritySettingsModel.settings", "ContextQAAdapter.pair_builder"),
            ),
            Scope("retrieval_pipeline/core/datasets/context_qa/similarity.py", ("relevance", "qrels_from_similarity")),
        ),
        _tests(
            "datasets/context_qa/test_context_qa.py",
            "datasets/test_adapters.py",
            "pairs/test_extract.py",
            "datasets/context_qa/test_similarity.py",
            "datasets/context_qa/test_pairs_mutants.py",
        ),
        "context-QA golds: chunks similar enough to the expected context",
    ),
    Target(
        "qrels_suite",
        (
            Scope("retrieval_pipeline/core/common/types.py", ("QAPair.grades",)),
            Scope("retrieval_pipeline/core/pairs/build.py", ("_api_pair", "_fix_pair", "build_pairs")),
            Scope("retrieval_pipeline/core/datasets/suite/reader.py", ("gold_fqns_of", "_fill_api_understanding")),
        ),
        _tests("datasets/suite/test_reader.py", "pairs/test_extract.py", "datasets/test_adapters.py", "pairs/test_pairs_mutants.py"),
        "suite golds: FQNs read from the YAML and resolved into pairs",
    ),
    Target(
        "fusion",
        (Scope("retrieval_pipeline/core/retrieval/engines/fusion.py"),),
        _tests("retrieval/engines/test_fusion.py", "retrieval/engines/test_fusion_mutants.py"),
        "min-max and RRF fusion, the hybrid retriever",
    ),
    Target(
        "regression",
        (Scope("retrieval_pipeline/core/evaluation/checks/regression.py"),),
        _tests("evaluation/checks/test_regression.py", "evaluation/checks/test_regression_mutants.py"),
        "the regression gate against the blessed evaluation",
    ),
    Target(
        "stats",
        (Scope("retrieval_pipeline/core/evaluation/statistics/stats.py"),),
        _tests("evaluation/statistics/test_stats.py", "evaluation/statistics/test_stats_mutants.py"),
        "CIs, tests, Holm, the table",
    ),
    Target(
        "judges",
        (
            Scope("retrieval_pipeline/core/filtering/judges/offline.py"),
            Scope(
                "retrieval_pipeline/core/filtering/judges/llm.py",
                (
                    "LLMForwardRagJudge.__init__",
                    "LLMForwardRagJudge.decide_all",
                    "LLMForwardRagJudge._decision",
                    "_answer",
                    "LLMRetrievalJudge.__init__",
                    "LLMRetrievalJudge.score_all",
                ),
            ),
            Scope("retrieval_pipeline/core/filtering/filter.py", ("needs_llm", "judge_pairs", "verified_row", "filter_pairs")),
        ),
        _tests(
            "filtering/test_offline_judge.py",
            "filtering/test_llm_judges.py",
            "filtering/test_filter.py",
            "filtering/test_judges_mutants.py",
        ),
        "keep / drop / undecided decisions of the offline and LLM judges and the filter",
    ),
)


#: Survivors judged equivalent (or not observable by a deterministic test), by mutant name, with the reason.
#: mutmut numbers mutants per function, so an entry goes stale (and is ignored) when its function changes.
_PANDAS_ASTYPE_NONE = "astype(None) is astype(float64) in pandas/numpy: same values"
_NUMERIC_INPUT = "np.asarray without dtype=float: the same numbers for the numeric input these functions take"
_CODEC_ALIAS = '"UTF-8" and "utf-8" name the same codec'
_POSIX_NEWLINE = "newline=None writes os.linesep, which is \\n on POSIX (the only platform the project supports)"
_FALSY_INDEX = "itertuples/to_records(index=None): None is falsy like False; with index=True fields are still read by name"
_EMPTY_MEAN = "pandas' mean of an empty Series is NaN without a warning: the guard only skips a NaN"
_OVERWRITTEN = "regression_gate sets significant/practical/alert of every row after Holm: the new row's values are overwritten"
_MISSING_IS_NAN = "a key left out of a row is NaN in the frame, as the NaN/None it held"
_SEED_STREAM = "a different but equally uniform random stream (same distribution); only pinned outputs could tell"
KNOWN_EQUIVALENT: dict[str, str] = {
    "metrics.x__judge__mutmut_38": "None stored into a float array is NaN",
    "metrics.x_aggregate__mutmut_8": _PANDAS_ASTYPE_NONE,
    "metrics.x_aggregate__mutmut_30": _EMPTY_MEAN,
    "metrics.x_aggregate__mutmut_34": 'float("NAN") is NaN',
    "metrics.x_f1__mutmut_9": "out=None: the output reuses the freed 2*precision temporary, 0 exactly where precision+recall is 0",
    "metrics.x_hit_rate__mutmut_1": "bool.astype(None) is float64",
    "metrics.x_ndcg__mutmut_3": "nDCG = DCG / IDCG: doubling every discount cancels",
    "trec.x__records__mutmut_3": _CODEC_ALIAS,
    "trec.x__write_atomically__mutmut_3": _POSIX_NEWLINE,
    "trec.x__write_atomically__mutmut_6": _POSIX_NEWLINE,
    "trec.x__write_atomically__mutmut_10": _CODEC_ALIAS,
    "filtering.retrieval_dataset.x_dataset_records__mutmut_42": _FALSY_INDEX,
    "filtering.retrieval_dataset.x_dataset_records__mutmut_43": _FALSY_INDEX,
    "filtering.retrieval_dataset.x_write_jsonl__mutmut_10": _CODEC_ALIAS,
    "filtering.retrieval_dataset.x_write_jsonl__mutmut_14": "ensure_ascii=None is falsy like False",
    "sources.beir.x__read_qrels__mutmut_41": 'split(":")[0] is split(":", 1)[0]',
    "sources.beir.x__read_qrels__mutmut_44": 'split(":", 2)[0] is split(":", 1)[0]',
    "context_pairs.xǁContextMatchǁfrom_json__mutmut_4": "allow_none=None is falsy like False",
    "pairs.x_build_pairs__mutmut_48": "every gold of the case is in `resolved` (resolve_golds saw them all): the lookup is never asked",
    "retrieval.engines.fusion.x_best_ranks__mutmut_7": "rank <= best when equal re-stores the same rank",
    "retrieval.engines.fusion.x_best_ranks__mutmut_13": "the default only applies to an unseen doc: rank < rank + 1 and rank < rank + 2 are both true",
    "regression.x__alert_text__mutmut_18": _FALSY_INDEX,
    "regression.x__compare__mutmut_26": "Index.intersection's default sort is False",
    "regression.x__compare__mutmut_84": _EMPTY_MEAN,
    "regression.x__compare__mutmut_90": _EMPTY_MEAN,
    "regression.x__compare__mutmut_102": "x / 1.0 == x * 1.0 and x / -1.0 == x * -1.0",
    **{f"regression.x__new_row__mutmut_{n}": _OVERWRITTEN for n in range(30, 39)},
    "regression.x__ranks__mutmut_13": _PANDAS_ASTYPE_NONE,
    "regression.x_regression_gate__mutmut_115": "with no flipped query, concatenating one or two empty frames gives the same empty frame",
    "regression.x_regression_gate__mutmut_129": "bool.astype(None) is float64; any() is the same",
    "regression.xǁRegressionReportǁmetadata__mutmut_52": "pandas lower-cases the orient of to_dict",
    "stats.x__chunks__mutmut_6": "only changes chunking when one row exceeds 2**21 elements (over 1M queries): memory, not results",
    "stats.x__chunks__mutmut_12": "row_size 0 or 1: half-size chunks, still one chunk within the settings' bounds (<= 1M permutations)",
    "stats.x__direction__mutmut_6": "unreachable: a zero mean difference has randomisation p = 1, never significant",
    "stats.x__finite_matrix__mutmut_3": _NUMERIC_INPUT,
    "stats.x__finite_matrix__mutmut_5": _NUMERIC_INPUT,
    "stats.x__metric_rows__mutmut_68": _EMPTY_MEAN,
    **{f"stats.x__metric_rows__mutmut_{n}": _MISSING_IS_NAN for n in (98, 99, 100, 101, 102, 103, 104, 105, 111, 112)},
    **{f"stats.x__paired_differences__mutmut_{n}": _NUMERIC_INPUT for n in (3, 5, 7, 9)},
    "stats.x_bootstrap_means__mutmut_25": "integers(n, size=...) is integers(0, n, size=...)",
    "stats.x_bootstrap_means__mutmut_32": _PANDAS_ASTYPE_NONE,
    "stats.x_bootstrap_means__mutmut_47": "np.concatenate's default axis is 0",
    "stats.x_check_query_results__mutmut_20": _FALSY_INDEX,
    "stats.x_derive_seed__mutmut_6": _CODEC_ALIAS,
    "stats.x_derive_seed__mutmut_11": "generate_state's default dtype is uint32",
    "stats.x_derive_seed__mutmut_15": "SeedSequence words do not depend on how many are asked: the first two are the same",
    "stats.x_holm__mutmut_3": _NUMERIC_INPUT,
    "stats.x_holm__mutmut_5": _NUMERIC_INPUT,
    **{f"stats.x_holm__mutmut_{n}": "equal p-values get equal adjusted values whatever their order" for n in (19, 21, 23)},
    **{f"stats.x_paired_t_test__mutmut_{n}": "scipy handles zero variance itself: no numpy division happens" for n in (10, 11, 12, 13)},
    **{f"stats.x_paired_t_test__mutmut_{n}": _NUMERIC_INPUT for n in (24, 26, 28, 30)},
    "stats.x_per_query_values__mutmut_13": _PANDAS_ASTYPE_NONE,
    "stats.x_randomisation_test__mutmut_41": "integers(256, ...) is integers(0, 256, ...)",
    "stats.x_randomisation_test__mutmut_49": "one extra random byte per row when n % 8 == 0: " + _SEED_STREAM,
    "filtering.x_judge_pairs__mutmut_17": "warnings is always [] on this branch, the field's default",
    "filtering.x_judge_pairs__mutmut_38": "warnings is always [] on this branch, the field's default",
    "judges.offline.x_random_documents__mutmut_9": "another seed from the same digest: " + _SEED_STREAM,
    "judges.offline.x_random_documents__mutmut_10": "another seed from the same digest: " + _SEED_STREAM,
    "judges.offline.xǁOfflineLexicalJudgeǁcoverage__mutmut_17": "a token in the document is in the idf table: the default is never used",
    "judges.offline.xǁOfflineLexicalJudgeǁcoverage__mutmut_19": "a token in the document is in the idf table: the default is never used",
}


def equivalence_of(mutant: str) -> str | None:
    """The recorded reason a survivor is equivalent, or None (``mutant`` is mutmut's full name)."""
    return KNOWN_EQUIVALENT.get(mutant.removeprefix("retrieval_pipeline.core."))


# --------------------------------------------------------------------------------------------------
# Running one target
# --------------------------------------------------------------------------------------------------


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def mutmut_section(target: Target, source: Path) -> str:
    """The ``[tool.mutmut]`` section of the copy's pyproject.toml for one target (its test files that exist in ``source``)."""
    tests = [t for t in target.tests if (source / t).is_file()]
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["retrieval_pipeline"]\n'
        f"only_mutate = {_toml_list(s.path for s in target.scopes)}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        f"pytest_add_cli_args = {_toml_list(PYTEST_ARGS)}\n"
        f"also_copy = {_toml_list(c for c in COPIED if c not in ('retrieval_pipeline', 'pyproject.toml'))}\n"
        "use_git_change_detection = false\n"
        "use_setproctitle = false\n"
    )


def prepare_copy(target: Target, workdir: Path, source: Path) -> Path:
    """A fresh copy of the project ``source`` for one target (an old copy is removed: mutmut caches results by function)."""
    folder = workdir / target.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        origin, dest = source / name, folder / name
        if origin.is_dir():
            shutil.copytree(origin, dest, ignore=ignore)
        elif origin.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, dest)
    pyproject = folder / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + mutmut_section(target, source), encoding="utf-8")
    return folder


def run_mutmut(target: Target, folder: Path, timeout_s: int) -> tuple[int, float]:
    """Run mutmut in ``folder`` (one worker, niced, bounded); returns the exit code and the seconds taken."""
    mutmut = Path(sys.executable).with_name("mutmut")
    command = ["nice", "-n", "10", "timeout", "--kill-after=30", str(timeout_s), str(mutmut), "run", "--max-children", "1", *target.globs()]
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("RETRIEVAL_PIPELINE_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    started = time.monotonic()
    with (folder / "mutmut.log").open("w", encoding="utf-8") as log:
        code = subprocess.run(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    return code, time.monotonic() - started


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------


@dataclass
class Survivor:
    """A mutant no test killed: where it is and what it changed."""

    name: str
    status: str
    file: str
    line: int | None
    removed: list[str]
    added: list[str]

    def text(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        change = " | ".join(self.removed) + "  ->  " + " | ".join(self.added)
        why = equivalence_of(self.name)
        return f"{where}  [{self.status}]  {change}  ({self.name.rpartition('.')[2]})" + (f"\n      equivalent: {why}" if why else "")


@dataclass
class TargetResult:
    """The score of one target."""

    name: str
    total: int
    killed: int
    by_status: dict[str, int]
    by_file: dict[str, list[int]]  # file -> [killed, total]
    survivors: list[Survivor] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int = 0

    @property
    def score(self) -> float:
        return self.killed / self.total if self.total else float("nan")

    @property
    def equivalent(self) -> int:
        """Survivors recorded in :data:`KNOWN_EQUIVALENT`."""
        return sum(equivalence_of(s.name) is not None for s in self.survivors)


def _status_of(code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[code]


def mutant_statuses(target: Target, folder: Path) -> dict[str, tuple[Scope, str]]:
    """``{mutant name: (scope, status)}`` of the target's mutants, from mutmut's ``.meta`` files."""
    out: dict[str, tuple[Scope, str]] = {}
    for scope in target.scopes:
        meta = folder / "mutants" / f"{scope.path}.meta"
        if not meta.is_file():
            raise RuntimeError(f"target {target.name}: mutmut wrote no results for {scope.path} (see {folder / 'mutmut.log'})")
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        globs = scope.globs()
        out |= {name: (scope, _status_of(code)) for name, code in codes.items() if any(fnmatch.fnmatchcase(name, g) for g in globs)}
    return out


_DIFF_SCRIPT = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name, path=path) for name, path in json.load(sys.stdin)}))
"""


def mutant_diffs(folder: Path, names: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The unified diff of each ``(mutant name, file)``, read by mutmut in the target's copy."""
    if not names:
        return {}
    result = subprocess.run(
        [sys.executable, "-c", _DIFF_SCRIPT], cwd=folder, input=json.dumps(list(names)), capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def _function_span(source: str, function: str) -> tuple[int, int] | None:
    """The 1-based ``def`` line and last line of a module-level function or a ``Class.method`` in ``source``."""
    owner, _, name = function.rpartition(".")
    body = ast.parse(source).body
    if owner:
        body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == owner), [])
    node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)
    return (node.lineno, node.end_lineno or node.lineno) if node else None


def _function_of(mutant: str) -> str:
    """``Class.method`` or ``function`` from a mutant name."""
    mangled = mutant.rpartition(".")[2].partition("__mutmut_")[0]
    if mangled.startswith("xǁ"):
        _, owner, name = mangled.split("ǁ")
        return f"{owner}.{name}"
    return mangled.removeprefix("x_")


def _first_change(diff_lines: Sequence[str]) -> int:
    """1-based line, within the function's text, of the diff's first removed line."""
    index = 1
    for line in diff_lines:
        hunk = _HUNK.match(line)
        if hunk:
            index = int(hunk.group(1))
        elif line.startswith("-") and not line.startswith("---"):
            return index
        elif line.startswith(" "):
            index += 1
    return 1


def locate(source: str, mutant: str, diff: str) -> tuple[int | None, list[str], list[str]]:
    """The source line of a mutant's first changed line, with the removed and added lines (stripped).

    The diff is of the function alone (comments above it included); its first removed line is placed
    relative to the function's ``def`` line, then moved to the nearest line of the function with the
    same text.
    """
    lines = diff.splitlines()
    removed = [line[1:].strip() for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in lines if line.startswith("+") and not line.startswith("+++")]
    span = _function_span(source, _function_of(mutant))
    if span is None or not removed:
        return (span[0] if span else None), removed, added
    guess = span[0] + _first_change(lines) - 1
    texts = source.splitlines()
    same = [n for n in range(max(1, span[0] - 20), span[1] + 1) if texts[n - 1].strip() == removed[0]]
    return (min(same, key=lambda n: abs(n - guess)) if same else guess), removed, added


def collect(target: Target, folder: Path) -> TargetResult:
    """Count killed mutants per file and describe every survivor."""
    statuses = mutant_statuses(target, folder)
    by_status: dict[str, int] = {}
    by_file: dict[str, list[int]] = {s.path: [0, 0] for s in target.scopes}
    alive: list[tuple[str, str, str]] = []
    for name, (scope, status) in sorted(statuses.items(), key=lambda item: _natural(item[0])):
        by_status[status] = by_status.get(status, 0) + 1
        by_file[scope.path][1] += 1
        if status in KILLED_STATUSES:
            by_file[scope.path][0] += 1
        else:
            alive.append((name, scope.path, status))
    diffs = mutant_diffs(folder, [(name, path) for name, path, _ in alive])
    sources = {s.path: (folder / s.path).read_text(encoding="utf-8") for s in target.scopes}
    survivors = []
    for name, path, status in alive:
        line, removed, added = locate(sources[path], name, diffs.get(name, ""))
        survivors.append(Survivor(name, status, path, line, removed, added))
    killed = sum(k for k, _ in by_file.values())
    return TargetResult(target.name, len(statuses), killed, by_status, by_file, survivors)


def _natural(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("__mutmut_")
    return stem, int(number) if number.isdigit() else 0


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def report(result: TargetResult) -> str:
    """The printed block of one target: score, per-file counts, statuses, survivors."""
    head = f"== {result.name}: {result.killed}/{result.total} killed ({100 * result.score:.1f}%) in {result.seconds:.0f} s"
    head += f"; {len(result.survivors)} survivors, {result.equivalent} of them known equivalent"
    lines = [head + (f"  [mutmut exit {result.exit_code}]" if result.exit_code else "")]
    lines += [f"   {path}: {k}/{t}" for path, (k, t) in result.by_file.items()]
    lines.append("   statuses: " + ", ".join(f"{s} {n}" for s, n in sorted(result.by_status.items())))
    lines += [f"   survivor {s.text()}" for s in result.survivors]
    return "\n".join(lines)


def _check_workdir(workdir: Path) -> Path:
    resolved = workdir.resolve()
    if resolved == ROOT or ROOT in resolved.parents:
        raise SystemExit(f"--workdir {workdir} is inside the project ({ROOT}): mutmut must not write into the project tree")
    return resolved


def run_target(target: Target, workdir: Path, timeout_s: int, source: Path = ROOT) -> TargetResult:
    """Copy, run mutmut, collect: one target end to end."""
    folder = prepare_copy(target, workdir, source)
    code, seconds = run_mutmut(target, folder, timeout_s)
    try:
        result = collect(target, folder)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        tail = (folder / "mutmut.log").read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"target {target.name}: mutmut exit {code}: {error}\n--- end of {folder / 'mutmut.log'}:\n{tail}") from None
    result.seconds, result.exit_code = seconds, code
    return result


def main(argv: Sequence[str] | None = None) -> int:
    by_name = {t.name: t for t in TARGETS}
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("targets", nargs="*", help=f"targets to run (default: all): {', '.join(by_name)}", metavar="TARGET")
    parser.add_argument("--list", action="store_true", help="print what each target mutates and which tests it runs, then stop")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rp-mutation"), help="where the project copies go (outside the project)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per target before mutmut is stopped")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--source", type=Path, default=ROOT, help="copy the project from here (default: this checkout; a snapshot for a 'before' run)"
    )
    parser.add_argument("--min-score", type=float, default=0.0, help="exit 1 when a target scores below this share (0.85 for the goal)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.targets if n not in by_name]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(by_name)}")
    chosen = [by_name[n] for n in args.targets] or list(TARGETS)
    if args.list:
        for t in chosen:
            print(
                f"{t.name}: {t.why}\n   mutates: " + "; ".join(s.path + (f" {list(s.functions)}" if s.functions else "") for s in t.scopes)
            )
            print("   tests:   " + " ".join(t.tests))
        return 0
    if not Path(sys.executable).with_name("mutmut").is_file():
        raise SystemExit(f"mutmut is not installed beside {sys.executable}: pip install -e '.[mutation]' (make mutation does it)")
    workdir = _check_workdir(args.workdir)
    results = []
    for target in chosen:
        result = run_target(target, workdir, args.timeout, args.source.resolve())
        print(report(result), flush=True)
        results.append(result)
    total, killed = sum(r.total for r in results), sum(r.killed for r in results)
    print(f"== all: {killed}/{total} killed ({100 * killed / max(total, 1):.1f}%)")
    if args.json:
        rows = [asdict(r) | {"score": r.score, "equivalent": r.equivalent} for r in results]
        for row in rows:
            for survivor in row["survivors"]:
                survivor["equivalent"] = equivalence_of(survivor["name"])
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    return 1 if any(r.score < args.min_score for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
