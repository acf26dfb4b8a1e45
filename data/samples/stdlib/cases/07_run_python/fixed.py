"""Run a snippet of Python in a fresh interpreter and collect what it prints."""

import subprocess
import sys


def run_python(code: str, timeout: float = 30) -> str:
    """Return the snippet's standard output without the trailing newline.

    A non-zero exit status raises ``subprocess.CalledProcessError``.
    """
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return result.stdout.rstrip("\n")
