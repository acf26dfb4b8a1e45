"""All suites of one dataset loaded together, with case ids unique across files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrieval_pipeline.core.common.types import Rejected
from retrieval_pipeline.core.datasets.suite.reader import SuiteLoad, load_suite


def suite_name(path: Path) -> str:
    """``.../api_understanding/benchmark.yaml`` → ``api_understanding``; ``.../fix_errors.yaml`` → ``fix_errors``."""
    return path.parent.name if path.stem == "benchmark" else path.stem


def load_suites(paths: Sequence[Path], files_root: Path | None = None) -> SuiteLoad:
    """Load every suite file; a case id already seen in an earlier file is rejected with both places named.

    Args:
        paths: The suite files.
        files_root: The dataset's ``suite_files_root``: fix_error file paths resolve against it and must stay
            inside it. None: each suite's own folder.
    """
    cases, rejects, total = [], [], 0
    seen: dict[str, str] = {}
    for path in paths:
        loaded = load_suite(path, suite=suite_name(Path(path)), files_root=files_root)
        total += loaded.total
        rejects.extend(loaded.rejects)
        for case in loaded.cases:
            if case.case_id in seen:
                reason = f"duplicate id {case.case_id!r}: already defined in {seen[case.case_id]}"
                rejects.append(Rejected(case.source_file, case.case_id, case.index, reason))
                continue
            seen[case.case_id] = case.source_file
            cases.append(case)
    return SuiteLoad(cases=cases, rejects=rejects, total=total)
