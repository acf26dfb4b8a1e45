"""benchmarks/compare_full_scale.py at a tiny scale: the four timed lines, the file compare run in its own process."""

from __future__ import annotations

import re
import subprocess
import sys


def test_a_tiny_run_prints_evaluate_and_compare_in_memory_and_from_files(project_root) -> None:
    script = project_root / "benchmarks" / "compare_full_scale.py"
    args = ["--queries", "40", "--depth", "30", "--runs", "3", "--permutations", "200"]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"^set: 40 queries x 30 docs x 3 runs, generated in [\d.]+ s", out, re.M), out
    assert re.search(r"^evaluate in memory, 3 runs x 5 metrics: [\d.]+ s$", out, re.M), out
    assert re.search(r"^compare in memory, 3 pairs x 4 metrics x 200 permutations: [\d.]+ s; peak [\d,]+ MiB$", out, re.M), out
    assert re.search(r"^compare from the 3 TREC run files: [\d.]+ s; peak [\d,]+ MiB$", out, re.M), out
