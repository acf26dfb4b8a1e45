"""A batch of proofs in one sandbox: the runner's files and settings, and the results it sends back.

:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_pytest_batch` runs the proofs of one question in one such sandbox: a runner
imports pytest once, runs a throw-away session, then forks one process per proof, each exactly as
:func:`~retrieval_pipeline.core.services.sandbox.bubblewrap.run_pytest` would start it (same arguments, working directory, limits, outcome and output).
Between two proofs it kills every other process of the sandbox and empties everything writable (the
working directory, ``/tmp``, ``/dev/shm``), and it stops when ``/dev`` or the folders leading to the
working directory changed. Results travel through a descriptor only the runner holds: a file of the
host passed through bwrap (whose pid 1 closes it), closed in each proof's process before the proof runs;
the runner is not dumpable and holds no key a proof could copy (a forked proof sees the runner's memory
as it was). The runner is the real module ``sandbox_side/batch_runner.py``, its settings a JSON file.
Whatever the batch did not report, the caller runs alone. Concurrent runs (several questions at once)
share nothing: each has its own temporary folder, bwrap namespaces, pids and memory cgroups (named by
pid, a counter and the clock; removed after the run). A batch's memory cgroup allows the runner's
``_RUNNER_MEMORY_MB`` on top of ``memory_mb``.

The results come back through a result channel, a descriptor only the runner holds: each line a
record of one file, read here into that file's :class:`~retrieval_pipeline.core.services.sandbox.results.Execution`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources

from retrieval_pipeline.core.services.sandbox.results import Execution, make_execution, truncated_text
from retrieval_pipeline.core.services.sandbox.settings import PYTEST_ARGS, SandboxSettings

BATCH_RUNNER_FILE = "rp_batch_runner.py"
BATCH_CONFIG_FILE = "rp_batch_config.json"
#: What a batch's memory cgroup allows on top of a proof's: the runner, warmed up (a forked proof shares its pages).
_RUNNER_MEMORY_MB = 192
#: The package holding the files that run inside the sandbox (the batch runner), read as resources.
_SANDBOX_SIDE = "retrieval_pipeline.core.services.sandbox.sandbox_side"
_BATCH_PREFIX = "RPBATCH "
#: The most module names a runner imports before the proofs.
MAX_PRELOAD = 32


def batch_files(tests: Sequence[tuple[str, str]], settings: SandboxSettings) -> tuple[dict[str, str], list[str], SandboxSettings]:
    """The batch's files (the runner and its JSON settings), the runner's argv, and the sandbox that runs them all.

    The batch's sandbox allows the runner's start and then each file's own wall-clock limit, one more
    process (the runner), and ``_RUNNER_MEMORY_MB`` on top of the memory of one proof.
    """
    config = {
        "tests": [[filename, source] for source, filename in tests],
        "timeout_s": settings.timeout_s,
        "output_bytes": settings.max_output_chars * 4,
        "collect_suffix": ".evidence.json",
        "artifact_bytes": 256 * 1024,
        "pytest_args": list(PYTEST_ARGS),
        "preload": preload_names([source for source, _ in tests], settings.preload),
    }
    runner = resources.files(_SANDBOX_SIDE).joinpath("batch_runner.py").read_text(encoding="utf-8")
    batch = dataclasses.replace(
        settings,
        timeout_s=settings.timeout_s * (len(tests) + 1) + 10,  # the runner's start, then each file's own limit
        max_processes=settings.max_processes + 1,  # the runner itself
        total_memory_mb=(settings.total_memory_mb or settings.memory_mb) + _RUNNER_MEMORY_MB,
    )
    files = {BATCH_RUNNER_FILE: runner, BATCH_CONFIG_FILE: json.dumps(config)}
    argv = [str(settings.python), BATCH_RUNNER_FILE, BATCH_CONFIG_FILE]
    return files, argv, batch


def preload_names(sources: Sequence[str], packages: Sequence[str]) -> list[str]:
    """The dotted names under ``packages`` that two or more of ``sources`` contain, sorted (at most ``MAX_PRELOAD``).

    The runner imports each one's longest importable prefix once, before it forks the proofs
    (``preload()`` in ``sandbox_side/batch_runner.py``): a proof that names a module of the library under test
    usually imports it, and a name only one proof has is imported no sooner there than in the runner.
    """
    if not packages or len(sources) < 2:
        return []
    roots = "|".join(re.escape(package) for package in sorted(packages, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.])(?:{roots})(?!\w)(?:\.[A-Za-z_]\w*)*")
    counts = Counter(name for source in sources for name in set(pattern.findall(source)))
    return sorted(name for name, count in counts.items() if count >= 2)[:MAX_PRELOAD]


def batch_results(channel: bytes, count: int, max_chars: int) -> list[Execution | None]:
    """Per file, its :class:`Execution` from what came through the channel, or None where the runner sent none."""
    records = _batch_records(channel, count)
    results: list[Execution | None] = []
    for index in range(count):
        record = records.get(index)
        results.append(None if record is None else _batch_execution(record, max_chars))
    return results


def _batch_records(channel: bytes, count: int) -> dict[int, dict[str, object]]:
    """The runner's result records, by file index: the first one per file.

    They come from the result channel, a descriptor that only the runner holds inside the sandbox (what
    a proof prints goes elsewhere), so they need no signature: no key exists that a proof could steal.
    """
    records: dict[int, dict[str, object]] = {}
    for line in channel.decode("utf-8", errors="replace").splitlines():
        if not line.startswith(_BATCH_PREFIX):
            continue
        try:
            record = json.loads(line[len(_BATCH_PREFIX) :])
        except ValueError:
            continue
        index = record.get("index") if isinstance(record, dict) else None
        if isinstance(index, int) and 0 <= index < count and index not in records:
            records[index] = record
    return records


def _batch_execution(record: Mapping[str, object], max_chars: int) -> Execution | None:
    """One file's :class:`Execution` from its record (None when the record does not say how the file ended)."""
    try:
        returncode = record["returncode"]
        timed_out = bool(record["timed_out"])
        if returncode is not None and not isinstance(returncode, int) or (returncode is None and not timed_out):
            return None
        streams = []
        for name in ("stdout", "stderr"):
            data = base64.b64decode(str(record[name]), validate=True)
            streams.append(truncated_text(data, int(record[f"{name}_size"]), max_chars))  # type: ignore[call-overload]
        artifacts = {str(k): str(v) for k, v in dict(record["artifacts"]).items()}  # type: ignore[call-overload]
        duration = float(record["duration"])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return None
    return make_execution(returncode, timed_out, streams[0], streams[1], duration, False, artifacts)
