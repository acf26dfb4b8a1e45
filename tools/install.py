"""``pip install ARGS`` into a virtual environment, done by uv when uv can be had, else by pip itself.

    python3 tools/install.py .venv -q -c constraints/pipeline.txt -e '.[dev]'

Why: pip spent most of ``make test``'s install (137 s of 646 s from a fresh clone) unpacking, linking and compiling
torch and the project's 190 pinned packages one after another; uv does the same work in parallel. The packages are the
same ones: uv gets the sources pip would use, read from pip's own configuration (``pip config list``: the index, the
extra indexes, find-links, constraint files and the CA bundle of this machine's pip.conf and PIP_* variables), and
``--index-strategy unsafe-best-match`` makes it pick among all of them as pip does (the highest version allowed, so
``torch==2.13.0`` is the ``+cpu`` build from find-links, as with pip). ``--compile-bytecode``: pip writes the
bytecode of every installed module too, and the test workers read it (see the Makefile's ``test``).

uv itself is a pinned wheel installed by the venv's pip, from the same sources, into ``VENV/uv`` (outside
site-packages, so ``pip freeze`` of the venv is what pip alone would have installed). pip does the install instead,
saying why, when uv cannot be installed, when pip's configuration holds an option this script does not translate,
or when uv fails.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

UV = "uv==0.13.9"
#: pip options that choose what gets installed, and uv's spelling of each (values: whitespace-separated lists)
TRANSLATED = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "-c"}
#: pip options that change nothing uv installs (cert becomes SSL_CERT_FILE, the timeout UV_HTTP_TIMEOUT)
HARMLESS = {
    "cert",
    "default-timeout",
    "timeout",
    "disable-pip-version-check",
    "no-input",
    "progress-bar",
    "quiet",
    "verbose",
    "root-user-action",
    "no-cache-dir",
    "retries",
}


def pip_options(pip: str) -> dict[str, str] | str:
    """pip's effective install options (``:env:`` over ``install`` over ``global``), or why uv cannot stand in."""
    got = subprocess.run([pip, "config", "list"], capture_output=True, text=True)
    if got.returncode != 0:
        return f"`pip config list` failed: {got.stderr.strip()[-500:]}"
    listing = got.stdout
    layers: dict[str, dict[str, str]] = {":env:": {}, "install": {}, "global": {}}
    for line in listing.splitlines():
        name, _, value = line.partition("=")
        section, _, key = name.rpartition(".")
        if section not in layers:
            continue  # another command's section (download, list, ...)
        if key not in TRANSLATED and key not in HARMLESS:
            return f"pip's configuration sets {name}, which this script does not translate for uv"
        layers[section][key] = value.strip().strip("'\"")
    return {**layers["global"], **layers["install"], **layers[":env:"]}


def uv_command(uv: Path, venv: Path, options: dict[str, str], args: list[str]) -> tuple[list[str], dict[str, str]]:
    command = [str(uv), "pip", "install", "--python", str(venv / "bin" / "python"), "--index-strategy", "unsafe-best-match"]
    command += ["--compile-bytecode"]  # as pip does; the bytecode is most of an install's time (see the docstring)
    for key, flag in TRANSLATED.items():
        for value in options.get(key, "").split():
            command += [flag, value]
    env = dict(os.environ)
    if "cert" in options:
        env["SSL_CERT_FILE"] = options["cert"]
    if options.get("default-timeout", options.get("timeout")):
        env["UV_HTTP_TIMEOUT"] = options.get("default-timeout", options.get("timeout", ""))
    return command + args, env


def main(venv: Path, args: list[str]) -> int:
    pip = str(venv / "bin" / "pip")
    uv = venv / "uv" / "bin" / "uv"
    options = pip_options(pip)
    why = options if isinstance(options, str) else ""
    if not why and not uv.exists():
        got = subprocess.run([pip, "install", "-q", "--target", str(venv / "uv"), UV], capture_output=True, text=True)
        why = "" if got.returncode == 0 and uv.exists() else f"{UV} could not be installed: {got.stderr.strip()[-500:]}"
    if not why:
        command, env = uv_command(uv, venv, options, args)
        if subprocess.run(command, env=env).returncode == 0:
            return 0
        why = "uv failed (above): " + shlex.join(command)
    print(f"install: pip instead of uv, because {why}", file=sys.stderr)
    return subprocess.run([pip, "install", *args]).returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
